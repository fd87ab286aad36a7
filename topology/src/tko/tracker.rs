//! The tracker: follows the preparer's Data API (`Watch` on deployments and sites) and keeps
//! every followed NFTopology deployment's children what the plan wants.
//!
//! A followed deployment is one ntc prepared, or the parent of a child carrying
//! `nf-deployment-name`. It is reconciled when one of its children changes or is deleted, when
//! it changes itself (the NFTopology in its package edited), and when any site is registered,
//! relabelled or deleted (which can change the clusters of every topology). A reconcile
//! re-plans against the current sites and applies the difference ([`super::follow`]), approves
//! the gated children whose gates are open, and keeps the `NFDeployedTopology` and the
//! NFTopology's status in the parent's package current.
//!
//! Changes come in bursts (a hundred sites relabelled at once, the preparer preparing the
//! thousand children a re-plan created): the tracker gathers a burst (the changes that follow
//! within 50 ms of the last, for at most 500 ms) and reconciles each parent it touches once.
//! The echoes of its own writes (the creation or deletion of a child it created or deleted, a
//! row still as it wrote it) bring no reconcile: the one that wrote them knew.
//!
//! List, then watch (as Kubernetes' list + watch from `resourceVersion`): on start, and again
//! after a lost watch, it lists the NFTopology deployments (the parents of children carrying
//! `nf-deployment-name`), follows them, reconciles every followed deployment once (so nothing
//! that changed while it was away is missed), then watches from the listing's revision: the
//! changes after the listing, none of the kept log before it replayed. No revision is kept
//! between connections; a reconnect lists again.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt as _;
use nephrite_krm::keys::NF_DEPLOYMENT_NAME;
use nephrite_krm::{Gvk, Object, Package};
use nephrite_preparer_client::{Change, DataApi, EntityKind};
use nephrite_runtime::ShutdownHandle;
use nephrite_topology::api::{API_VERSION, NF_DEPLOYED_TOPOLOGY_KIND, NF_TOPOLOGY_KIND};
use nephrite_topology::tko::ChildObservation;
use nephrite_topology::{RolloutPolicy, plan};

use super::data::{self, DataEndpoint};
use super::follow::{self, Fingerprints, Followed};
use super::parsed::ParsedPackages;
use super::{TkoError, topology_of};

/// How many times the tracker tries to take a parent's lease that another writer holds.
const UPDATE_ATTEMPTS: usize = 20;
/// The pause between two such tries.
const BUSY_PAUSE: Duration = Duration::from_millis(100);
/// A change is taken with the ones before it when it comes within this of the last.
const SETTLE: Duration = Duration::from_millis(50);
/// The longest a burst of changes is gathered before its reconciles start.
const MAX_SETTLE: Duration = Duration::from_millis(500);
/// How long a parent whose reconcile failed (its lease held by a preparation, the preparer
/// restarting) waits before it is reconciled again when no change comes first: with the
/// echoes of its own writes ignored, nothing else would bring it back.
const RETRY: Duration = Duration::from_secs(1);
/// How long the tracker holds a parent's lease for one reconcile at most: an ntc killed
/// mid-reconcile leaves the parent to other writers after that.
const RECONCILE_LEASE: Duration = Duration::from_secs(15);

/// What the tracker shares with the plugin: the deployments followed and the children's
/// fingerprints as last read.
#[derive(Debug, Clone, Default)]
pub struct Following {
    /// The NFTopology deployments followed.
    pub followed: Followed,
    /// The children's fingerprints.
    pub fingerprints: Fingerprints,
    /// The parent packages last written, parsed ahead of the next reconcile.
    pub parsed: ParsedPackages,
}

/// Runs until `shutdown` triggers, reconnecting to `endpoint` after errors. A reconcile under
/// way when shutdown comes is finished first, so no parent's lease is left held.
pub async fn run(
    endpoint: DataEndpoint,
    policy: RolloutPolicy,
    following: Following,
    shutdown: ShutdownHandle,
) {
    while !shutdown.is_triggered() {
        if let Err(error) = watch(&endpoint, &policy, &following, &shutdown).await {
            tracing::warn!(%error, "tracker: watch ended, reconnecting");
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = shutdown.triggered() => break,
        }
    }
}

/// One connection: lists the NFTopology deployments, follows and reconciles each, then
/// watches deployments and sites from the listing's revision (so nothing before it is
/// replayed and nothing after it is missed) until the watch ends or shutdown.
async fn watch(
    endpoint: &DataEndpoint,
    policy: &RolloutPolicy,
    following: &Following,
    shutdown: &ShutdownHandle,
) -> Result<(), TkoError> {
    let data = tokio::select! {
        connected = data::connect(endpoint) => connected?,
        _ = shutdown.triggered() => return Ok(()),
    };
    let listed = data::topology_parents(&data).await?;
    for parent in &listed.parents {
        following.followed.insert(parent);
    }
    // The listing's reconciles write after the listing's revision: their echoes come in the
    // watch, and are known as such.
    let mut own = OwnWrites::default();
    let mut failed = BTreeSet::new();
    for parent in following.followed.parents() {
        if shutdown.is_triggered() {
            return Ok(());
        }
        if !reconcile_logged(&data, policy, following, &parent, &mut own).await {
            failed.insert(parent);
        }
    }
    let mut stream = data
        .watch(listed.revision, &[EntityKind::Deployment, EntityKind::Site])
        .await?;
    // Each child carrying `nf-deployment-name`, with its parent: as listed, then as watched.
    let mut parent_of = listed.parent_of;
    loop {
        let retry_in = if failed.is_empty() {
            Duration::MAX
        } else {
            RETRY
        };
        let change = tokio::select! {
            change = stream.next() => Some(change),
            () = tokio::time::sleep(retry_in) => None,
            _ = shutdown.triggered() => return Ok(()),
        };
        // The parents whose last reconcile failed are reconciled again with the next burst,
        // or on their own after RETRY.
        let mut dirty = std::mem::take(&mut failed);
        let mut ended = false;
        if let Some(change) = change {
            let Some(change) = change.transpose()? else {
                return Ok(());
            };
            note(change, following, &mut parent_of, &mut own, &mut dirty);
            // A burst (a hundred sites relabelled, a thousand children prepared) is one
            // reconcile per parent, not one per change: the changes already there, and those
            // that follow within SETTLE of the last, up to MAX_SETTLE after the first, are
            // taken together.
            ended = coalesce(&mut stream, following, &mut parent_of, &mut own, &mut dirty).await?;
        }
        for parent in dirty {
            if shutdown.is_triggered() {
                return Ok(());
            }
            if !reconcile_logged(&data, policy, following, &parent, &mut own).await {
                failed.insert(parent);
            }
        }
        if ended {
            return Ok(());
        }
    }
}

/// Takes the changes that follow the first of a burst into `dirty`, until none comes for
/// [`SETTLE`] or [`MAX_SETTLE`] has passed; whether the stream ended.
async fn coalesce(
    stream: &mut nephrite_preparer_client::ChangeStream,
    following: &Following,
    parent_of: &mut HashMap<String, String>,
    own: &mut OwnWrites,
    dirty: &mut BTreeSet<String>,
) -> Result<bool, TkoError> {
    let until = tokio::time::Instant::now() + MAX_SETTLE;
    loop {
        let wait = until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(SETTLE);
        match tokio::time::timeout(wait, stream.next()).await {
            Ok(Some(change)) => note(change?, following, parent_of, own, dirty),
            Ok(None) => return Ok(true),
            Err(_) => return Ok(false),
        }
    }
}

/// What `change` means: the followed deployments to reconcile go into `dirty`. A change that
/// is the echo of this tracker's own write (`own`) makes none dirty: the reconcile that wrote
/// it had already taken it into account.
fn note(
    change: Change,
    following: &Following,
    parent_of: &mut HashMap<String, String>,
    own: &mut OwnWrites,
    dirty: &mut BTreeSet<String>,
) {
    let echo = own.is_echo(&change);
    match (change.kind, change.deployment) {
        (EntityKind::Site, _) => dirty.extend(following.followed.parents()),
        (EntityKind::Deployment, Some(info))
            if info.metadata.contains_key(NF_DEPLOYMENT_NAME) && !info.parent_id.is_empty() =>
        {
            parent_of.insert(info.id.clone(), info.parent_id.clone());
            following.followed.insert(&info.parent_id);
            if !echo {
                dirty.insert(info.parent_id);
            }
        }
        (EntityKind::Deployment, _) if change.deleted => {
            if let Some(parent) = parent_of.remove(&change.id)
                && !echo
            {
                dirty.insert(parent);
            }
            if following.followed.contains(&change.id) {
                following.followed.remove(&change.id);
            }
        }
        // The followed deployment itself changed: its NFTopology may have been edited.
        (EntityKind::Deployment, _) if following.followed.contains(&change.id) && !echo => {
            dirty.insert(change.id);
        }
        _ => {}
    }
}

/// The writes this tracker made, so that their echoes in the change feed bring no reconcile
/// of their own: the creation of a child it created (the first change of that id), the
/// deletion of a child it deleted, and a put whose row is still the one it wrote (same
/// `updated` time: had anyone written since, the row as delivered would differ, and that
/// write brings its own change). Kept per connection.
#[derive(Debug, Default)]
struct OwnWrites {
    created: HashSet<String>,
    deleted: HashSet<String>,
    rows: HashMap<String, String>,
}

impl OwnWrites {
    fn record(&mut self, wrote: Wrote) {
        self.created.extend(wrote.created);
        self.deleted.extend(wrote.deleted);
        self.rows.extend(wrote.rows);
    }

    /// Whether `change` is the echo of one of these writes (each echo is recognised once).
    fn is_echo(&mut self, change: &Change) -> bool {
        if change.kind != EntityKind::Deployment {
            return false;
        }
        if change.deleted {
            self.created.remove(&change.id);
            self.rows.remove(&change.id);
            return self.deleted.remove(&change.id);
        }
        if self.created.remove(&change.id) {
            return true;
        }
        match (&change.deployment, self.rows.get(&change.id)) {
            (Some(info), Some(updated)) if &info.updated == updated => {
                self.rows.remove(&change.id);
                true
            }
            _ => false,
        }
    }
}

/// What one reconcile wrote through the Data API.
#[derive(Debug, Default)]
pub struct Wrote {
    /// Children created.
    pub created: Vec<String>,
    /// Children deleted.
    pub deleted: Vec<String>,
    /// Rows written (children updated in place or approved, the parent's status), with the
    /// `updated` time each write gave.
    pub rows: Vec<(String, String)>,
}

/// Reconciles `parent`, recording what it wrote in `own`; whether it succeeded (a failure is
/// logged, and the caller tries again).
async fn reconcile_logged(
    data: &dyn DataApi,
    policy: &RolloutPolicy,
    following: &Following,
    parent: &str,
    own: &mut OwnWrites,
) -> bool {
    match reconcile(data, policy, following, parent).await {
        Ok(wrote) => {
            own.record(wrote);
            true
        }
        Err(error) => {
            tracing::warn!(%parent, %error, "tracker: reconcile failed, trying again");
            false
        }
    }
}

/// Re-plans the children of NFTopology deployment `parent` and applies the difference,
/// approves what may be approved and updates its deployed topology and status.
///
/// All of it under the parent's lease, taken before its package is read: the NFTopology the
/// plan comes from cannot be edited until the children have been changed and the status
/// written. Without the lease a re-plan could read the package, an edit (`deletionPolicy:
/// orphan`) and a site change could both land, and the re-plan would apply the old policy to
/// the new sites (deleting a child the new policy keeps). The sites are read after the package,
/// so they are never older than it; a site change after that read brings another re-plan.
pub async fn reconcile(
    data: &dyn DataApi,
    policy: &RolloutPolicy,
    following: &Following,
    parent: &str,
) -> Result<Wrote, TkoError> {
    for _ in 0..UPDATE_ATTEMPTS {
        let modification = match data.start_modification(parent, Some(RECONCILE_LEASE)).await {
            Ok(modification) => modification,
            Err(error) if error.is_not_found() => {
                following.followed.remove(parent);
                following.parsed.forget(parent);
                return Ok(Wrote::default());
            }
            Err(error) if error.is_busy() => {
                tokio::time::sleep(BUSY_PAUSE).await;
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        let token = &modification.token;
        let mut wrote = Wrote::default();
        match reconcile_held(
            data,
            policy,
            following,
            parent,
            &modification.package_yaml,
            &mut wrote,
        )
        .await
        {
            Ok(Some(package_yaml)) => {
                let row = data
                    .end_modification(parent, token, Some(package_yaml.clone()))
                    .await?;
                following.parsed.prepare(parent, package_yaml);
                wrote.rows.push((parent.to_owned(), row.updated));
                tracing::info!(%parent, "deployed topology and status updated");
            }
            Ok(None) => data.cancel_modification(parent, token).await?,
            Err(error) => {
                if let Err(cancel) = data.cancel_modification(parent, token).await {
                    tracing::warn!(%parent, error = %cancel, "tracker: cannot release the lease");
                }
                return Err(error);
            }
        }
        return Ok(wrote);
    }
    Err(TkoError::Package {
        deployment: parent.to_owned(),
        message: format!("the deployment stayed busy through {UPDATE_ATTEMPTS} attempts"),
    })
}

/// One reconcile of `parent`, whose lease the caller holds and whose package is
/// `package_yaml`: the package to write back, `None` when the deployed topology and status
/// are already current.
async fn reconcile_held(
    data: &dyn DataApi,
    policy: &RolloutPolicy,
    following: &Following,
    parent: &str,
    package_yaml: &str,
    wrote: &mut Wrote,
) -> Result<Option<String>, TkoError> {
    let bad = |message: String| TkoError::Package {
        deployment: parent.to_owned(),
        message,
    };
    let started = std::time::Instant::now();
    let (mut package, topology, classes) = match following.parsed.get(parent, package_yaml) {
        // The text this tracker wrote last, parsed since.
        Some(parsed) => (
            parsed.package.clone(),
            parsed.topology.clone(),
            parsed.classes.clone(),
        ),
        None => {
            let package = Package::from_yaml(package_yaml).map_err(|e| bad(e.to_string()))?;
            let (topology, classes) = topology_of(parent, &package, "")?;
            (package, topology, classes)
        }
    };
    let parsed = started.elapsed();
    let clusters = data::clusters(data).await?;
    let plan =
        plan::plan(&topology, &classes, &clusters, policy).map_err(|source| TkoError::Plan {
            deployment: parent.to_owned(),
            source,
        })?;
    let planned = started.elapsed();
    let applied = follow::replan(
        data,
        parent,
        &plan,
        &following.followed,
        &following.fingerprints,
    )
    .await?;
    if !applied.is_noop() {
        // Where a re-plan's time goes, for an operator asking why children came late.
        tracing::info!(
            %parent,
            package_ms = parsed.as_millis() as u64,
            sites_and_plan_ms = (planned - parsed).as_millis() as u64,
            children_read_ms = applied.reading.as_millis() as u64,
            writes_ms = applied.writing.as_millis() as u64,
            batches = applied.batches,
            "children re-planned"
        );
    }
    wrote.created.extend(applied.created);
    wrote.deleted.extend(applied.deleted);
    wrote.rows.extend(applied.rewritten);
    let mut children = data::children(data, parent).await?;
    // Approving a child may open the gates of others (a chain of policies): approve until
    // none is left to approve, so the deployed topology and status below count every approval
    // this reconcile made (their echoes bring no other).
    let mut tried = HashSet::new();
    let observation = loop {
        let observation = ChildObservation::new(&plan, children.iter().cloned());
        let approvals: Vec<String> = observation
            .approvals(&plan)
            .into_iter()
            .filter(|child| tried.insert(child.clone()))
            .collect();
        if approvals.is_empty() {
            break observation;
        }
        for child in approvals {
            tracing::info!(%parent, %child, "approving: every gate is open");
            let row = data.approve_deployment(&child).await?;
            if let Some(observed) = children.iter_mut().find(|c| c.id == child) {
                observed.approved = row.approved;
            }
            wrote.rows.push((child, row.updated));
        }
    };
    let builder = observation.deployed(&plan);
    let mut desired = Object::from_typed(&builder.resource()).map_err(|e| bad(e.to_string()))?;
    desired.set_namespace(topology.metadata.namespace.clone());
    let gvk = Gvk::from_api_version_kind(API_VERSION, NF_DEPLOYED_TOPOLOGY_KIND)
        .map_err(|e| bad(e.to_string()))?;
    let current = package
        .get(&gvk, topology.name())
        .map(|o| o.spec().cloned());
    let deployed_current = current
        .as_ref()
        .map_or(builder.published_count() == 0, |spec| {
            spec.as_ref() == desired.spec()
        });
    // The NFTopology's status, kept beside the deployed topology.
    let previous = topology.status.clone().unwrap_or_default();
    let status = observation.status(
        &plan,
        &previous.conditions,
        &jiff::Timestamp::now().to_string(),
    );
    let status_current = topology.status.as_ref() == Some(&status);
    if deployed_current && status_current {
        return Ok(None);
    }
    if !deployed_current {
        package.insert(desired);
    }
    if !status_current {
        let topology_gvk = Gvk::from_api_version_kind(API_VERSION, NF_TOPOLOGY_KIND)
            .map_err(|e| bad(e.to_string()))?;
        if let Some(object) = package.get_mut(&topology_gvk, topology.name()) {
            let value = serde_json::to_value(&status).map_err(|e| bad(e.to_string()))?;
            object
                .body
                .insert("status", value)
                .map_err(|e| bad(e.to_string()))?;
        }
    }
    Ok(Some(package.to_yaml()))
}
