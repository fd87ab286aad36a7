//! The `octavia` (`neutron_l7_policy`) driver: keeps the Router LB's L7 tree equal to the
//! controller's translation.
//!
//! Every new snapshot (and every [`RESYNC`], so objects deleted by hand come back) is one sync:
//! plan the calls (`nephrite_l7::octavia::plan`, pure) from the tree, run them one at a time
//! ([`execute_onto`]). The tree is read from Octavia in full
//! ([`read_tree`]) on the first sync, at every periodic resync, after a leadership change and
//! after a failed call; otherwise it is the tree the last sync left, the calls Octavia accepted
//! performed on it with the ids it answered, so a change costs its calls and their settling and
//! nothing more. An endpoint change makes a plan of member calls only, since the plan is
//! minimal. A sync with failed calls (a 5xx, a timeout, an object in
//! `ERROR`) publishes a Warning Event `OctaviaError` on each Ingress/Route concerned, and the
//! next sync comes after a backoff (1 s doubling to 60 s) or at the next snapshot, whichever is
//! first: the calls of other objects ran anyway. After a sync each Ingress/Route gets the ids of
//! its policies, rules and pools in its versioned annotation ([`state`](super::state)). With
//! Kubernetes only the leader (the Lease holder) syncs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use nephrite_l7::Translation;
use nephrite_l7::model::L7Config;
use nephrite_l7::octavia::{Desired, Ownership, PlanError, Tree, plan};
use nephrite_runtime::ShutdownHandle;
use serde_json::json;
use tokio::sync::watch;

use super::ApiError;
use super::barbican::{Barbican, container_name, name_prefix};
use super::executor::{Executed, execute_onto, object_of_tags};
use super::observe::read_tree;
use super::octavia::Octavia;
use super::state::{Named, ObjectState, PolicyState, annotation_of};
use crate::kubernetes::watch::kinds;
use crate::source::Snapshot;

/// How often the tree is compared with the translation when nothing changed.
pub const RESYNC: Duration = Duration::from_secs(30);
/// The first retry delay after a failed sync.
pub const BACKOFF_START: Duration = Duration::from_secs(1);
/// The longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Why a sync could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Reading the tree failed.
    #[error("reading the Router LB's tree: {0}")]
    Read(#[from] ApiError),
    /// The translation cannot be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Storing a certificate in Barbican (or listing what is stored) failed: nothing was
    /// changed, so a TLS listener never loses a certificate to a Barbican outage.
    #[error("storing the certificates in Barbican: {0}")]
    Barbican(ApiError),
}

/// What one sync did.
#[derive(Debug, Default)]
pub struct Synced {
    /// The calls planned.
    pub planned: usize,
    /// What running them did.
    pub executed: Executed,
    /// How long it took.
    pub took: Duration,
    /// Barbican containers stored by this sync.
    pub containers_stored: usize,
    /// Barbican containers deleted by this sync (no listener uses them any more).
    pub containers_deleted: usize,
    /// Times this sync read the whole tree from Octavia: 0 when it planned from the tree the
    /// last sync left and every call went through, 1 on the first sync, after a periodic
    /// resync, or when a call failed (read afterwards), 2 when both.
    pub tree_reads: usize,
}

/// The driver of one Router LB.
pub struct OctaviaDriver {
    octavia: Octavia,
    lb_id: String,
    owner: Ownership,
    kube: Option<KubeSide>,
    /// Barbican and the prefix of the container names of this cluster.
    barbican: Option<(Barbican, String)>,
    /// What Octavia holds as the last sync left it (its read plus the calls Octavia accepted,
    /// performed on it), planned from by the next sync instead of a read. None on start, after
    /// a failed call or sync, after a periodic resync and when leadership changes: the next sync
    /// reads the whole tree.
    kept: Option<Tree>,
}

/// Annotations and Events, with `--source kube`.
struct KubeSide {
    client: kube::Client,
    recorder: Recorder,
    /// The annotation last written per object (`Ingress shop/web`).
    written: BTreeMap<String, String>,
    /// Events already published in the current failure episode.
    reported: BTreeSet<(String, String)>,
}

impl OctaviaDriver {
    /// A driver of load balancer `lb_id` for `owner`'s cluster; with a Kubernetes client it
    /// annotates objects and publishes Events as `identity`.
    pub fn new(
        octavia: Octavia,
        lb_id: String,
        owner: Ownership,
        kube: Option<(kube::Client, String)>,
    ) -> Self {
        OctaviaDriver {
            octavia,
            lb_id,
            owner,
            kube: kube.map(|(client, identity)| KubeSide {
                recorder: Recorder::new(
                    client.clone(),
                    Reporter {
                        controller: "kuryr-l7".to_owned(),
                        instance: Some(identity),
                    },
                ),
                client,
                written: BTreeMap::new(),
                reported: BTreeSet::new(),
            }),
            barbican: None,
            kept: None,
        }
    }

    /// The same driver storing the certificates of TLS listeners in `barbican`, as `cluster`'s.
    pub fn with_barbican(mut self, barbican: Barbican, cluster: &str) -> Self {
        self.barbican = Some((barbican, cluster.to_owned()));
        self
    }

    /// The container reference of each certificate of `config` (by container name), stored
    /// where missing; with no Barbican, none.
    async fn store_certificates(
        &self,
        config: &L7Config,
    ) -> Result<(BTreeMap<String, String>, usize), ApiError> {
        let Some((barbican, cluster)) = &self.barbican else {
            return Ok((BTreeMap::new(), 0));
        };
        if config.certificates.is_empty() {
            return Ok((BTreeMap::new(), 0));
        }
        let mut existing: BTreeMap<String, String> = BTreeMap::new();
        for container in barbican.containers(&name_prefix(cluster)).await? {
            if let Some(name) = container.name {
                existing.entry(name).or_insert(container.container_ref);
            }
        }
        let mut refs: BTreeMap<String, String> = BTreeMap::new();
        let mut stored = 0;
        for certificate in &config.certificates {
            let name = container_name(cluster, certificate);
            if refs.contains_key(&name) {
                continue;
            }
            let reference = match existing.remove(&name) {
                Some(reference) => reference,
                None => {
                    let reference = barbican.store_certificate(&name, certificate).await?;
                    tracing::info!(
                        container = %reference,
                        origin = %certificate.origin,
                        "certificate stored in Barbican"
                    );
                    stored += 1;
                    reference
                }
            };
            refs.insert(name, reference);
        }
        Ok((refs, stored))
    }

    /// Deletes this cluster's containers no listener of `tree` names and `keep` does not hold,
    /// with their secrets, and secrets of this cluster no container holds (left by a crash
    /// between storing a secret and its container).
    async fn delete_unused_certificates(
        &self,
        tree: &Tree,
        keep: &BTreeSet<String>,
    ) -> Result<usize, ApiError> {
        let Some((barbican, cluster)) = &self.barbican else {
            return Ok(0);
        };
        let prefix = name_prefix(cluster);
        let used: BTreeSet<&str> = tree
            .listeners
            .iter()
            .filter_map(|l| l.tls.as_ref())
            .flat_map(|tls| {
                std::iter::once(tls.default_container.as_str())
                    .chain(tls.sni_containers.iter().map(String::as_str))
            })
            .collect();
        let mut deleted = 0;
        let mut held: BTreeSet<String> = BTreeSet::new();
        for container in barbican.containers(&prefix).await? {
            if used.contains(container.container_ref.as_str())
                || keep.contains(&container.container_ref)
            {
                held.extend(container.secret_refs.iter().map(|s| s.secret_ref.clone()));
                continue;
            }
            barbican.delete_container(&container).await?;
            tracing::info!(container = %container.container_ref, "unused certificate deleted from Barbican");
            deleted += 1;
        }
        for secret in barbican.secrets(&prefix).await? {
            if !held.contains(&secret.secret_ref) {
                barbican.delete(&secret.secret_ref).await?;
            }
        }
        Ok(deleted)
    }

    /// One sync of `translation`: plan from the tree the last sync left (read in full when there
    /// is none), execute, and keep the tree the calls made (read again when a call failed).
    pub async fn sync(&mut self, translation: &Translation) -> Result<Synced, SyncError> {
        let began = Instant::now();
        let mut tree_reads = 0;
        let tree = match self.kept.take() {
            Some(tree) => tree,
            None => {
                tree_reads += 1;
                read_tree(&self.octavia, &self.lb_id).await?
            }
        };
        let (containers, containers_stored) = self
            .store_certificates(&translation.config)
            .await
            .map_err(SyncError::Barbican)?;
        let cluster = self.barbican.as_ref().map(|(_, c)| c.as_str());
        let desired = Desired::from_config_with_tls(&translation.config, |certificate| {
            containers
                .get(&container_name(cluster?, certificate))
                .cloned()
        });
        let calls = plan(&desired, &tree, &self.owner)?;
        let mut after = tree;
        let (executed, exact) = execute_onto(&self.octavia, &self.lb_id, &calls, &mut after).await;
        if !calls.is_empty() {
            tracing::info!(
                tree_reads,
                exact,
                planned = calls.len(),
                done = executed.done,
                skipped = executed.skipped,
                failed = executed.failures.len(),
                "Octavia sync"
            );
        }
        let after = if exact {
            after
        } else {
            tree_reads += 1;
            read_tree(&self.octavia, &self.lb_id).await?
        };
        // Containers go once no listener names them: after a rotation the listener names the
        // new one, after the last TLS Ingress is gone there is no listener.
        let containers_deleted = if executed.is_complete() && self.barbican.is_some() {
            let keep: BTreeSet<String> = containers.into_values().collect();
            match self.delete_unused_certificates(&after, &keep).await {
                Ok(deleted) => deleted,
                Err(error) => {
                    tracing::warn!("deleting unused certificates from Barbican: {error}");
                    0
                }
            }
        } else {
            0
        };
        self.annotate(&after).await;
        if exact {
            self.kept = Some(after);
        }
        Ok(Synced {
            planned: calls.len(),
            executed,
            took: began.elapsed(),
            containers_stored,
            containers_deleted,
            tree_reads,
        })
    }

    /// Follows `snapshots` until `shutdown`; with `leadership`, syncs only while it says this
    /// controller leads (a standby keeps still, so two controllers never race on one load
    /// balancer).
    pub async fn follow(
        mut self,
        mut snapshots: watch::Receiver<Arc<Snapshot>>,
        mut leadership: Option<watch::Receiver<bool>>,
        shutdown: ShutdownHandle,
    ) {
        let mut backoff = BACKOFF_START;
        loop {
            if let Some(leading) = &mut leadership
                && !*leading.borrow_and_update()
            {
                tokio::select! {
                    changed = leading.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                    _ = shutdown.triggered() => return,
                }
                continue;
            }
            let snapshot = snapshots.borrow_and_update().clone();
            let wait = match self.sync(&snapshot.translation).await {
                Ok(synced) if synced.executed.is_complete() => {
                    backoff = BACKOFF_START;
                    if let Some(kube) = &mut self.kube {
                        kube.reported.clear();
                    }
                    RESYNC
                }
                Ok(synced) => {
                    self.report(&synced.executed).await;
                    next_backoff(&mut backoff)
                }
                Err(error) => {
                    tracing::warn!("Octavia sync failed: {error}");
                    next_backoff(&mut backoff)
                }
            };
            let lost = async {
                match &mut leadership {
                    Some(leading) => {
                        if leading.changed().await.is_err() {
                            // The election ended (shutdown): nothing more will change.
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                changed = snapshots.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                // A periodic resync (or a retry) reads the whole tree: what changed in Octavia
                // behind the driver's back is found there.
                () = tokio::time::sleep(wait) => self.kept = None,
                // Another controller may have led meanwhile.
                () = lost => self.kept = None,
                _ = shutdown.triggered() => return,
            }
        }
    }

    /// A Warning Event per failed object (once per failure episode).
    async fn report(&mut self, executed: &Executed) {
        let Some(kube) = &mut self.kube else {
            return;
        };
        for failure in &executed.failures {
            let Some(object) = &failure.object else {
                continue;
            };
            let message = failure.error.to_string();
            if !kube.reported.insert((object.clone(), message.clone())) {
                continue;
            }
            let Some(reference) = reference(object) else {
                continue;
            };
            let event = Event {
                type_: EventType::Warning,
                reason: "OctaviaError".to_owned(),
                note: Some(crate::kubernetes::event_note(&message)),
                action: "Sync".to_owned(),
                secondary: None,
            };
            if let Err(e) = kube.recorder.publish(&event, &reference).await {
                tracing::warn!("publishing an Event on {object}: {e}");
            }
        }
    }

    /// Writes each object's state annotation where it changed.
    async fn annotate(&mut self, tree: &Tree) {
        let Some(kube) = &mut self.kube else {
            return;
        };
        let mut states = object_states(tree, &self.lb_id, &self.owner);
        // Objects annotated before and holding nothing now get an empty state.
        for object in kube.written.keys() {
            states.entry(object.clone()).or_insert_with(|| ObjectState {
                load_balancer: self.lb_id.clone(),
                ..ObjectState::default()
            });
        }
        for (object, state) in states {
            let Some((kind, namespace, name)) = split_object(&object) else {
                continue;
            };
            let value = state.to_annotation(kind);
            if kube.written.get(&object) == Some(&value) {
                continue;
            }
            let Some(resource) = kinds()
                .into_iter()
                .map(|k| k.resource)
                .find(|r| r.kind == kind)
            else {
                continue;
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(kube.client.clone(), namespace, &resource);
            let patch = json!({"metadata": {"annotations": {annotation_of(kind): value}}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    kube.written.insert(object, value);
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    kube.written.remove(&object);
                }
                Err(e) => tracing::warn!("annotating {object}: {e}"),
            }
        }
    }
}

/// The delay to wait now; `backoff` doubles (up to [`BACKOFF_MAX`]) for the next failure.
fn next_backoff(backoff: &mut Duration) -> Duration {
    let now = *backoff;
    *backoff = (now * 2).min(BACKOFF_MAX);
    now
}

/// `Ingress shop/web` (or a policy's origin, `Ingress shop/web shop.example.com /api
/// (Prefix)`) as (kind, namespace, name); only Ingresses and Routes.
fn split_object(object: &str) -> Option<(&str, &str, &str)> {
    let mut words = object.split(' ');
    let kind = words.next()?;
    let (namespace, name) = words.next()?.split_once('/')?;
    matches!(kind, "Ingress" | "Route").then_some((kind, namespace, name))
}

/// The Kubernetes object (`Ingress shop/web`) an origin names.
fn object_key(origin: &str) -> Option<String> {
    split_object(origin).map(|(kind, namespace, name)| format!("{kind} {namespace}/{name}"))
}

fn reference(object: &str) -> Option<ObjectReference> {
    let (kind, namespace, name) = split_object(object)?;
    let api_version = if kind == "Route" {
        "route.openshift.io/v1"
    } else {
        "networking.k8s.io/v1"
    };
    Some(ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        ..ObjectReference::default()
    })
}

/// Each Ingress/Route's policies (with rules) and the pools they forward to, from the tree.
pub fn object_states(tree: &Tree, lb_id: &str, owner: &Ownership) -> BTreeMap<String, ObjectState> {
    let mut states: BTreeMap<String, ObjectState> = BTreeMap::new();
    for listener in &tree.listeners {
        for policy in listener.policies.iter().filter(|p| owner.owns(&p.tags)) {
            let Some(object) = object_of_tags(&policy.tags).and_then(|o| object_key(&o)) else {
                continue;
            };
            let state = states.entry(object).or_insert_with(|| ObjectState {
                load_balancer: lb_id.to_owned(),
                ..ObjectState::default()
            });
            state.l7_policies.push(PolicyState {
                id: policy.id.clone(),
                name: policy.name.clone(),
                rules: policy.rules.iter().map(|r| r.id.clone()).collect(),
            });
            if let Some(pool_id) = policy.action.pool()
                && !state.pools.iter().any(|p| &p.id == pool_id)
            {
                let name = tree
                    .pools
                    .iter()
                    .find(|p| &p.id == pool_id)
                    .map(|p| p.name.clone())
                    .unwrap_or_default();
                state.pools.push(Named {
                    id: pool_id.clone(),
                    name,
                });
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_split_into_kind_namespace_and_name() {
        assert_eq!(
            split_object("Ingress shop/web"),
            Some(("Ingress", "shop", "web"))
        );
        assert_eq!(split_object("Route a/b"), Some(("Route", "a", "b")));
        assert_eq!(
            split_object("Ingress shop/web shop.example.com /api (Prefix)"),
            Some(("Ingress", "shop", "web"))
        );
        assert_eq!(
            object_key("Route a/b a.example.com /x (Route prefix)").as_deref(),
            Some("Route a/b")
        );
        assert_eq!(split_object("Service shop/web"), None);
        assert_eq!(split_object("Ingress"), None);
    }
}
