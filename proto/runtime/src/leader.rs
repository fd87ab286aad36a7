//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Replicas of a Kubernetes-mode daemon all run; the one holding the Lease
//! writes. [`LeaderElection::start`] runs the acquire/renew loop in the
//! background and publishes whether this replica leads.
//!
//! The rules are client-go's: a Lease held by someone else is taken over only
//! once it has not changed for its `leaseDurationSeconds`, measured on this
//! replica's own monotonic clock from the moment it *saw* the change (so
//! clock skew between replicas does not matter); every write is an update at
//! the observed `resourceVersion`, so two candidates never both win; a leader
//! that cannot renew within [`LeaseTiming::renew_deadline`] stops leading
//! before anyone else may take over; [`LeaderElection::step_down`] releases
//! the Lease so a standby takes over at its next retry instead of waiting for
//! the lease to expire.
//!
//! ```no_run
//! # async fn run(client: kube::Client) {
//! use nephrite_runtime::leader::{LeaderElection, LeaseLock, LeaseTiming};
//!
//! let election = LeaderElection::start(
//!     client,
//!     LeaseLock::new("kube-system", "my-controller", "pod-a"),
//!     LeaseTiming::default(),
//! );
//! let mut changes = election.changes();
//! while changes.changed().await.is_ok() {
//!     println!("leading: {}", *changes.borrow());
//! }
//! election.step_down().await;
//! # }
//! ```

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Which Lease to hold, and under which name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseLock {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease (usually the controller's name).
    pub name: String,
    /// This replica's identity, written as `spec.holderIdentity` (a pod or
    /// host name; unique among the replicas).
    pub identity: String,
}

impl LeaseLock {
    /// A lock on the Lease `namespace/name` held as `identity`.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
        }
    }
}

/// How long a Lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// How long a standby waits after the last change it saw before taking
    /// over (written as `spec.leaseDurationSeconds`, whole seconds, at least 1).
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal. Shorter
    /// than `lease_duration`, so a cut-off leader stops before a standby starts.
    pub renew_deadline: Duration,
    /// How often every replica tries to acquire or renew.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    /// 10 s lease, 7 s renew deadline, 2 s retry: a standby takes over less
    /// than 15 s after the leader dies.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(7),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A running election: the background loop and what it concluded.
///
/// Dropping it stops the loop without releasing the Lease (as a crash
/// would); call [`LeaderElection::step_down`] on an orderly shutdown.
#[derive(Debug)]
pub struct LeaderElection {
    leading: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl LeaderElection {
    /// Starts campaigning for `lock` in the background (needs a Tokio runtime).
    pub fn start(client: kube::Client, lock: LeaseLock, timing: LeaseTiming) -> Self {
        let (leading_tx, leading) = watch::channel(false);
        let (stop, stop_rx) = watch::channel(false);
        let campaign = Campaign {
            api: Api::namespaced(client, &lock.namespace),
            lock,
            timing,
            observed: None,
            last_renewal: None,
        };
        let task = tokio::spawn(campaign.run(leading_tx, stop_rx));
        Self {
            leading,
            stop,
            task: Some(task),
        }
    }

    /// Whether this replica leads right now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// A receiver that changes whenever leadership is gained or lost.
    pub fn changes(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Stops campaigning and, when leading, releases the Lease (holder
    /// cleared, duration 1 s) so a standby takes over at its next retry.
    pub async fn step_down(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The last Lease content this replica saw and when it saw it change.
#[derive(Debug)]
struct Observed {
    resource_version: Option<String>,
    seen_at: Instant,
}

struct Campaign {
    api: Api<Lease>,
    lock: LeaseLock,
    timing: LeaseTiming,
    observed: Option<Observed>,
    last_renewal: Option<Instant>,
}

impl Campaign {
    async fn run(mut self, leading: watch::Sender<bool>, mut stop: watch::Receiver<bool>) {
        loop {
            let now_leading = match self.try_acquire_or_renew().await {
                Ok(held) => {
                    if held {
                        self.last_renewal = Some(Instant::now());
                    }
                    held
                }
                Err(error) => {
                    tracing::warn!(lease = %self.lock.name, %error, "cannot read or write the Lease");
                    // Keep leading only while the last renewal is recent enough.
                    self.last_renewal
                        .is_some_and(|at| at.elapsed() < self.timing.renew_deadline)
                }
            };
            if !now_leading {
                self.last_renewal = None;
            }
            leading.send_if_modified(|current| {
                let changed = *current != now_leading;
                if changed {
                    tracing::info!(lease = %self.lock.name, identity = %self.lock.identity,
                        leading = now_leading, "leadership changed");
                }
                *current = now_leading;
                changed
            });
            tokio::select! {
                _ = tokio::time::sleep(self.timing.retry_period) => {}
                _ = stop.wait_for(|stop| *stop) => break,
            }
        }
        if *leading.borrow() {
            if let Err(error) = self.release().await {
                tracing::warn!(lease = %self.lock.name, %error, "cannot release the Lease");
            }
            leading.send_replace(false);
        }
    }

    /// One round: creates, renews or takes over the Lease; `Ok(true)` when
    /// this replica holds it afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.lock.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.lock.name.clone()),
                    namespace: Some(self.lock.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.held_spec(now.clone(), now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    Ok(true)
                }
                Err(error) if is_conflict(&error) => Ok(false),
                Err(error) => Err(error),
            };
        };
        self.observe(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        let transitions = spec.lease_transitions.unwrap_or(0);
        let new_spec = if holder == self.lock.identity {
            let acquired = spec.acquire_time.clone().unwrap_or_else(|| now.clone());
            self.held_spec(acquired, now, transitions)
        } else if holder.is_empty() || self.expired(&spec) {
            self.held_spec(now.clone(), now, transitions.saturating_add(1))
        } else {
            return Ok(false);
        };
        lease.spec = Some(new_spec);
        match self
            .api
            .replace(&self.lock.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(&written);
                Ok(true)
            }
            Err(error) if is_conflict(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Clears the holder so a standby need not wait for expiry.
    async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.lock.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.lock.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.lock.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_conflict(&error) => Ok(()),
            Err(error) => Err(error),
        }
    }

    fn held_spec(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.lock.identity.clone()),
            lease_duration_seconds: Some(whole_seconds(self.timing.lease_duration)),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Records when the Lease was last seen to change.
    fn observe(&mut self, lease: &Lease) {
        let version = lease.metadata.resource_version.clone();
        let unchanged = self
            .observed
            .as_ref()
            .is_some_and(|seen| seen.resource_version == version);
        if !unchanged {
            self.observed = Some(Observed {
                resource_version: version,
                seen_at: Instant::now(),
            });
        }
    }

    /// Whether the other holder's Lease has gone unchanged for its duration.
    fn expired(&self, spec: &LeaseSpec) -> bool {
        let duration = spec
            .lease_duration_seconds
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map_or(self.timing.lease_duration, Duration::from_secs);
        self.observed
            .as_ref()
            .is_some_and(|seen| seen.seen_at.elapsed() >= duration)
    }
}

fn whole_seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}
