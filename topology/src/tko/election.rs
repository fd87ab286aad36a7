//! Several `ntc serve --backend tko` replicas, one writer: the replica holding a named lease
//! of the preparer's Data API (`AcquireLease`, expiry on the preparer's store clock) registers
//! the plugin with its own endpoint and runs the tracker; the others stand by.
//!
//! A standby serves health and `/metrics` (`ntc_leading` 0) and writes nothing: it registers
//! nothing, runs no tracker, and its `Prepare` answers "not prepared" (the preparer retries,
//! and calls the leader once it has registered). It campaigns every retry period and at once
//! when the lease is released (it watches the Data API's lease changes). On gaining the lease
//! the replica registers the plugin (registration replaces the endpoint, so the preparer calls
//! the new leader), then starts the tracker, which lists and reconciles everything afresh: it
//! carries on from whatever the previous leader left (child creation is idempotent through
//! the instance key). The leader renews every retry period; a renewal refused as lost (another
//! holder took it) or none that succeeded within the renew deadline stops the tracker (its
//! reconcile under way finished) and the replica stands by again. On shutdown the leader stops
//! its tracker, then releases the lease, so a standby takes over at once; a leader killed
//! outright leaves the lease to expire on the store's clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use nephrite_preparer_client::{DataApi, EntityKind, ErrorKind, Lease, LeaseFence, PluginQuery};
use nephrite_runtime::ShutdownHandle;
use nephrite_runtime::leader::LeaseTiming;
use prometheus_client::metrics::gauge::Gauge;
use tokio::time::Instant;

use super::data::{self, Data, DataEndpoint};
use super::tracker::{self, Following};
use super::{TkoError, register};

/// The named lease the replicas share and how long it lasts.
#[derive(Debug, Clone)]
pub struct TkoElection {
    /// The lease's name in the preparer (`--lease-name`).
    pub lease_name: String,
    /// This replica's identity, the lease's holder while it leads (`--identity`).
    pub identity: String,
    /// Lease duration, renew deadline and retry period.
    pub timing: LeaseTiming,
}

/// Whether this replica leads: the plugin's `Prepare` writes only while it does.
#[derive(Debug, Clone, Default)]
pub struct Leading(Arc<AtomicBool>);

impl Leading {
    /// A replica that leads from the start (no election: the one replica).
    pub fn always() -> Self {
        Leading(Arc::new(AtomicBool::new(true)))
    }

    /// Whether it leads now.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self, leads: bool) {
        self.0.store(leads, Ordering::SeqCst);
    }
}

/// What an elected replica runs while it leads.
#[derive(Clone)]
pub struct Term {
    /// The Data API.
    pub endpoint: DataEndpoint,
    /// The plugin registration (name, endpoint, triggers).
    pub plugin: nephrite_preparer_client::Plugin,
    /// The rollout policy of the tracker.
    pub policy: nephrite_topology::RolloutPolicy,
    /// What the tracker shares with the plugin.
    pub following: Following,
}

/// Campaigns for the lease and leads while it holds it, until `shutdown`; then stops the
/// tracker and releases the lease. `leading` and `gauge` say which it is doing.
pub async fn run_elected(
    term: Term,
    election: TkoElection,
    shutdown: ShutdownHandle,
    leading: Leading,
    gauge: Gauge,
) {
    let (name, identity) = (election.lease_name.clone(), election.identity.clone());
    loop {
        tracing::info!(lease = %name, %identity, "standing by: campaigning for the lease");
        let Some((data, lease)) = campaign(&term.endpoint, &election, &shutdown).await else {
            break;
        };
        tracing::info!(lease = %name, %identity, transitions = lease.transitions, "leading: registering the plugin and starting the tracker");
        // Every batch of child writes from now on carries this holding: once another replica
        // takes the lease, a write of this one (paused, not yet aware) is refused whole.
        term.following.followed.set_fence(Some(LeaseFence {
            name: name.clone(),
            transitions: lease.transitions,
        }));
        leading.set(true);
        gauge.set(1);
        let stop = ShutdownHandle::new();
        let tracker = tokio::spawn(lead(term.clone(), data.clone(), stop.clone()));
        let token = keep(&data, &election, &lease, &shutdown).await;
        // Lost or shutting down: no new write starts; the reconcile under way finishes.
        leading.set(false);
        stop.trigger();
        let _ = tracker.await;
        gauge.set(0);
        if shutdown.is_triggered() {
            if let Some(token) = token {
                match data.release_lease(&name, &token).await {
                    Ok(()) => tracing::info!(lease = %name, %identity, "released the lease"),
                    Err(error) => tracing::warn!(lease = %name, %error, "releasing the lease"),
                }
            }
            break;
        }
        tracing::warn!(lease = %name, %identity, "lost the lease: tracker stopped, standing by");
    }
    tracing::info!(lease = %name, %identity, "left the election");
}

/// The leader's work: the plugin registered with this replica's endpoint (retried until it
/// is, or `stop`), then the tracker until `stop`.
async fn lead(term: Term, data: Data, stop: ShutdownHandle) {
    loop {
        match register(&data, term.plugin.clone()).await {
            Ok(()) => break,
            Err(error) => {
                tracing::warn!(%error, "registering the plugin; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = stop.triggered() => return,
                }
            }
        }
    }
    tracker::run(term.endpoint, term.policy, term.following, stop).await;
}

/// Tries for the lease every retry period, and at once when a lease change is seen, until it
/// is granted (the client and the lease) or `shutdown`.
async fn campaign(
    endpoint: &DataEndpoint,
    election: &TkoElection,
    shutdown: &ShutdownHandle,
) -> Option<(Data, Lease)> {
    let retry = election.timing.retry_period;
    loop {
        let waiting = shutdown.clone();
        let data = data::connect_waiting(endpoint, async move {
            waiting.triggered().await;
        })
        .await;
        let data = match data {
            Ok(data) => data,
            Err(error) => {
                tracing::warn!(%error, "campaigning: the Data API");
                if shutdown.is_triggered() {
                    return None;
                }
                continue;
            }
        };
        // Lease changes from now: a release wakes this standby before its next retry.
        let mut changes = match data.list_plugins(PluginQuery::default()).await {
            Ok(listing) => data
                .watch(listing.revision, &[EntityKind::Lease])
                .await
                .ok(),
            Err(_) => None,
        };
        loop {
            if shutdown.is_triggered() {
                return None;
            }
            let attempt = data
                .acquire_lease(
                    &election.lease_name,
                    &election.identity,
                    Some(election.timing.lease_duration),
                )
                .await;
            match attempt {
                Ok(lease) => return Some((data, lease)),
                Err(error) if error.is_busy() => {
                    tracing::debug!(%error, "standing by");
                }
                Err(error) => {
                    tracing::warn!(%error, "campaigning for the lease");
                    if error.kind() == ErrorKind::Unavailable {
                        break;
                    }
                }
            }
            let woken = async {
                match changes.as_mut() {
                    Some(stream) => match stream.next().await {
                        Some(Ok(change)) if change.id == election.lease_name => {}
                        Some(Ok(_)) => std::future::pending().await,
                        // The watch ended: retry on the period alone.
                        _ => std::future::pending().await,
                    },
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(retry) => {}
                () = woken => {}
                _ = shutdown.triggered() => return None,
            }
        }
    }
}

/// Renews `lease` every retry period until it is lost (refused as not held, or no renewal
/// succeeded within the renew deadline) or `shutdown`. The token, when it may still hold the
/// lease (to release it on shutdown).
async fn keep(
    data: &Data,
    election: &TkoElection,
    lease: &Lease,
    shutdown: &ShutdownHandle,
) -> Option<String> {
    let timing = &election.timing;
    let mut renewed = Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep(timing.retry_period) => {}
            _ = shutdown.triggered() => return Some(lease.token.clone()),
        }
        match data
            .renew_lease(
                &election.lease_name,
                &lease.token,
                Some(timing.lease_duration),
            )
            .await
        {
            Ok(_) => renewed = Instant::now(),
            Err(error) if error.kind() == ErrorKind::FailedPrecondition => {
                tracing::warn!(%error, "the lease was taken");
                return None;
            }
            Err(error) => {
                tracing::warn!(%error, "renewing the lease");
                if renewed.elapsed() >= timing.renew_deadline {
                    tracing::warn!(lease = %election.lease_name, "no renewal within the renew deadline");
                    return Some(lease.token.clone());
                }
            }
        }
    }
}

/// The lease timing from milliseconds, refusing a renew deadline that does not fit inside
/// the lease or a retry period that does not fit inside the renew deadline.
pub fn timing(
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
) -> Result<LeaseTiming, TkoError> {
    if retry_period.is_zero() || renew_deadline <= retry_period || lease_duration <= renew_deadline
    {
        return Err(TkoError::Election(format!(
            "leader election needs 0 < retry period < renew deadline < lease duration; got \
             lease duration {lease_duration:?}, renew deadline {renew_deadline:?}, retry \
             period {retry_period:?}"
        )));
    }
    Ok(LeaseTiming {
        lease_duration,
        renew_deadline,
        retry_period,
    })
}
