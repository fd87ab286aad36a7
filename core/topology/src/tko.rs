//! What the TKO backend decides, on the preparer's terms: sites play the clusters, each
//! variant is a child deployment of the NFTopology's deployment, approval plays publication.
//!
//! - A site's metadata `Site.<k>` is the cluster label `<k>` (other keys are not labels).
//! - A variant's child deployment: template = the class's `packageRef.packageName`, site = the
//!   cluster, instance key = the deployed id (so creating it again — after a restart — returns
//!   the existing child), metadata `nf-deployment-name`, the instance and type labels and
//!   `nf-deployed-id`; merged in: the package's `Deployment` resource (with
//!   `nephio.org/approve: Manual` when the variant is gated), the `Capacity` and one
//!   `req.nephio.org/v1alpha1` `Interface` per attachment (`spec.networkInstance.name`).
//! - A gated child is approved once every variant it waits for has an approved child.
//! - The deployed topology lists the variants with an approved child.
//! - For re-planning ([`crate::replan`]), a child is stamped with its spec fingerprint
//!   ([`stamped_child_deployment`]) and read back as an [`ExistingChild`]
//!   ([`existing_child`], [`package_fingerprint`]).

use std::collections::BTreeMap;

use indexmap::IndexMap;
use nephrite_krm::{Gvk, Object, Package, keys};
use serde_json::json;

use crate::api::{Cluster, NFTopologyStatus, PackageStatus};
use crate::deployed::DeployedTopologyBuilder;
use crate::plan::Plan;
use crate::porch;
use crate::replan::{
    ChildKey, ExistingChild, Fingerprint, PlannedChild, ReplanError, SPEC_FINGERPRINT_KEY,
};
use crate::status::topology_status;
use nephrite_krm::Condition;

/// Prefix of the site metadata keys that are cluster labels.
pub const SITE_PREFIX: &str = "Site.";
/// Child metadata key: the deployed id.
pub const DEPLOYED_ID_KEY: &str = "nf-deployed-id";

/// The clusters the sites stand for.
pub fn clusters_from_sites<'a, I, M>(sites: I) -> Vec<Cluster>
where
    I: IntoIterator<Item = (&'a str, &'a M)>,
    M: 'a,
    &'a M: IntoIterator<Item = (&'a String, &'a String)>,
{
    sites
        .into_iter()
        .map(|(id, metadata)| Cluster {
            name: id.to_owned(),
            labels: metadata
                .into_iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(SITE_PREFIX)?.to_owned(), v.clone())))
                .collect(),
        })
        .collect()
}

/// A child deployment to create.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildDeployment {
    /// The variant.
    pub variant: usize,
    /// The template.
    pub template_id: String,
    /// The site.
    pub site_id: String,
    /// The instance key (the deployed id).
    pub instance_key: String,
    /// Merged into the template's package.
    pub merge_package: Package,
    /// Laid over the template's metadata.
    pub merge_metadata: IndexMap<String, String>,
    /// Whether it waits for others (created with `nephio.org/approve: Manual`).
    pub gated: bool,
}

/// The child deployment of every variant.
pub fn child_deployments(plan: &Plan) -> Vec<ChildDeployment> {
    (0..plan.variants().len())
        .map(|v| child_deployment(plan, v))
        .collect()
}

/// The child deployment of variant `v` (a position in [`Plan::variants`]).
///
/// # Panics
///
/// When `v` is not a variant of `plan`.
pub fn child_deployment(plan: &Plan, v: usize) -> ChildDeployment {
    let variant = &plan.variants()[v];
    let instance = &plan.instances()[variant.instance];
    let gated = plan.is_gated(v);
    let mut package = Package::new();
    let mut deployment = Object::new(
        &Gvk::new("deployment.nephio.org", "v1alpha1", "Deployment"),
        "deployment",
    );
    if gated {
        deployment.set_annotation(keys::APPROVE, keys::APPROVE_MANUAL);
    }
    package.push(deployment);
    if let Some(capacity) =
        porch::capacity(plan, variant.instance).and_then(|c| Object::from_typed(&c).ok())
    {
        package.push(capacity);
    }
    for interface in &instance.interfaces {
        let mut object = Object::new(
            &Gvk::new("req.nephio.org", "v1alpha1", "Interface"),
            &interface.name,
        );
        let _ = object.body.insert(
            "spec",
            json!({"networkInstance": {"name": interface.network_instance_name}}),
        );
        package.push(object);
    }
    let mut merge_metadata = plan.labels(variant.instance);
    merge_metadata.insert(DEPLOYED_ID_KEY.to_owned(), variant.id.clone());
    ChildDeployment {
        variant: v,
        template_id: instance.class.package_ref.package_name.clone(),
        site_id: variant.cluster.clone(),
        instance_key: variant.id.clone(),
        merge_package: package,
        merge_metadata,
        gated,
    }
}

/// The child deployment of a planned child (see [`crate::replan::desired_children`]), stamped
/// with its spec fingerprint: under [`SPEC_FINGERPRINT_KEY`] in its metadata (set when it is
/// created) and as that annotation on every resource of its merge package — the `Deployment`'s
/// is the one read back ([`package_fingerprint`]; an update replaces the package, not the
/// metadata), and the others mark what ntc rendered, for [`prune_for_update`]. The rest is
/// [`child_deployment`]'s.
pub fn stamped_child_deployment(plan: &Plan, child: &PlannedChild) -> ChildDeployment {
    let mut deployment = child_deployment(plan, child.variant);
    let fingerprint = child.fingerprint.to_string();
    for object in deployment.merge_package.iter_mut() {
        object.set_annotation(SPEC_FINGERPRINT_KEY, &fingerprint);
    }
    deployment
        .merge_metadata
        .insert(SPEC_FINGERPRINT_KEY.to_owned(), fingerprint);
    deployment
}

/// Readies a child's current `package` for an update to `child` (a
/// [`stamped_child_deployment`]): removes the resources an earlier rendering put there (they
/// carry [`SPEC_FINGERPRINT_KEY`]) that `child` no longer renders — an interface whose network
/// was removed, a capacity dropped from the template — and returns them as `Kind/name`. Merging
/// `child.merge_package` into what is left (`nephrite_merge::merge_package`) gives the
/// package to write; resources the template brought and ntc never rendered are kept.
pub fn prune_for_update(package: &mut Package, child: &ChildDeployment) -> Vec<String> {
    let rendered = |object: &Object| {
        child.merge_package.iter().any(|o| {
            o.api_version == object.api_version
                && o.kind == object.kind
                && o.name() == object.name()
        })
    };
    let mut removed = Vec::new();
    package.retain(|object| {
        let stale = object.annotation(SPEC_FINGERPRINT_KEY).is_some() && !rendered(object);
        if stale {
            removed.push(format!(
                "{}/{}",
                object.kind,
                object.name().unwrap_or_default()
            ));
        }
        !stale
    });
    removed
}

/// The fingerprint a child's package carries on its `Deployment` resource: `None` when it
/// carries none, or one that does not read (the child is then updated, which rewrites it).
pub fn package_fingerprint(package: &Package) -> Option<Fingerprint> {
    package
        .iter()
        .filter(|o| o.kind == "Deployment")
        .find_map(|o| o.annotation(SPEC_FINGERPRINT_KEY))
        .and_then(|value| value.parse().ok())
}

/// A TKO child deployment as the re-plan sees it: its key from its site and its metadata
/// (`nf-deployment-name`, `topology.nephio.org/nf-instance`), its fingerprint from its
/// metadata (`None` when absent or unreadable). Where the package was read, prefer
/// [`package_fingerprint`]: the metadata keeps the fingerprint the child was created with.
pub fn existing_child<'a, M>(
    id: &str,
    site: &str,
    metadata: M,
    prepared: bool,
    approved: bool,
) -> Result<ExistingChild, ReplanError>
where
    M: IntoIterator<Item = (&'a String, &'a String)> + Clone,
{
    let key = ChildKey::from_metadata(id, site, metadata.clone())?;
    let fingerprint = metadata
        .into_iter()
        .find(|(k, _)| k.as_str() == SPEC_FINGERPRINT_KEY)
        .and_then(|(_, v)| v.parse().ok());
    Ok(ExistingChild {
        id: id.to_owned(),
        key,
        fingerprint,
        prepared,
        approved,
    })
}

/// A child deployment as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedChild {
    /// Its deployment id.
    pub id: String,
    /// Its instance key (the deployed id it was created for).
    pub instance_key: String,
    /// Whether it is prepared.
    pub prepared: bool,
    /// Whether it is approved.
    pub approved: bool,
}

/// The children of one NFTopology deployment, sorted onto the plan's variants.
#[derive(Debug, Clone, Default)]
pub struct ChildObservation {
    /// Children by variant.
    pub by_variant: BTreeMap<usize, Vec<ObservedChild>>,
    /// Children the plan has no variant for.
    pub orphans: Vec<ObservedChild>,
}

impl ChildObservation {
    /// Sorts `children` by their instance key.
    pub fn new(plan: &Plan, children: impl IntoIterator<Item = ObservedChild>) -> Self {
        let mut observation = ChildObservation::default();
        for child in children {
            match plan.variant_by_id(&child.instance_key) {
                Some(v) => observation.by_variant.entry(v).or_default().push(child),
                None => observation.orphans.push(child),
            }
        }
        observation
    }

    /// Whether variant `v` has an approved child.
    pub fn is_approved(&self, v: usize) -> bool {
        self.by_variant
            .get(&v)
            .is_some_and(|children| children.iter().any(|c| c.approved))
    }

    /// The children to approve: unapproved children of gated variants whose every gate is open.
    pub fn approvals(&self, plan: &Plan) -> Vec<String> {
        let mut ids = Vec::new();
        for (&v, children) in &self.by_variant {
            let gates = plan.gates(v);
            if gates.is_empty() || !gates.iter().all(|g| self.is_approved(g.waits_for)) {
                continue;
            }
            ids.extend(
                children
                    .iter()
                    .filter(|c| !c.approved)
                    .map(|c| c.id.clone()),
            );
        }
        ids
    }

    /// The gates still closed for variant `v`.
    pub fn pending_gates(&self, plan: &Plan, v: usize) -> Vec<String> {
        plan.gates(v)
            .into_iter()
            .filter(|g| !self.is_approved(g.waits_for))
            .map(|g| g.condition_type)
            .collect()
    }

    /// One package entry per variant: `Approved`, `Prepared`, `Created` (not prepared yet) or
    /// `Pending` (no child), with the gates still closed.
    pub fn package_statuses(&self, plan: &Plan) -> Vec<PackageStatus> {
        plan.variants()
            .iter()
            .enumerate()
            .map(|(v, variant)| {
                let children = self.by_variant.get(&v).map_or(&[][..], Vec::as_slice);
                let lifecycle = if children.iter().any(|c| c.approved) {
                    "Approved"
                } else if children.iter().any(|c| c.prepared) {
                    "Prepared"
                } else if children.is_empty() {
                    "Pending"
                } else {
                    "Created"
                };
                PackageStatus {
                    name: variant.id.clone(),
                    lifecycle: lifecycle.to_owned(),
                    pending_conditions: if lifecycle == "Approved" {
                        Vec::new()
                    } else {
                        self.pending_gates(plan, v)
                    },
                }
            })
            .collect()
    }

    /// The NFTopology status: as [`crate::status::topology_status`], with the children as the
    /// packages.
    pub fn status(&self, plan: &Plan, previous: &[Condition], now: &str) -> NFTopologyStatus {
        let deployed = self.deployed(plan);
        let mut status = topology_status(
            plan,
            &porch::Observation::default(),
            &deployed,
            previous,
            now,
        );
        status.packages = self.package_statuses(plan);
        status
    }

    /// The deployed topology: the variants with an approved child.
    pub fn deployed<'p>(&self, plan: &'p Plan) -> DeployedTopologyBuilder<'p> {
        let mut builder = DeployedTopologyBuilder::new(plan);
        for &v in self.by_variant.keys() {
            if self.is_approved(v) {
                builder.publish_variant(v);
            }
        }
        builder
    }
}

#[cfg(test)]
mod tests;
