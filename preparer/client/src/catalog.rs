//! The catalog's values: templates (packages deployments are made from), sites (where
//! deployments go) and plugins (remote preparers), and the queries that list them.

use std::collections::BTreeMap;

use nephrite_krm::Gvk;

use crate::Window;

/// Metadata: key → value, sorted by key.
pub type Metadata = BTreeMap<String, String>;

/// A template's id and metadata (a listing's row).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TemplateInfo {
    /// Id.
    pub id: String,
    /// The given metadata laid over the metadata extracted from the package.
    pub metadata: Metadata,
}

/// A template with its package.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Template {
    /// Id and metadata.
    pub info: TemplateInfo,
    /// The package, multi-document YAML.
    pub package_yaml: String,
}

/// A site's row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SiteInfo {
    /// Id.
    pub id: String,
    /// Metadata.
    pub metadata: Metadata,
    /// The template the site was provisioned from (empty: none).
    pub template_id: String,
    /// The deployment that provisioned the site (empty: none).
    pub deployment_id: String,
}

/// A site with its package.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Site {
    /// The row.
    pub info: SiteInfo,
    /// The package, multi-document YAML.
    pub package_yaml: String,
}

/// What a plugin is called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PluginType {
    /// Prepares the resources of its trigger types.
    #[default]
    Prepare,
    /// Validates packages.
    Validate,
    /// Schedules deployments.
    Schedule,
}

impl PluginType {
    /// The spelling the store keeps: `prepare`, `validate` or `schedule`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginType::Prepare => "prepare",
            PluginType::Validate => "validate",
            PluginType::Schedule => "schedule",
        }
    }

    /// From [`Self::as_str`]'s spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "prepare" => PluginType::Prepare,
            "validate" => PluginType::Validate,
            "schedule" => PluginType::Schedule,
            _ => return None,
        })
    }
}

/// A plugin registration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plugin {
    /// What it is called for.
    pub plugin_type: PluginType,
    /// Name (the id).
    pub name: String,
    /// Its gRPC endpoint (`http://HOST:PORT` or `unix:///PATH`).
    pub endpoint: String,
    /// Arguments passed on every call.
    pub arguments: Vec<String>,
    /// Properties passed on every call.
    pub properties: BTreeMap<String, String>,
    /// The resource types that trigger it; registering makes them preparable.
    pub triggers: Vec<Gvk>,
}

impl Plugin {
    /// Its triggers as `group/version/Kind` (`version/Kind` for the core group when `short`).
    pub fn trigger_texts(&self, short: bool) -> Vec<String> {
        self.triggers
            .iter()
            .map(|t| {
                if short && t.group.is_empty() {
                    format!("{}/{}", t.version, t.kind)
                } else {
                    format!("{}/{}/{}", t.group, t.version, t.kind)
                }
            })
            .collect()
    }
}

/// Which templates or sites a listing returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogQuery {
    /// Ids matching any of these patterns (`*`, `**`); empty: every id.
    pub id_patterns: Vec<String>,
    /// Metadata key (exact) → value pattern; all must match.
    pub metadata_patterns: BTreeMap<String, String>,
    /// The page.
    pub window: Window,
}

/// Which plugins a listing returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PluginQuery {
    /// Only this type (`None`: every type).
    pub plugin_type: Option<PluginType>,
    /// Names matching any of these patterns; empty: every name.
    pub name_patterns: Vec<String>,
    /// Only plugins with this trigger.
    pub trigger: Option<Gvk>,
    /// The page.
    pub window: Window,
}
