//! Deployments as the Data API shows them: their rows, packages, the requests that create and
//! list them, and the modifications (exclusive leases) that serialise their writers.

use std::collections::BTreeMap;

use crate::{Metadata, Window};

/// A deployment's row (everything but its package). The store keeps the same row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeploymentInfo {
    /// Id.
    pub id: String,
    /// Parent id (empty: none).
    pub parent_id: String,
    /// Template id (empty: none).
    pub template_id: String,
    /// Site id (empty: none).
    pub site_id: String,
    /// Instance key (empty: none).
    pub instance_key: String,
    /// Metadata.
    pub metadata: Metadata,
    /// Created, RFC 3339.
    pub created: String,
    /// Updated, RFC 3339.
    pub updated: String,
    /// Whether the package is prepared.
    pub prepared: bool,
    /// Whether it is approved.
    pub approved: bool,
    /// The last preparer error (empty: none).
    pub error: String,
}

/// A deployment with its package.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Deployment {
    /// The row.
    pub info: DeploymentInfo,
    /// The package, multi-document YAML.
    pub package_yaml: String,
}

/// What creating a deployment asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeploymentRequest {
    /// The parent deployment (empty: none).
    pub parent_id: String,
    /// The template (empty: none).
    pub template_id: String,
    /// The site (empty: none).
    pub site_id: String,
    /// Merged into the template's package (YAML).
    pub merge_package_yaml: String,
    /// Laid over the template's metadata.
    pub merge_metadata: BTreeMap<String, String>,
    /// Marked prepared at once.
    pub prepared: bool,
    /// Marked approved at once.
    pub approved: bool,
    /// With an instance key, (parent, template, site, instance key) is unique: repeating the
    /// create returns the existing id with `created = false`.
    pub instance_key: String,
}

/// The answer to a create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Created {
    /// False when a deployment with the same instance key existed.
    pub created: bool,
    /// The deployment's id.
    pub deployment_id: String,
}

/// Which deployments a listing returns (all filters must hold).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeploymentQuery {
    /// Only children of this deployment.
    pub parent_id: Option<String>,
    /// Metadata key → value pattern.
    pub metadata_patterns: BTreeMap<String, String>,
    /// Template ids matching any of these patterns.
    pub template_id_patterns: Vec<String>,
    /// Templates whose metadata matches these patterns.
    pub template_metadata_patterns: BTreeMap<String, String>,
    /// Site ids matching any of these patterns.
    pub site_id_patterns: Vec<String>,
    /// Sites whose metadata matches these patterns.
    pub site_metadata_patterns: BTreeMap<String, String>,
    /// Prepared state.
    pub prepared: Option<bool>,
    /// Approved state.
    pub approved: Option<bool>,
    /// The page.
    pub window: Window,
}

/// One page of a deployment listing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeploymentPage {
    /// The rows, by id.
    pub deployments: Vec<DeploymentInfo>,
    /// Where the next page starts (its `window.after_id`); `None` on the last page.
    pub next_after_id: Option<String>,
    /// The revision the page reflects: every change up to it is in the page (see
    /// [`crate::Listing`]); 0 from a preparer that does not say.
    pub revision: u64,
}

/// An exclusive lease on one deployment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Modification {
    /// The deployment.
    pub deployment_id: String,
    /// The token that holds the lease.
    pub token: String,
    /// The package as the lease started (empty in a renewal).
    pub package_yaml: String,
    /// When the lease ends unless renewed, RFC 3339.
    pub lease_expires: String,
}

/// One revision of a deployment's package: the package it had after one write that changed
/// it (its history).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeploymentRevision {
    /// 1 for the package it was created with, one more for each later write that changed it.
    pub number: i64,
    /// When it was written, RFC 3339.
    pub created: String,
    /// Who wrote it: a caller's identity, `anonymous`, `in-process`, or `preparer` for the
    /// preparation loop.
    pub author: String,
    /// One line saying what the write was.
    pub summary: String,
    /// The package, YAML (empty in a listing of revisions).
    pub package_yaml: String,
}

/// The most writes one [`crate::DataApi::apply_deployments`] batch may carry.
pub const MAX_BATCH: usize = 1000;

/// One write of a batch ([`crate::DataApi::apply_deployments`]), checked as its single call
/// is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeploymentWrite {
    /// Creates a deployment (or finds the one with the same instance key), as
    /// `create_deployment` does.
    Create(DeploymentRequest),
    /// Replaces a deployment's package, as `update_deployment` without a token does (refused
    /// as busy while a modification holds it).
    Update {
        /// The deployment.
        id: String,
        /// Its new package, YAML.
        package_yaml: String,
        /// When set, the write is refused as busy unless the deployment's `updated` is still
        /// this (it was read and is written back with nobody writing in between).
        if_updated: Option<String>,
    },
    /// Deletes a deployment and its descendants, as `delete_deployment` does.
    Delete {
        /// The deployment.
        id: String,
    },
}

impl DeploymentWrite {
    /// The id the write names: the deployment updated or deleted, or the instance key of
    /// one created (empty when it has none).
    pub fn id(&self) -> &str {
        match self {
            DeploymentWrite::Create(request) => &request.instance_key,
            DeploymentWrite::Update { id, .. } | DeploymentWrite::Delete { id } => id,
        }
    }
}

/// What one write of a batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteResult {
    /// A create's answer.
    Created(Created),
    /// An update's new row.
    Updated(DeploymentInfo),
    /// A delete's answer: whether the deployment existed.
    Deleted(bool),
}

/// A leader's proof of holding, carried by a batch: the named lease and the `transitions` it
/// had when this holder was granted it. The preparer writes the batch only while the lease
/// still has that holding, so a deposed leader (paused while another took over) cannot write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFence {
    /// The lease's name.
    pub name: String,
    /// Its `transitions` at the holder's grant.
    pub transitions: u64,
}
