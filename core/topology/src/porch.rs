//! What the Porch backend writes and how it reads Porch: the `PackageVariantSet` of each NF
//! instance, the `Capacity` injected into its packages, and the decisions taken from observed
//! `PackageRevision`s (gates, published variants, package status).
//!
//! # PackageVariantSet
//!
//! One per NF instance, named `<topology>-<instance>`:
//!
//! - `spec.upstream`: `repo` = the class's `packageRef.repository`, `package` =
//!   `packageRef.packageName`, `revision` = `packageRef.revision` as given (an all-digit
//!   revision is written as an integer, as Porch ≥ v3 numbers revisions; a tag such as `v1` is
//!   written as a string). An empty revision leaves `revision` out: Porch then takes the latest
//!   published upstream revision.
//! - `spec.targets`: one target listing the matching clusters' repositories by name (the
//!   cluster's name is its deployment repository), each with one package named after the
//!   instance. Listing repositories (instead of a `repositorySelector`) keeps what Porch creates
//!   exactly what the plan — and its gates — expect.
//! - `spec.template.labels`: `nf-deployment-name`, the instance and type labels. Labels reach
//!   PackageRevisions only through the template (labels on the PVS's own metadata do not
//!   propagate).
//! - `spec.template.deletionPolicy` is the topology's `spec.deletionPolicy` (`delete` by
//!   default, or `orphan`, which leaves the packages in place). With `delete`, when a cluster stops
//!   matching (relabelled) it leaves the target list of the *same* PVS, which is updated in
//!   place, and Porch proposes the deletion of that one downstream package; the other variants
//!   are untouched. When an instance leaves the topology its PVS is deleted, and Porch proposes
//!   the deletion of its packages. A PVS is never deleted and recreated to change it (which
//!   would mark every published package for deletion).
//! - `spec.template.injectors`: the instance's `Capacity` (see [`capacity`]) when the template
//!   has one; Porch injects it into each package.
//!
//! # PackageRevisions
//!
//! A revision belongs to a variant through its repository (the cluster) and package name (the
//! instance) among revisions labelled `nf-deployment-name: <topology>`. Porch's `main`
//! placeholder (revision `main` or `-1`, or workspace `main`) is ignored. A variant is
//! published when one of its revisions is `Published`; the latest revision (highest number)
//! gives the package's lifecycle for display.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use nephrite_krm::keys::NF_DEPLOYMENT_NAME;
use nephrite_krm::{Condition, ConditionStatus, Object, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{CAPACITY_API_VERSION, CAPACITY_KIND, Capacity, PackageStatus};
use crate::plan::Plan;
use crate::replan::{ChildKey, ExistingChild, desired_children};

/// `apiVersion` of PackageVariantSet.
pub const PVS_API_VERSION: &str = "config.porch.kpt.dev/v1alpha2";
/// Kind of PackageVariantSet.
pub const PVS_KIND: &str = "PackageVariantSet";
/// `apiVersion` of PackageRevision.
pub const PACKAGE_REVISION_API_VERSION: &str = "porch.kpt.dev/v1alpha1";
/// Kind of PackageRevision.
pub const PACKAGE_REVISION_KIND: &str = "PackageRevision";
/// Annotation carrying the class's flavor on the packages.
pub const FLAVOR_ANNOTATION: &str = "topology.nephio.org/flavor";

/// `Published`.
pub const PUBLISHED: &str = "Published";

/// The name of instance `instance`'s PackageVariantSet.
pub fn pvs_name(plan: &Plan, instance: usize) -> String {
    format!("{}-{}", plan.topology(), plan.instances()[instance].name)
}

/// The name of instance `instance`'s Capacity resource.
pub fn capacity_name(plan: &Plan, instance: usize) -> String {
    format!("{}-{}", plan.topology(), plan.instances()[instance].name)
}

/// The `Capacity` of instance `instance`, when its template has a capacity.
pub fn capacity(plan: &Plan, instance: usize) -> Option<Capacity> {
    let planned = plan.instances().get(instance)?;
    let spec = planned.capacity.clone()?;
    Some(Capacity {
        api_version: CAPACITY_API_VERSION.to_owned(),
        kind: CAPACITY_KIND.to_owned(),
        metadata: ObjectMeta {
            name: Some(capacity_name(plan, instance)),
            labels: Some(plan.labels(instance)),
            ..ObjectMeta::default()
        },
        spec,
    })
}

/// The PackageVariantSet of instance `instance` (see the module docs). `None` when the
/// instance matched no cluster: it gets no variant.
pub fn package_variant_set(plan: &Plan, instance: usize) -> Option<Object> {
    let planned = plan.instances().get(instance)?;
    if planned.clusters.is_empty() {
        return None;
    }
    let package_ref = &planned.class.package_ref;
    let mut upstream = serde_json::Map::new();
    upstream.insert("repo".into(), json!(package_ref.repository));
    upstream.insert("package".into(), json!(package_ref.package_name));
    if !package_ref.revision.is_empty() {
        let revision = match package_ref.revision.parse::<u64>() {
            Ok(n) => json!(n),
            Err(_) => json!(package_ref.revision),
        };
        upstream.insert("revision".into(), revision);
    }
    let repositories: Vec<Value> = planned
        .clusters
        .iter()
        .map(|c| json!({"name": c, "packageNames": [planned.name]}))
        .collect();
    let mut template = serde_json::Map::new();
    template.insert("labels".into(), json!(plan.labels(instance)));
    if let Some(flavor) = &planned.class.flavor {
        template.insert("annotations".into(), json!({ FLAVOR_ANNOTATION: flavor }));
    }
    template.insert(
        "deletionPolicy".into(),
        json!(plan.deletion_policy().as_str()),
    );
    if planned.capacity.is_some() {
        template.insert(
            "injectors".into(),
            json!([{
                "group": "req.nephio.org",
                "version": "v1alpha1",
                "kind": CAPACITY_KIND,
                "name": capacity_name(plan, instance),
            }]),
        );
    }
    let mut labels = IndexMap::new();
    labels.insert(NF_DEPLOYMENT_NAME.to_owned(), plan.topology().to_owned());
    let value = json!({
        "apiVersion": PVS_API_VERSION,
        "kind": PVS_KIND,
        "metadata": {"name": pvs_name(plan, instance), "labels": labels},
        "spec": {
            "upstream": upstream,
            "targets": [{"repositories": repositories}],
            "template": template,
        },
    });
    Object::from_json(value).ok()
}

/// Every PackageVariantSet of the plan, in instance order.
pub fn package_variant_sets(plan: &Plan) -> Vec<Object> {
    (0..plan.instances().len())
        .filter_map(|i| package_variant_set(plan, i))
        .collect()
}

/// A readiness gate in `PackageRevision.spec.readinessGates`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessGate {
    /// The condition that must be True.
    pub condition_type: String,
}

/// The parts of a PackageRevision the controller reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `spec.repository`.
    pub repository: String,
    /// `spec.packageName`.
    pub package_name: String,
    /// `spec.workspaceName`.
    pub workspace_name: String,
    /// `spec.revision` as a string (`""` when absent).
    pub revision: String,
    /// `spec.lifecycle`.
    pub lifecycle: String,
    /// `spec.readinessGates[].conditionType`.
    pub readiness_gates: Vec<String>,
    /// `status.conditions`.
    pub conditions: Vec<Condition>,
}

impl RevisionView {
    /// Reads a PackageRevision; `None` when it lacks a name, repository or package name.
    pub fn read(object: &Object) -> Option<RevisionView> {
        let spec = object.spec()?;
        let text = |v: &Value, key: &str| -> String {
            match v.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            }
        };
        let repository = text(spec, "repository");
        let package_name = text(spec, "packageName");
        if repository.is_empty() || package_name.is_empty() {
            return None;
        }
        let readiness_gates = spec
            .get("readinessGates")
            .and_then(Value::as_array)
            .map(|gates| {
                gates
                    .iter()
                    .filter_map(|g| g.get("conditionType").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Some(RevisionView {
            name: object.name()?.to_owned(),
            namespace: object.namespace().map(str::to_owned),
            repository,
            package_name,
            workspace_name: text(spec, "workspaceName"),
            revision: text(spec, "revision"),
            lifecycle: text(spec, "lifecycle"),
            readiness_gates,
            conditions: object.conditions().unwrap_or_default(),
        })
    }

    /// Whether this is Porch's `main` placeholder revision.
    pub fn is_placeholder(&self) -> bool {
        self.revision == "main" || self.revision == "-1" || self.workspace_name == "main"
    }

    /// Whether it is published.
    pub fn is_published(&self) -> bool {
        self.lifecycle == PUBLISHED
    }

    /// The readiness conditions that are not True.
    pub fn pending_conditions(&self) -> Vec<String> {
        self.readiness_gates
            .iter()
            .filter(|gate| {
                !self
                    .conditions
                    .iter()
                    .any(|c| &c.type_ == *gate && c.status == ConditionStatus::True)
            })
            .cloned()
            .collect()
    }

    fn revision_number(&self) -> u64 {
        self.revision
            .trim_start_matches('v')
            .parse()
            .unwrap_or_default()
    }
}

/// The revisions of a plan's variants, as observed.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Revisions of each variant (by variant position), placeholders left out.
    pub revisions: BTreeMap<usize, Vec<RevisionView>>,
    /// Revisions labelled for the topology that match no variant (the plan no longer wants them).
    pub orphans: Vec<RevisionView>,
}

impl Observation {
    /// Sorts `revisions` (those labelled for the topology) onto the plan's variants.
    pub fn new(plan: &Plan, revisions: impl IntoIterator<Item = RevisionView>) -> Self {
        let mut observation = Observation::default();
        for revision in revisions {
            if revision.is_placeholder() {
                continue;
            }
            match plan.variant_for(&revision.package_name, &revision.repository) {
                Some(v) => observation.revisions.entry(v).or_default().push(revision),
                None => observation.orphans.push(revision),
            }
        }
        for list in observation.revisions.values_mut() {
            list.sort_by(|a, b| {
                a.revision_number()
                    .cmp(&b.revision_number())
                    .then_with(|| a.name.cmp(&b.name))
            });
        }
        observation
    }

    /// Whether variant `v` has a Published revision.
    pub fn is_published(&self, v: usize) -> bool {
        self.revisions
            .get(&v)
            .is_some_and(|list| list.iter().any(RevisionView::is_published))
    }

    /// The latest Published revision of variant `v`.
    pub fn latest_published(&self, v: usize) -> Option<&RevisionView> {
        self.revisions
            .get(&v)?
            .iter()
            .rev()
            .find(|r| r.is_published())
    }

    /// The package status of every variant, in plan order (`Pending` without a revision).
    pub fn package_statuses(&self, plan: &Plan) -> Vec<PackageStatus> {
        plan.variants()
            .iter()
            .enumerate()
            .map(|(v, variant)| {
                let latest = self.revisions.get(&v).and_then(|list| list.last());
                PackageStatus {
                    name: variant.id.clone(),
                    lifecycle: latest.map_or_else(|| "Pending".to_owned(), |r| r.lifecycle.clone()),
                    pending_conditions: latest
                        .map(RevisionView::pending_conditions)
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The gate updates to make: for each unpublished revision of a gated variant, the readiness
    /// gates and conditions it must carry (one `wait-for-<TYPE>-<id>` per gate, True once that
    /// variant is published). Revisions already so are left out, so a second pass over an
    /// unchanged state decides nothing.
    pub fn gate_updates(&self, plan: &Plan) -> Vec<GateUpdate> {
        let mut updates = Vec::new();
        for (&v, revisions) in &self.revisions {
            let gates = plan.gates(v);
            if gates.is_empty() {
                continue;
            }
            for revision in revisions {
                if revision.is_published() || revision.lifecycle == "DeletionProposed" {
                    continue;
                }
                let mut readiness_gates = revision.readiness_gates.clone();
                let mut conditions = revision.conditions.clone();
                for gate in &gates {
                    if !readiness_gates.contains(&gate.condition_type) {
                        readiness_gates.push(gate.condition_type.clone());
                    }
                    let published = self.is_published(gate.waits_for);
                    let waited = &plan.variants()[gate.waits_for].id;
                    let wanted =
                        Condition::new(&gate.condition_type, ConditionStatus::from(published))
                            .with_reason(if published { "Published" } else { "Waiting" })
                            .with_message(if published {
                                format!("{waited} is published")
                            } else {
                                format!("waiting for {waited} to be published")
                            });
                    match conditions
                        .iter_mut()
                        .find(|c| c.type_ == gate.condition_type)
                    {
                        Some(existing) => {
                            if existing.status != wanted.status
                                || existing.reason != wanted.reason
                                || existing.message != wanted.message
                            {
                                *existing = wanted;
                            }
                        }
                        None => conditions.push(wanted),
                    }
                }
                if readiness_gates != revision.readiness_gates || conditions != revision.conditions
                {
                    updates.push(GateUpdate {
                        name: revision.name.clone(),
                        namespace: revision.namespace.clone(),
                        readiness_gates,
                        conditions,
                    });
                }
            }
        }
        updates
    }
}

impl Observation {
    /// The packages as the re-plan sees them ([`crate::replan`]): one child per planned
    /// variant with revisions (the latest; approved when one is published, prepared when the
    /// latest is proposed or published) and one per (package, repository) the plan no longer
    /// wants, keyed by (topology, package name, repository).
    ///
    /// Porch, not ntc, brings a package's content to its PackageVariantSet, which ntc keeps
    /// current; so a variant's package counts as carrying the planned content (its fingerprint
    /// is the planned one) and the re-plan never asks to update it. A package no longer wanted
    /// carries none.
    pub fn existing_children(&self, plan: &Plan) -> Vec<ExistingChild> {
        let desired = desired_children(plan);
        let mut children: Vec<ExistingChild> = self
            .revisions
            .iter()
            .filter_map(|(&v, revisions)| {
                let latest = revisions.last()?;
                let planned = desired.get(v)?;
                Some(ExistingChild {
                    id: latest.name.clone(),
                    key: planned.key.clone(),
                    fingerprint: Some(planned.fingerprint),
                    prepared: matches!(latest.lifecycle.as_str(), "Proposed" | PUBLISHED),
                    approved: revisions.iter().any(RevisionView::is_published),
                })
            })
            .collect();
        let mut unwanted: BTreeMap<ChildKey, &RevisionView> = BTreeMap::new();
        for revision in &self.orphans {
            let key = ChildKey::new(
                plan.topology(),
                &revision.package_name,
                &revision.repository,
            );
            let entry = unwanted.entry(key).or_insert(revision);
            if revision.revision_number() >= entry.revision_number() {
                *entry = revision;
            }
        }
        children.extend(unwanted.into_iter().map(|(key, revision)| ExistingChild {
            id: revision.name.clone(),
            key,
            fingerprint: None,
            prepared: false,
            approved: revision.is_published(),
        }));
        children
    }
}

/// A PackageRevision to update: its full readiness-gate list and conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct GateUpdate {
    /// The revision's name.
    pub name: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// `spec.readinessGates[].conditionType`, existing gates kept.
    pub readiness_gates: Vec<String>,
    /// `status.conditions`, other conditions kept.
    pub conditions: Vec<Condition>,
}

impl GateUpdate {
    /// The JSON merge patch that makes the update.
    pub fn merge_patch(&self) -> Value {
        let gates: Vec<ReadinessGate> = self
            .readiness_gates
            .iter()
            .map(|g| ReadinessGate {
                condition_type: g.clone(),
            })
            .collect();
        json!({
            "spec": {"readinessGates": gates},
            "status": {"conditions": self.conditions},
        })
    }
}

#[cfg(test)]
mod tests;
