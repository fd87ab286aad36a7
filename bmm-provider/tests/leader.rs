//! Leader election for `bmm-provider serve`: two providers share a Lease, only the leader
//! calls the BMM API, and the standby takes over when the leader dies.

mod support;

use std::time::Duration;

use nephrite_bmm_provider::controller::{ControllerConfig, Role, run_while_leading};
use nephrite_runtime::leader::{LeaderElection, LeaseLock, LeaseTiming};
use serde_json::json;
use support::capi::{Env, NS};
use support::{eventually, fast_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_standby_takes_over_when_it_dies() {
    let env = Env::start(fast_config()).await;
    // Each provider reaches the simulator through its own proxy, so we see who calls.
    let (front_a, front_b) = (env.h.front().await, env.h.front().await);
    let token = support::token();
    env.put_secret("creds-a", &front_a.url, token.expose())
        .await;
    env.put_secret("creds-b", &front_b.url, token.expose())
        .await;
    let config_for = |secret: &str| ControllerConfig {
        default_credentials: Some(secret.into()),
        ..env.config.clone()
    };
    let timing = LeaseTiming {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
    };
    let election_a = LeaderElection::start(
        env.client.clone(),
        LeaseLock::new(NS, "bmm-provider", "provider-a"),
        timing,
    );
    eventually(Duration::from_secs(10), || async {
        election_a.is_leader().then_some(())
    })
    .await;
    let election_b = LeaderElection::start(
        env.client.clone(),
        LeaseLock::new(NS, "bmm-provider", "provider-b"),
        timing,
    );
    let provider_a = tokio::spawn(run_while_leading(
        env.client.clone(),
        config_for("creds-a"),
        Role::Provider,
        election_a.changes(),
    ));
    let provider_b = tokio::spawn(run_while_leading(
        env.client.clone(),
        config_for("creds-b"),
        Role::Provider,
        election_b.changes(),
    ));
    let no_auth = |c: &mut nephrite_bmm::crd::NvidiaBMMCluster| c.spec.authentication = None;

    env.cluster_with("l1", json!({}), no_auth).await;
    env.cluster_ready("l1").await;
    assert!(!election_b.is_leader());
    assert!(!front_a.operations_seen().is_empty(), "the leader acts");
    assert!(
        front_b.operations_seen().is_empty(),
        "the standby does not act: {:?}",
        front_b.operations_seen()
    );

    // The leader dies without releasing the Lease.
    provider_a.abort();
    drop(election_a);
    eventually(Duration::from_secs(15), || async {
        election_b.is_leader().then_some(())
    })
    .await;
    // Requests A had in flight when it died have arrived by now.
    let calls_of_a = front_a.operations_seen().len();
    env.cluster_with("l2", json!({}), no_auth).await;
    env.cluster_ready("l2").await;
    assert!(!front_b.operations_seen().is_empty(), "the new leader acts");
    env.delete_cluster("l1").await;
    env.delete_cluster("l2").await;
    env.all_gone(Duration::from_secs(20)).await;
    env.assert_nothing_leaked();
    assert_eq!(
        front_a.operations_seen().len(),
        calls_of_a,
        "the dead leader made no further calls"
    );
    provider_b.abort();
    election_b.step_down().await;
    front_a.assert_contract_held();
    front_b.assert_contract_held();
}
