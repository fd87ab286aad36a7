//! Following the world: making an NFTopology deployment's children what a fresh plan wants.
//!
//! The preparer calls `Prepare` once per preparation, but the world moves on afterwards: sites
//! are registered, relabelled and removed, and the NFTopology in the parent's package is
//! edited. Each of these changes what the plan wants, so the TKO backend re-plans against the
//! current sites and applies only the difference (`nephrite_topology::replan::diff`):
//!
//! - a child the plan wants and that does not exist is created, stamped with the fingerprint
//!   of its spec and gated like at preparation (`nephio.org/approve: Manual` while it waits
//!   for others; the tracker approves it once its gates open);
//! - a child whose content changed (capacity, networks, class) is updated in place: its
//!   package is read, the resources ntc rendered before and no longer renders are pruned, the
//!   new renderings are laid over it, and it is written back, all under the child's lease —
//!   same id, new package. A child
//!   whose deployed id or template changes cannot keep its instance key and is recreated;
//! - a child no longer wanted (its instance removed, its site deleted or relabelled away) is
//!   deleted, or under `spec.deletionPolicy: orphan` left in place and logged;
//! - every other child is not touched: its package, approval and `updated` time stay.
//!
//! A child's fingerprint is read from its package (the row's metadata keeps the one it was
//! created with); [`Fingerprints`] remembers each child's by its `updated` time, so a re-plan
//! reads only the packages that changed since the last one.
//!
//! An update keeps the child's `Deployment` resource (its template and site ids, its prepared
//! and approved marks, its conditions) and changes only ntc's annotations on it: the content
//! of an approved child changes without withdrawing its approval, as gating is rollout state,
//! not content (`nephrite_topology::replan::ChildSpec`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use nephrite_krm::{Package, keys};
use nephrite_preparer_client::{
    DataApi, DeploymentQuery, DeploymentRequest, DeploymentWrite, LeaseFence, WriteResult,
};
use nephrite_topology::Plan;
use nephrite_topology::replan::{
    ChildChanges, ChildUpdate, ExistingChild, Fingerprint, SPEC_FINGERPRINT_KEY, desired_children,
    diff, new_child_gates,
};
use nephrite_topology::tko::{
    ChildDeployment, existing_child, package_fingerprint, prune_for_update,
    stamped_child_deployment,
};

use super::TkoError;

/// How many times a child update that collides with another writer (the preparer preparing
/// it) is tried.
const UPDATE_ATTEMPTS: usize = 20;
/// The pause between two such attempts.
const BUSY_PAUSE: Duration = Duration::from_millis(100);
/// How many children's packages are read at once (their fingerprints).
const READS_IN_FLIGHT: usize = 16;
/// The most child writes one `ApplyDeployments` batch carries (the preparer takes up to 1,000;
/// a few hundred children's packages stay well inside a gRPC message).
pub const BATCH_WRITES: usize = 250;

/// The NFTopology deployments the backend follows, shared by the plugin (which adds every
/// deployment it prepares) and the tracker (which adds the parents of the children it sees),
/// with one lock per deployment so that a `Prepare` and a re-plan of the same deployment do
/// not apply their changes at the same time.
#[derive(Debug, Clone, Default)]
pub struct Followed {
    inner: Arc<Mutex<FollowedInner>>,
}

#[derive(Debug, Default)]
struct FollowedInner {
    parents: BTreeSet<String>,
    locks: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    orphans_logged: BTreeSet<String>,
    fence: Option<LeaseFence>,
}

impl Followed {
    fn inner(&self) -> std::sync::MutexGuard<'_, FollowedInner> {
        // A panic while holding this lock leaves plain sets behind: still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows `parent` from now on; whether it was new.
    pub fn insert(&self, parent: &str) -> bool {
        self.inner().parents.insert(parent.to_owned())
    }

    /// Stops following `parent` (it was deleted).
    pub fn remove(&self, parent: &str) {
        let mut inner = self.inner();
        inner.parents.remove(parent);
        inner.locks.remove(parent);
    }

    /// Whether `parent` is followed.
    pub fn contains(&self, parent: &str) -> bool {
        self.inner().parents.contains(parent)
    }

    /// Every followed deployment.
    pub fn parents(&self) -> Vec<String> {
        self.inner().parents.iter().cloned().collect()
    }

    /// The lock under which `parent`'s children are changed.
    pub fn lock_of(&self, parent: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.inner()
            .locks
            .entry(parent.to_owned())
            .or_default()
            .clone()
    }

    /// Writes from now on carry `fence` (the leader's lease and holding; `None`: unfenced).
    pub fn set_fence(&self, fence: Option<LeaseFence>) {
        self.inner().fence = fence;
    }

    /// The fence writes carry.
    pub fn fence(&self) -> Option<LeaseFence> {
        self.inner().fence.clone()
    }

    /// Whether orphan `child` is seen for the first time (so it is logged once).
    fn first_sight_of_orphan(&self, child: &str) -> bool {
        self.inner().orphans_logged.insert(child.to_owned())
    }
}

/// Each child's fingerprint as read from its package, by id, with the `updated` time of the
/// row it was read from: a child whose row has not changed since is not read again.
#[derive(Debug, Clone, Default)]
pub struct Fingerprints {
    read: Arc<Mutex<HashMap<String, ReadFingerprint>>>,
}

/// A child's fingerprint (`None`: it carries none) and the `updated` time of the row it was
/// read with.
type ReadFingerprint = (String, Option<Fingerprint>);

impl Fingerprints {
    fn cached(&self, id: &str, updated: &str) -> Option<Option<Fingerprint>> {
        let read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        read.get(id)
            .filter(|(at, _)| at == updated)
            .map(|(_, fingerprint)| *fingerprint)
    }

    fn remember(&self, id: &str, updated: &str, fingerprint: Option<Fingerprint>) {
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        read.insert(id.to_owned(), (updated.to_owned(), fingerprint));
    }

    fn forget(&self, id: &str) {
        let mut read = self.read.lock().unwrap_or_else(|e| e.into_inner());
        read.remove(id);
    }
}

/// The children of `parent` that belong to `topology`, as the re-plan sees them: key from
/// site and metadata, fingerprint from the package's `Deployment` resource. Children without
/// ntc's identity metadata (made by hand under the same parent) are not ntc's and are left out.
pub async fn existing_children(
    data: &dyn DataApi,
    parent: &str,
    topology: &str,
    fingerprints: &Fingerprints,
) -> Result<Vec<ExistingChild>, TkoError> {
    let rows = data
        .all_deployments(DeploymentQuery {
            parent_id: Some(parent.to_owned()),
            ..DeploymentQuery::default()
        })
        .await?;
    let mut children = Vec::with_capacity(rows.len());
    let mut unread = Vec::new();
    for row in rows {
        let mut child = match existing_child(
            &row.id,
            &row.site_id,
            &row.metadata,
            row.prepared,
            row.approved,
        ) {
            Ok(child) if child.key.topology == topology => child,
            Ok(_) => continue,
            Err(error) => {
                tracing::debug!(%parent, child = %row.id, %error, "not a child of ntc's");
                continue;
            }
        };
        match fingerprints.cached(&row.id, &row.updated) {
            Some(fingerprint) => {
                child.fingerprint = fingerprint;
                children.push(child);
            }
            None => unread.push(child),
        }
    }
    // The packages changed since the last read (a thousand children the preparer just
    // prepared), READS_IN_FLIGHT at a time: one by one, each waited for its round trip.
    let reads = unread.into_iter().map(|child| async move {
        match data.get_deployment(&child.id).await {
            Ok(deployment) => Ok(Some((child, deployment))),
            // Deleted since it was listed: it is not there any more.
            Err(error) if error.is_not_found() => Ok(None),
            Err(error) => Err(error),
        }
    });
    let mut reads = futures::stream::iter(reads).buffered(READS_IN_FLIGHT);
    while let Some(read) = reads.next().await {
        let Some((mut child, deployment)) = read? else {
            continue;
        };
        // A package that does not read carries no fingerprint we can trust: the child is
        // then updated, which rewrites it.
        let fingerprint = Package::from_yaml(&deployment.package_yaml)
            .ok()
            .as_ref()
            .and_then(package_fingerprint);
        fingerprints.remember(&child.id, &deployment.info.updated, fingerprint);
        child.fingerprint = fingerprint;
        children.push(child);
    }
    Ok(children)
}

/// What one re-plan did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Ids of the children created (recreated ones included; not those found there already).
    pub created: Vec<String>,
    /// Ids of the children updated in place.
    pub updated: Vec<String>,
    /// Ids of the children deleted (recreated ones included).
    pub deleted: Vec<String>,
    /// Ids of the children left in place as orphans.
    pub orphaned: Vec<String>,
    /// Each child updated in place, with the `updated` time its new row has.
    pub rewritten: Vec<(String, String)>,
    /// How many `ApplyDeployments` batches carried these writes.
    pub batches: usize,
    /// How long reading the children (rows and changed packages) took.
    pub reading: std::time::Duration,
    /// How long the writes took.
    pub writing: std::time::Duration,
}

impl Applied {
    /// Whether nothing was created, updated or deleted.
    pub fn is_noop(&self) -> bool {
        self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }
}

/// Re-plans `parent`'s children under `plan` and applies the difference (see the module docs),
/// under `parent`'s lock in `followed`.
pub async fn replan(
    data: &dyn DataApi,
    parent: &str,
    plan: &Plan,
    followed: &Followed,
    fingerprints: &Fingerprints,
) -> Result<Applied, TkoError> {
    let lock = followed.lock_of(parent);
    let _guard = lock.lock().await;
    let started = std::time::Instant::now();
    let existing = existing_children(data, parent, plan.topology(), fingerprints).await?;
    let reading = started.elapsed();
    let changes = diff(&existing, &desired_children(plan), plan.deletion_policy());
    for orphan in &changes.orphan {
        if followed.first_sight_of_orphan(&orphan.id) {
            tracing::info!(%parent, child = %orphan.id, key = %orphan.key, "no longer wanted; left in place (deletionPolicy: orphan)");
        }
    }
    if changes.is_noop() {
        return Ok(Applied {
            orphaned: changes.orphan.iter().map(|c| c.id.clone()).collect(),
            reading,
            ..Applied::default()
        });
    }
    for gates in new_child_gates(plan, &existing, &changes) {
        let closed = gates.closed();
        if !closed.is_empty() {
            tracing::info!(%parent, id = %gates.deployed_id, waits_for = ?closed, "new child is gated");
        }
    }
    let writing = std::time::Instant::now();
    let mut applied = apply(data, parent, plan, &changes, followed, fingerprints).await?;
    applied.reading = reading;
    applied.writing = writing.elapsed();
    Ok(applied)
}

/// Carries out `changes` on `parent`'s children: deletes first (so that a recreated child's
/// instance key is free), then creates, then updates in the plan's order. The writes go in
/// `ApplyDeployments` batches of at most [`BATCH_WRITES`], each one transaction on the
/// preparer, under the leader's fence when `followed` holds one (a deposed leader's batch is
/// refused whole).
async fn apply(
    data: &dyn DataApi,
    parent: &str,
    plan: &Plan,
    changes: &ChildChanges,
    followed: &Followed,
    fingerprints: &Fingerprints,
) -> Result<Applied, TkoError> {
    let mut applied = Applied {
        orphaned: changes.orphan.iter().map(|c| c.id.clone()).collect(),
        ..Applied::default()
    };
    let fence = followed.fence();
    let recreated = changes.update.iter().filter(|u| u.recreate);
    let deletions = changes
        .delete
        .iter()
        .map(|c| (c.id.clone(), c.key.to_string()))
        .chain(
            recreated
                .clone()
                .map(|u| (u.id.clone(), u.child.key.to_string())),
        );
    let creations = changes
        .create
        .iter()
        .chain(recreated.map(|u| &u.child))
        .map(|planned| stamped_child_deployment(plan, planned));
    let planned: Vec<Structural> = deletions
        .map(|(id, key)| Structural::Delete { id, key })
        .chain(creations.map(Structural::Create))
        .collect();
    for chunk in planned.chunks(BATCH_WRITES) {
        let writes = chunk
            .iter()
            .map(|write| match write {
                Structural::Delete { id, .. } => DeploymentWrite::Delete { id: id.clone() },
                Structural::Create(child) => DeploymentWrite::Create(create_request(parent, child)),
            })
            .collect();
        let results = data.apply_deployments(writes, fence.clone()).await?;
        applied.batches += 1;
        for (write, result) in chunk.iter().zip(results) {
            match (write, result) {
                (Structural::Delete { id, key }, _) => {
                    fingerprints.forget(id);
                    tracing::info!(%parent, child = %id, %key, "child deleted");
                    applied.deleted.push(id.clone());
                }
                (Structural::Create(child), WriteResult::Created(response)) => {
                    if response.created {
                        tracing::info!(%parent, child = %response.deployment_id, id = %child.instance_key, gated = child.gated, "child created");
                        applied.created.push(response.deployment_id);
                    } else {
                        tracing::info!(%parent, child = %response.deployment_id, id = %child.instance_key, "child there already");
                    }
                }
                (Structural::Create(child), other) => {
                    return Err(TkoError::Package {
                        deployment: parent.to_owned(),
                        message: format!(
                            "the preparer answered the creation of {} with {other:?}",
                            child.instance_key
                        ),
                    });
                }
            }
        }
    }
    let updates: Vec<_> = changes.update.iter().filter(|u| !u.recreate).collect();
    for chunk in updates.chunks(BATCH_WRITES) {
        let rewritten = update_batch(data, chunk, plan, fence.clone()).await?;
        applied.batches += 1;
        for (update, updated) in chunk.iter().zip(rewritten) {
            fingerprints.forget(&update.id);
            tracing::info!(%parent, child = %update.id, key = %update.child.key, "child updated in place");
            applied.updated.push(update.id.clone());
            applied.rewritten.push((update.id.clone(), updated));
        }
    }
    Ok(applied)
}

/// A deletion or creation of a child, in the order they are written.
enum Structural {
    Delete { id: String, key: String },
    Create(ChildDeployment),
}

/// Rewrites the children of `chunk` to their new content in one batch: each package read,
/// pruned and laid over, then written back only if nobody wrote it since it was read
/// (`if_updated`). When one of them was written or held meanwhile (the preparer preparing
/// it), the batch writes nothing and each child is updated on its own under its lease,
/// retrying while busy. The `updated` time of each row written, in `chunk`'s order.
async fn update_batch(
    data: &dyn DataApi,
    chunk: &[&ChildUpdate],
    plan: &Plan,
    fence: Option<LeaseFence>,
) -> Result<Vec<String>, TkoError> {
    let mut writes = Vec::with_capacity(chunk.len());
    for update in chunk {
        let child = stamped_child_deployment(plan, &update.child);
        let current = data.get_deployment(&update.id).await?;
        let package = rendered_over(&update.id, &current.package_yaml, &child)?;
        writes.push(DeploymentWrite::Update {
            id: update.id.clone(),
            package_yaml: package.to_yaml(),
            if_updated: Some(current.info.updated),
        });
    }
    match data.apply_deployments(writes, fence).await {
        Ok(results) => results
            .into_iter()
            .map(|result| match result {
                WriteResult::Updated(row) => Ok(row.updated),
                other => Err(TkoError::Package {
                    deployment: String::new(),
                    message: format!("the preparer answered an update with {other:?}"),
                }),
            })
            .collect(),
        Err(error) if error.is_busy() => {
            tracing::debug!(%error, "a child changed while its batch was made; updating one by one");
            let mut rewritten = Vec::with_capacity(chunk.len());
            for update in chunk {
                let child = stamped_child_deployment(plan, &update.child);
                rewritten.push(update_in_place(data, &update.id, &child).await?);
            }
            Ok(rewritten)
        }
        Err(error) => Err(error.into()),
    }
}

/// `package_yaml` (child `id`'s) with what ntc no longer renders pruned and `child`'s
/// renderings laid over it.
fn rendered_over(
    id: &str,
    package_yaml: &str,
    child: &ChildDeployment,
) -> Result<Package, TkoError> {
    let mut package = Package::from_yaml(package_yaml).map_err(|error| TkoError::Package {
        deployment: id.to_owned(),
        message: error.to_string(),
    })?;
    let removed = prune_for_update(&mut package, child);
    if !removed.is_empty() {
        tracing::info!(child = %id, ?removed, "resources ntc no longer renders removed");
    }
    lay_over(&mut package, child);
    Ok(package)
}

/// The request that creates `child` under `parent` (idempotent through its instance key).
pub fn create_request(parent: &str, child: &ChildDeployment) -> DeploymentRequest {
    DeploymentRequest {
        parent_id: parent.to_owned(),
        template_id: child.template_id.clone(),
        site_id: child.site_id.clone(),
        merge_package_yaml: child.merge_package.to_yaml(),
        merge_metadata: child.merge_metadata.clone().into_iter().collect(),
        prepared: false,
        approved: false,
        instance_key: child.instance_key.clone(),
    }
}

/// Rewrites child `id`'s package to `child`'s content, retrying while another writer holds it;
/// the `updated` time of the row written.
async fn update_in_place(
    data: &dyn DataApi,
    id: &str,
    child: &ChildDeployment,
) -> Result<String, TkoError> {
    for _ in 0..UPDATE_ATTEMPTS {
        // Read and written under the child's lease, so that a write of the preparer's in
        // between (marking it prepared) is never overwritten.
        let modification = match data.start_modification(id, None).await {
            Ok(modification) => modification,
            Err(error) if error.is_busy() => {
                tokio::time::sleep(BUSY_PAUSE).await;
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        let package = match rendered_over(id, &modification.package_yaml, child) {
            Ok(package) => package,
            Err(error) => {
                data.cancel_modification(id, &modification.token).await?;
                return Err(error);
            }
        };
        let row = data
            .end_modification(id, &modification.token, Some(package.to_yaml()))
            .await?;
        return Ok(row.updated);
    }
    Err(TkoError::Package {
        deployment: id.to_owned(),
        message: format!("the child stayed busy through {UPDATE_ATTEMPTS} attempts to update it"),
    })
}

/// Lays `child`'s renderings over `package`: each replaces the resource of the same identity
/// or is appended, except the `Deployment` resource, which keeps the preparer's state and takes
/// only ntc's annotations (the spec fingerprint, and `nephio.org/approve: Manual` exactly when
/// the child is gated).
fn lay_over(package: &mut Package, child: &ChildDeployment) {
    for rendered in child.merge_package.iter() {
        let is_deployment = |o: &nephrite_krm::Object| {
            o.api_version == rendered.api_version
                && o.kind == rendered.kind
                && o.name() == rendered.name()
        };
        if rendered.kind == "Deployment"
            && let Some(current) = package.iter_mut().find(|o| is_deployment(o))
        {
            if let Some(fingerprint) = rendered.annotation(SPEC_FINGERPRINT_KEY) {
                let _ = current.set_annotation(SPEC_FINGERPRINT_KEY, fingerprint);
            }
            match rendered.annotation(keys::APPROVE) {
                Some(mode) => {
                    let _ = current.set_annotation(keys::APPROVE, mode);
                }
                None if current.annotation(keys::APPROVE) == Some(keys::APPROVE_MANUAL) => {
                    let _ = current.remove_annotation(keys::APPROVE);
                }
                None => {}
            }
            continue;
        }
        package.insert(rendered.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nephrite_krm::{Gvk, Object};
    use nephrite_topology::tko::DEPLOYED_ID_KEY;

    fn child_with(objects: Vec<Object>, gated: bool) -> ChildDeployment {
        let mut merge_package = Package::new();
        for object in objects {
            merge_package.push(object);
        }
        ChildDeployment {
            variant: 0,
            template_id: "t".into(),
            site_id: "s".into(),
            instance_key: "k".into(),
            merge_package,
            merge_metadata: [(DEPLOYED_ID_KEY.to_owned(), "k".to_owned())]
                .into_iter()
                .collect(),
            gated,
        }
    }

    fn deployment_resource() -> Object {
        Object::new(
            &Gvk::new("deployment.nephio.org", "v1alpha1", "Deployment"),
            "deployment",
        )
    }

    #[test]
    fn laying_over_keeps_the_deployment_state_and_replaces_rendered_resources() {
        let mut current = deployment_resource();
        current.set_annotation(keys::PREPARED, keys::TRUE);
        current.set_annotation(keys::APPROVED, keys::TRUE);
        current.set_annotation(keys::APPROVE, keys::APPROVE_MANUAL);
        current.set_annotation(SPEC_FINGERPRINT_KEY, "old");
        let capacity_gvk = Gvk::new("req.nephio.org", "v1alpha1", "Capacity");
        let mut old_capacity = Object::new(&capacity_gvk, "cap");
        let _ = old_capacity
            .body
            .insert("spec", serde_json::json!({"a": 1}));
        let mut package = Package::new();
        package.push(current);
        package.push(old_capacity);

        let mut rendered = deployment_resource();
        rendered.set_annotation(SPEC_FINGERPRINT_KEY, "new");
        let mut new_capacity = Object::new(&capacity_gvk, "cap");
        let _ = new_capacity
            .body
            .insert("spec", serde_json::json!({"a": 2}));
        lay_over(
            &mut package,
            &child_with(vec![rendered, new_capacity], false),
        );

        let deployment = package.iter().find(|o| o.kind == "Deployment").unwrap();
        assert_eq!(deployment.annotation(keys::PREPARED), Some(keys::TRUE));
        assert_eq!(deployment.annotation(keys::APPROVED), Some(keys::TRUE));
        assert_eq!(deployment.annotation(SPEC_FINGERPRINT_KEY), Some("new"));
        assert_eq!(
            deployment.annotation(keys::APPROVE),
            None,
            "no longer gated"
        );
        assert_eq!(package.len(), 2);
        let capacity = package.get(&capacity_gvk, "cap").unwrap();
        assert_eq!(capacity.spec().unwrap()["a"], 2);
    }

    #[test]
    fn laying_over_a_gated_child_sets_manual_approval_and_appends_new_resources() {
        let mut package = Package::new();
        package.push(deployment_resource());
        let mut rendered = deployment_resource();
        rendered.set_annotation(keys::APPROVE, keys::APPROVE_MANUAL);
        let interface = Object::new(&Gvk::new("req.nephio.org", "v1alpha1", "Interface"), "n9");
        lay_over(&mut package, &child_with(vec![rendered, interface], true));
        assert_eq!(
            package.iter().next().unwrap().annotation(keys::APPROVE),
            Some(keys::APPROVE_MANUAL)
        );
        assert!(package.iter().any(|o| o.kind == "Interface"));
    }
}
