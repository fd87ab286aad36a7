//! Leader election against the in-memory Kubernetes API server: one leader at
//! a time, takeover after the leader dies, fast handover on step-down.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use nephrite_runtime::leader::{LeaderElection, LeaseLock, LeaseTiming};
use nephrite_test_apiserver::TestApiServer;
use tokio::sync::watch;
use tokio::time::{Instant, timeout};

/// Short timings so the test takes seconds: a standby takes over after 1 s of silence.
const TIMING: LeaseTiming = LeaseTiming {
    lease_duration: Duration::from_secs(1),
    renew_deadline: Duration::from_millis(700),
    retry_period: Duration::from_millis(100),
};

fn lock(identity: &str) -> LeaseLock {
    LeaseLock::new("default", "controller", identity)
}

async fn wait_for(changes: &mut watch::Receiver<bool>, leading: bool) -> Duration {
    let started = Instant::now();
    timeout(
        Duration::from_secs(20),
        changes.wait_for(|now| *now == leading),
    )
    .await
    .unwrap_or_else(|_| panic!("leadership never became {leading}"))
    .expect("election loop ended");
    started.elapsed()
}

async fn holder(api: &Api<Lease>) -> Option<String> {
    api.get("controller")
        .await
        .expect("lease readable")
        .spec
        .and_then(|spec| spec.holder_identity)
}

#[tokio::test]
async fn one_leader_takeover_after_death_and_handover_on_step_down() {
    let server = TestApiServer::start().await.expect("api server");
    let client = server.client().expect("client");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");

    let a = LeaderElection::start(client.clone(), lock("a"), TIMING);
    wait_for(&mut a.changes(), true).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("a"));

    // While `a` renews, `b` never leads, for several lease durations.
    let b = LeaderElection::start(client.clone(), lock("b"), TIMING);
    let watch_until = Instant::now() + TIMING.lease_duration * 3;
    while Instant::now() < watch_until {
        assert!(a.is_leader(), "the renewing leader lost the lease");
        assert!(!b.is_leader(), "two leaders at once");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // `a` dies without releasing: `b` takes over once the lease has expired.
    drop(a);
    let took = wait_for(&mut b.changes(), true).await;
    assert!(
        took >= TIMING.lease_duration - TIMING.retry_period,
        "took over after {took:?}, before the dead leader's lease expired"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("b"));
    let transitions = leases
        .get("controller")
        .await
        .expect("lease")
        .spec
        .and_then(|spec| spec.lease_transitions);
    assert_eq!(transitions, Some(1));

    // `c` waits; `b` steps down and releases, so `c` need not wait for expiry.
    let c = LeaderElection::start(client.clone(), lock("c"), TIMING);
    tokio::time::sleep(TIMING.retry_period * 3).await;
    assert!(!c.is_leader(), "two leaders at once");
    let mut c_changes = c.changes();
    b.step_down().await;
    // Released: without the release `b` would hold the lease until it expires, a second
    // from now. `c`, retrying every 100 ms, may already have taken it by the time we look.
    let after = holder(&leases).await;
    assert!(
        after.is_none() || after.as_deref() == Some("c"),
        "step_down released the lease, but it is held by {after:?}"
    );
    wait_for(&mut c_changes, true).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("c"));
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_leading() {
    let server = TestApiServer::start().await.expect("api server");
    let client = server.client().expect("client");
    let a = LeaderElection::start(client, lock("a"), TIMING);
    let mut changes = a.changes();
    wait_for(&mut changes, true).await;

    server.shutdown().await.expect("api server stops");
    wait_for(&mut changes, false).await;
}
