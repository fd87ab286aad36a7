//! The change feed's values: what `Watch` sends for every write the store logs.

use crate::DeploymentInfo;

/// What kind of entry a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKind {
    /// A template.
    Template,
    /// A site.
    Site,
    /// A plugin.
    Plugin,
    /// A deployment.
    Deployment,
    /// A named lease: put when a new holder takes it, deleted when released (renewals make
    /// no change).
    Lease,
}

impl EntityKind {
    /// The spelling the store keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Template => "template",
            EntityKind::Site => "site",
            EntityKind::Plugin => "plugin",
            EntityKind::Deployment => "deployment",
            EntityKind::Lease => "lease",
        }
    }

    /// From [`Self::as_str`]'s spelling.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "template" => EntityKind::Template,
            "site" => EntityKind::Site,
            "plugin" => EntityKind::Plugin,
            "deployment" => EntityKind::Deployment,
            "lease" => EntityKind::Lease,
            _ => return None,
        })
    }
}

/// One change, in revision order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its revision (increasing).
    pub revision: u64,
    /// What kind of entry.
    pub kind: EntityKind,
    /// Which one.
    pub id: String,
    /// Whether it was deleted (else created or updated).
    pub deleted: bool,
    /// For a deployment that was put: its row as of this change's delivery (`None` when it was
    /// deleted before; its delete follows).
    pub deployment: Option<DeploymentInfo>,
}
