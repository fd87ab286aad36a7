//! The `topology.nephio.org/v1alpha1` resources the built-in preparers read, typed, and the
//! pure parts of what they do: reading a resource's choice of template or sites, and building
//! the merge package a placement hands each child.
//!
//! Names inside a `Placement` point at resources of the same package: `template` names a
//! `Template` resource, each of `sites` names a `Site` or `Sites` resource, and each `merge`
//! entry references (apiVersion, kind, name) a resource merged into every child made from that
//! template.

use nephrite_krm::{Gvk, Object, Package};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{IdError, validate_id};
use crate::metadata::MetadataSelector;

/// The API group of the built-in topology resources.
pub const TOPOLOGY_GROUP: &str = "topology.nephio.org";
/// Their version.
pub const TOPOLOGY_VERSION: &str = "v1alpha1";

/// The GVK of a topology kind (`Placement`, `Template`, `Site`, `Sites`).
pub fn topology_gvk(kind: &str) -> Gvk {
    Gvk::new(TOPOLOGY_GROUP, TOPOLOGY_VERSION, kind)
}

/// The kinds with a built-in preparer.
pub const BUILT_IN_KINDS: [&str; 4] = ["Placement", "Template", "Site", "Sites"];

/// Whether `gvk` has a built-in preparer.
pub fn is_built_in(gvk: &Gvk) -> bool {
    gvk.group == TOPOLOGY_GROUP
        && gvk.version == TOPOLOGY_VERSION
        && BUILT_IN_KINDS.contains(&gvk.kind.as_str())
}

/// Why a topology resource could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The spec does not have the expected shape.
    #[error("{kind} {name}: bad spec: {source}")]
    BadSpec {
        /// The kind.
        kind: String,
        /// The resource name.
        name: String,
        /// What is wrong.
        source: serde_json::Error,
    },
    /// A named resource is not in the package.
    #[error("{what} not found: {name}")]
    NotFound {
        /// `template`, `site` or `merge resource`.
        what: &'static str,
        /// The name looked up.
        name: String,
    },
    /// Neither an id nor a selector.
    #[error("{kind} {name}: spec needs {field} or select.metadata")]
    NoChoice {
        /// The kind.
        kind: String,
        /// The resource name.
        name: String,
        /// `templateId` or `siteId`.
        field: &'static str,
    },
    /// An id or pattern is invalid.
    #[error("{kind} {name}: {source}")]
    BadId {
        /// The kind.
        kind: String,
        /// The resource name.
        name: String,
        /// What is wrong.
        source: IdError,
    },
}

/// An object reference inside a spec (`apiVersion`, `kind`, `name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeRef {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// name.
    pub name: String,
}

/// `select` of a Template / Site / Sites spec.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Select {
    /// `key → value pattern`.
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// One entry of `Placement.spec.templates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementTemplate {
    /// Name of a `Template` resource in the package.
    pub template: String,
    /// Names of `Site` / `Sites` resources in the package.
    #[serde(default)]
    pub sites: Vec<String>,
    /// Resources of the package merged into each child.
    #[serde(default)]
    pub merge: Vec<MergeRef>,
}

/// `Placement.spec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// What to place where.
    #[serde(default)]
    pub templates: Vec<PlacementTemplate>,
}

/// `Template.spec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSpec {
    /// A template id.
    #[serde(default)]
    pub template_id: Option<String>,
    /// Or the first template matching this.
    #[serde(default)]
    pub select: Option<Select>,
}

/// `Site.spec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SiteSpec {
    /// A site id.
    #[serde(default)]
    pub site_id: Option<String>,
    /// Or the first site matching this.
    #[serde(default)]
    pub select: Option<Select>,
    /// When no site matches, provision one.
    #[serde(default)]
    pub provision_if_not_found: bool,
    /// The template of the deployment that provisions the site.
    #[serde(default)]
    pub provision_template_id: Option<String>,
    /// Resources merged into the provisioning deployment.
    #[serde(default)]
    pub merge: Vec<MergeRef>,
}

/// `Sites.spec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SitesSpec {
    /// Every site matching this.
    #[serde(default)]
    pub select: Option<Select>,
}

/// How a `Template` or `Site` resource picks one template or site.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// This id.
    Id(String),
    /// The first one (by id) whose metadata matches.
    Select(MetadataSelector),
}

/// Reads an object's spec as `T` (an absent spec reads as `{}`).
pub fn read_spec<T: for<'de> Deserialize<'de>>(object: &Object) -> Result<T, TopologyError> {
    let spec = object
        .spec()
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    serde_json::from_value(spec).map_err(|source| TopologyError::BadSpec {
        kind: object.kind.clone(),
        name: object.name().unwrap_or_default().to_owned(),
        source,
    })
}

fn choice(
    object: &Object,
    id: Option<&str>,
    select: Option<&Select>,
    field: &'static str,
) -> Result<Choice, TopologyError> {
    let bad = |source| TopologyError::BadId {
        kind: object.kind.clone(),
        name: object.name().unwrap_or_default().to_owned(),
        source,
    };
    if let Some(id) = id.filter(|id| !id.is_empty()) {
        validate_id(id).map_err(bad)?;
        return Ok(Choice::Id(id.to_owned()));
    }
    match select.and_then(|s| s.metadata.as_ref()) {
        Some(metadata) => Ok(Choice::Select(
            MetadataSelector::from_json(Some(metadata)).map_err(bad)?,
        )),
        None => Err(TopologyError::NoChoice {
            kind: object.kind.clone(),
            name: object.name().unwrap_or_default().to_owned(),
            field,
        }),
    }
}

/// The template a `Template` resource picks.
pub fn template_choice(object: &Object) -> Result<Choice, TopologyError> {
    let spec: TemplateSpec = read_spec(object)?;
    choice(
        object,
        spec.template_id.as_deref(),
        spec.select.as_ref(),
        "templateId",
    )
}

/// The site a `Site` resource picks (provisioning is read from [`SiteSpec`] separately).
pub fn site_choice(object: &Object) -> Result<Choice, TopologyError> {
    let spec: SiteSpec = read_spec(object)?;
    choice(
        object,
        spec.site_id.as_deref(),
        spec.select.as_ref(),
        "siteId",
    )
}

/// The selector of a `Sites` resource (an absent selector selects every site).
pub fn sites_selector(object: &Object) -> Result<MetadataSelector, TopologyError> {
    let spec: SitesSpec = read_spec(object)?;
    MetadataSelector::from_json(spec.select.as_ref().and_then(|s| s.metadata.as_ref())).map_err(
        |source| TopologyError::BadId {
            kind: object.kind.clone(),
            name: object.name().unwrap_or_default().to_owned(),
            source,
        },
    )
}

/// The resource of `package` named `name` of `kind` (topology group), or `what not found`.
pub fn find_named<'a>(
    package: &'a Package,
    kinds: &[&str],
    name: &str,
    what: &'static str,
) -> Result<&'a Object, TopologyError> {
    kinds
        .iter()
        .find_map(|kind| package.get(&topology_gvk(kind), name))
        .ok_or_else(|| TopologyError::NotFound {
            what,
            name: name.to_owned(),
        })
}

/// The merge package made of the resources `refs` name in `package`, in the order given.
pub fn merge_package_for(package: &Package, refs: &[MergeRef]) -> Result<Package, TopologyError> {
    refs.iter()
        .map(|r| {
            let gvk = Gvk::from_api_version_kind(&r.api_version, &r.kind).map_err(|_| {
                TopologyError::NotFound {
                    what: "merge resource",
                    name: format!("{} {} {}", r.api_version, r.kind, r.name),
                }
            })?;
            package
                .get(&gvk, &r.name)
                .cloned()
                .ok_or_else(|| TopologyError::NotFound {
                    what: "merge resource",
                    name: format!("{} {} {}", r.api_version, r.kind, r.name),
                })
        })
        .collect()
}

/// The instance key of the child a placement creates for one template entry: stable across
/// re-preparations, so repeating the creation finds the existing child.
pub fn placement_instance_key(placement: &str, template: &str) -> String {
    format!("Placement/{placement}/{template}")
}

#[cfg(test)]
mod tests;
