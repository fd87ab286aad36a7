//! Several `ntc serve --backend porch` replicas, one controller: the replica holding a
//! `coordination.k8s.io/v1` Lease runs the controller, the others stand by.
//!
//! The election itself is `nephrite_runtime::leader` (client-go's rules). What this module
//! adds is the controller's life around it: a standby starts no watch and writes nothing (it
//! serves health and `/metrics` like the leader, the server runs either way); on gaining the
//! Lease the controller starts, lists everything afresh and reconciles every topology, so it
//! carries on from whatever the previous leader left (every write is compared first, names are
//! deterministic); on losing it (renewal failed past the deadline) the controller is stopped
//! and the replica stands by again, campaigning. On shutdown the leader stops its controller
//! and then releases the Lease, so a standby takes over at its next retry instead of waiting
//! for the lease to expire. A leader killed outright leaves the Lease to expire: the standby
//! takes over `lease_duration` after it last saw it renewed.

use std::time::Duration;

use kube::Client;
use nephrite_runtime::ShutdownHandle;
use nephrite_runtime::leader::{LeaderElection, LeaseLock, LeaseTiming};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;

use super::{PorchConfig, run};

/// The `ntc_leading` gauge's name and help, as `/metrics` shows them.
pub const LEADING_METRIC: (&str, &str) = (
    "ntc_leading",
    "1 while this replica holds the leader-election Lease and runs the controller, 0 on standby",
);

/// Which Lease the replicas share and how long it lasts.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// The Lease (namespace, name) and this replica's identity in it.
    pub lock: LeaseLock,
    /// Lease duration, renew deadline and retry period.
    pub timing: LeaseTiming,
}

/// Lease timing from whole seconds, refusing a renew deadline that does not fit inside the
/// lease (a cut-off leader must stop before a standby may start) or a retry period that does
/// not fit inside the renew deadline (a leader must get a try at renewing before it gives up).
pub fn timing(
    lease_duration: u64,
    renew_deadline: u64,
    retry_period: u64,
) -> Result<LeaseTiming, TimingError> {
    if retry_period == 0 || renew_deadline <= retry_period || lease_duration <= renew_deadline {
        return Err(TimingError {
            lease_duration,
            renew_deadline,
            retry_period,
        });
    }
    Ok(LeaseTiming {
        lease_duration: Duration::from_secs(lease_duration),
        renew_deadline: Duration::from_secs(renew_deadline),
        retry_period: Duration::from_secs(retry_period),
    })
}

/// Lease timing that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "leader election needs 0 < retry period < renew deadline < lease duration; got lease duration {lease_duration} s, renew deadline {renew_deadline} s, retry period {retry_period} s"
)]
pub struct TimingError {
    /// `--lease-duration` in seconds.
    pub lease_duration: u64,
    /// `--lease-renew-deadline` in seconds.
    pub renew_deadline: u64,
    /// `--lease-retry-period` in seconds.
    pub retry_period: u64,
}

/// Campaigns for the Lease and runs the Porch controller while this replica leads, until
/// `shutdown`; then stops the controller and releases the Lease. `leading` (the `ntc_leading`
/// gauge) says which it is doing.
pub async fn run_elected(
    client: Client,
    config: PorchConfig,
    election: ElectionConfig,
    shutdown: ShutdownHandle,
    leading: Gauge,
) {
    let identity = election.lock.identity.clone();
    let lease = format!("{}/{}", election.lock.namespace, election.lock.name);
    tracing::info!(%lease, %identity, "standing by: campaigning for the Lease");
    let elected = LeaderElection::start(client.clone(), election.lock, election.timing);
    let mut changes = elected.changes();
    loop {
        tokio::select! {
            _ = shutdown.triggered() => break,
            gained = changes.wait_for(|leads| *leads) => {
                if gained.is_err() {
                    break;
                }
            }
        }
        tracing::info!(%lease, %identity, "leading: starting the controller");
        leading.set(1);
        let lost = lost(changes.clone());
        let stop = {
            let shutdown = shutdown.clone();
            async move {
                tokio::select! {
                    _ = shutdown.triggered() => {}
                    () = lost => {}
                }
            }
        };
        run(client.clone(), config.clone(), stop).await;
        leading.set(0);
        if shutdown.is_triggered() {
            break;
        }
        tracing::warn!(%lease, %identity, "lost the Lease: controller stopped, standing by");
    }
    // The controller has stopped (its in-flight reconciles finished): only now may a standby
    // take over.
    elected.step_down().await;
    tracing::info!(%lease, %identity, "left the election");
}

/// Resolves once `changes` says this replica no longer leads (or the election ended).
async fn lost(mut changes: watch::Receiver<bool>) {
    let _ = changes.wait_for(|leads| !*leads).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_must_nest_retry_inside_deadline_inside_lease() {
        let ok = timing(15, 10, 2).expect("valid timing");
        assert_eq!(ok.lease_duration, Duration::from_secs(15));
        assert_eq!(ok.renew_deadline, Duration::from_secs(10));
        assert_eq!(ok.retry_period, Duration::from_secs(2));
        for (lease, deadline, retry) in [(10, 10, 2), (10, 12, 2), (10, 7, 7), (10, 7, 0)] {
            let error = timing(lease, deadline, retry).expect_err("refused");
            assert_eq!(
                error.to_string(),
                format!(
                    "leader election needs 0 < retry period < renew deadline < lease duration; got lease duration {lease} s, renew deadline {deadline} s, retry period {retry} s"
                )
            );
        }
    }
}
