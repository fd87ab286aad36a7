//! The Kubernetes source (`--source kube`): kube-runtime watches on Ingress, IngressClass,
//! Route (`route.openshift.io/v1`, as a dynamic resource), Service, EndpointSlice, TLS
//! Secrets, Namespaces and the Gateway API's GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant feed `nephrite-l7`'s translation unchanged; every change publishes a new snapshot
//! (when its content changed). The controller finds the API server as kube-rs does
//! (`KUBECONFIG`, then in-cluster).
//!
//! Several controllers run: all serve the rules; the one holding the Lease (leader election,
//! [`nephrite_runtime::leader`]) also writes Ingress, Route, GatewayClass, Gateway and HTTPRoute
//! status and Warning Events
//! ([`status`]).

use std::sync::Arc;
use std::time::Duration;

use nephrite_l7::{Options, SourceObject};
use nephrite_runtime::ShutdownHandle;
use nephrite_runtime::leader::{LeaderElection, LeaseLock, LeaseTiming};

use tokio::sync::watch::{Receiver, Sender, channel};

use crate::publisher::Publisher;
use crate::source::Snapshot;

pub use nephrite_l7::status;
pub mod watch;
mod writer;

use status::StatusSettings;
use watch::{Store, kinds, watch_kind};
use writer::StatusWriter;

/// The origin of every object read from Kubernetes, in reports.
pub const ORIGIN: &str = "kube";
/// How long a burst of changes is let settle before the rules are rebuilt.
pub const SETTLE: Duration = Duration::from_millis(5);
/// The first pause before the leader writes again after a failed status or Event write; it
/// doubles on each failure up to [`WRITE_RETRY_MAX`] and starts over after a complete pass.
pub const WRITE_RETRY: Duration = Duration::from_secs(1);
/// The longest pause between write attempts.
pub const WRITE_RETRY_MAX: Duration = Duration::from_secs(30);

/// The most bytes kube-apiserver accepts in an `events.k8s.io/v1` Event's `note` (it counts
/// bytes, not characters: a longer note refuses the whole Event).
pub const EVENT_NOTE_LIMIT: usize = 1024;

/// `text` cut to [`EVENT_NOTE_LIMIT`] bytes at a character boundary, for an Event's `note`.
pub fn event_note(text: &str) -> String {
    let mut end = text.len().min(EVENT_NOTE_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Kubernetes-mode settings.
#[derive(Debug, Clone)]
pub struct KubeSettings {
    /// Namespace of the leader-election Lease.
    pub lease_namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This controller's identity (unique among controllers).
    pub identity: String,
    /// What goes into Ingress and Route status.
    pub status: StatusSettings,
}

/// Why the Kubernetes source could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeSourceError {
    /// No API server configuration (neither `KUBECONFIG` nor in-cluster).
    #[error("cannot find the Kubernetes API server (KUBECONFIG, then in-cluster): {0}")]
    Client(#[from] kube::Error),
    /// The kinds could not all be listed in time.
    #[error("could not list {0} from the API server within {1:?}")]
    NotListed(String, Duration),
}

/// Waits until every kind was listed once (or found off); `limit` bounds the wait.
async fn wait_listed(
    store: &Store,
    kinds: &[watch::Kind],
    limit: Option<Duration>,
) -> Result<(), KubeSourceError> {
    let start = tokio::time::Instant::now();
    let mut warned = false;
    while !store.synced(kinds) {
        let waited = start.elapsed();
        if limit.is_some_and(|limit| waited > limit) {
            let missing: Vec<&str> = kinds
                .iter()
                .filter(|k| !store.synced(std::slice::from_ref(k)))
                .map(|k| k.resource.plural.as_str())
                .collect();
            return Err(KubeSourceError::NotListed(missing.join(", "), waited));
        }
        if !warned && waited > Duration::from_secs(10) {
            tracing::warn!("still listing the cluster's objects");
            warned = true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Lists every kind once and translates it: what `kuryr-l7 rules --source kube` shows.
pub async fn snapshot_once(options: &Options) -> Result<Snapshot, KubeSourceError> {
    let client = kube::Client::try_default().await?;
    let store = Arc::new(Store::default());
    let kinds = kinds();
    let watches: Vec<_> = kinds
        .iter()
        .map(|kind| tokio::spawn(watch_kind(client.clone(), kind.clone(), store.clone())))
        .collect();
    let listed = wait_listed(&store, &kinds, Some(Duration::from_secs(30))).await;
    for watch in watches {
        watch.abort();
    }
    listed?;
    Ok(snapshot_of(&store, options))
}

/// The translation of what the store holds.
pub fn snapshot_of(store: &Store, options: &Options) -> Snapshot {
    let objects: Vec<SourceObject> = store
        .objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: ORIGIN.to_owned(),
        })
        .collect();
    Snapshot::build(&objects, Vec::new(), options)
}

/// The GatewayClass, Gateway and HTTPRoute statuses that differ from the stored ones; every
/// Gateway of ours gets the `--status-address` addresses (none: `AddressNotAssigned`).
pub fn gateway_statuses(
    objects: &[nephrite_krm::Object],
    model: &nephrite_l7::gateway::Model,
    options: &Options,
    settings: &StatusSettings,
    now: &str,
) -> Vec<status::StatusUpdate> {
    use nephrite_l7::gateway::status::{GatewayAddress, decide};
    let addresses: Vec<GatewayAddress> = settings
        .addresses
        .iter()
        .map(|a| GatewayAddress::new(a))
        .collect();
    let by_gateway = model
        .gateways
        .iter()
        .map(|g| (g.gateway.clone(), addresses.clone()))
        .collect();
    decide(objects, model, &options.gateway, &by_gateway, now)
}

/// A running Kubernetes source.
pub struct KubeSource {
    store: Arc<Store>,
    options: Options,
    publisher: Publisher,
    election: LeaderElection,
    writer: StatusWriter,
    /// What goes into status: the flags', until the `octavia` driver knows its floating IP.
    status: Receiver<StatusSettings>,
    status_sender: Arc<Sender<StatusSettings>>,
    shutdown: ShutdownHandle,
}

impl KubeSource {
    /// Connects, starts the watches and the election, and returns once every kind has been
    /// listed (or found off) and the first snapshot is published, so the rules service never
    /// serves a half-read cluster.
    pub async fn start(
        settings: KubeSettings,
        options: Options,
        publisher: Publisher,
        shutdown: ShutdownHandle,
    ) -> Result<Self, KubeSourceError> {
        let client = kube::Client::try_default().await?;
        let store = Arc::new(Store::default());
        let kinds = kinds();
        for kind in kinds.clone() {
            tokio::spawn(watch_kind(client.clone(), kind, store.clone()));
        }
        wait_listed(&store, &kinds, None).await?;
        let snapshot = Arc::new(snapshot_of(&store, &options));
        snapshot.log();
        publisher.publish(snapshot);
        let election = LeaderElection::start(
            client.clone(),
            LeaseLock::new(
                settings.lease_namespace.clone(),
                settings.lease_name.clone(),
                settings.identity.clone(),
            ),
            LeaseTiming::default(),
        );
        let writer = StatusWriter::new(client, "kuryr-l7", &settings.identity);
        let (status_sender, status) = channel(settings.status);
        Ok(KubeSource {
            store,
            options,
            publisher,
            election,
            writer,
            status,
            status_sender: Arc::new(status_sender),
            shutdown,
        })
    }

    /// Whether this controller leads (changes when leadership is gained or lost): the writers
    /// of shared state (status, the `octavia` driver) act only while it is true.
    pub fn leadership(&self) -> tokio::sync::watch::Receiver<bool> {
        self.election.changes()
    }

    /// Changes what goes into status from now on (the `octavia` driver's floating IP, once the
    /// Router LB is ready); the leader then rewrites status.
    pub fn status_settings(&self) -> Arc<Sender<StatusSettings>> {
        self.status_sender.clone()
    }

    /// Rebuilds and publishes on every change; the leader writes status and Events, and
    /// writes again after a pause ([`WRITE_RETRY`], doubling) while a write fails, without
    /// waiting for a change. Steps down (releasing the Lease) on shutdown.
    pub async fn run(mut self) {
        let mut leading = self.election.changes();
        // The pause before writing again, while the last pass left a write undone.
        let mut retry: Option<Duration> = None;
        while !self.shutdown.is_triggered() {
            let leader = self.election.is_leader();
            let snapshot = Arc::new(snapshot_of(&self.store, &self.options));
            if self.publisher.publish(snapshot.clone()) {
                snapshot.log();
            }
            if leader {
                let objects = self.store.objects();
                let now = jiff::Timestamp::now().to_string();
                let settings = self.status.borrow_and_update().clone();
                let mut decisions =
                    status::decide(&objects, &snapshot.translation, &settings, &now);
                decisions.statuses.extend(gateway_statuses(
                    &objects,
                    &snapshot.translation.gateway,
                    &self.options,
                    &settings,
                    &now,
                ));
                retry = if self.writer.write(decisions, &self.store).await {
                    None
                } else {
                    Some(retry.map_or(WRITE_RETRY, |pause| (pause * 2).min(WRITE_RETRY_MAX)))
                };
            } else {
                retry = None;
            }
            tokio::select! {
                () = self.store.changed.notified() => {
                    tokio::time::sleep(SETTLE).await;
                }
                changed = leading.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now_leading = *leading.borrow_and_update();
                    tracing::info!("{} the leader", if now_leading { "became" } else { "no longer" });
                }
                // The sender is kept in `self`: this never ends.
                _ = self.status.changed() => {}
                () = tokio::time::sleep(retry.unwrap_or_default()), if retry.is_some() => {}
                _ = self.shutdown.triggered() => {}
            }
        }
        self.election.step_down().await;
    }
}

#[cfg(test)]
mod tests;
