//! What users of other Cluster API providers reported, replayed against `bmm-provider serve`'s
//! controllers, the in-memory API server and bmm-sim: a crash between the instance create and
//! the status write, a cluster deleted seconds after creation, instances that vanished or
//! failed, a rotated token, a forced watch 410, and pause.

mod support;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use nephrite_bmm_provider::controller::run_machine_controller;
use nephrite_bmm_sim::{Kind, SimConfig, auth};
use serde_json::json;
use support::capi::{Env, capi};
use support::{ORG, SECRET, eventually, fast_config};

fn abort(handles: impl IntoIterator<Item = tokio::task::JoinHandle<()>>) {
    for h in handles {
        h.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_instance_create_and_the_status_write_adopts_after_restart() {
    let env = Env::start(fast_config()).await;
    let crash = env.h.crash_after("POST instance");
    let [clusters, machines] = env.controllers();
    env.cluster("r1", json!({})).await;
    env.machine("r1", "r1-cp-0").await;

    tokio::time::timeout(Duration::from_secs(20), crash)
        .await
        .expect("the instance create is reached")
        .expect("crash signal");
    // The process dies with the create processed but unanswered: no status was written.
    machines.abort();
    let _ = machines.await;
    assert_eq!(env.h.sim.created(Kind::Instance), 1);
    let before = env.machines().get("r1-cp-0").await.expect("machine");
    assert!(
        before
            .status
            .as_ref()
            .is_none_or(|s| s.instance_id.is_none()),
        "the crash came before the status write: {:?}",
        before.status
    );

    let restarted = tokio::spawn(run_machine_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    let ready = env.machine_ready("r1-cp-0").await;
    assert_eq!(
        env.h.sim.created(Kind::Instance),
        1,
        "the instance is adopted, never created twice"
    );
    assert_eq!(
        ready.status.and_then(|s| s.instance_id),
        env.h.sim.instance_named("r1-cp-0")
    );
    abort([clusters, restarted]);
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_deleted_seconds_after_creation_leaks_nothing() {
    let env = Env::start(SimConfig {
        network_delay: Duration::from_millis(800),
        provision_delay: Duration::from_millis(1500),
        ..fast_config()
    })
    .await;
    let controllers = env.controllers();
    env.cluster("r2", json!({})).await;
    env.machine("r2", "r2-cp-0").await;
    // Mid-flight: network objects created, some still Pending.
    eventually(Duration::from_secs(10), || async {
        (env.h.sim.created(Kind::Vpc) == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.delete_machine("r2-cp-0").await;
    env.delete_cluster("r2").await;
    env.all_gone(Duration::from_secs(30)).await;
    env.assert_nothing_leaked();
    assert!(env.h.sim.created(Kind::Instance) <= 1);
    abort(controllers);
    env.h.assert_contract_held();
}

/// Controllers with a quick resync, and cluster `name` with a Ready machine `<name>-cp-0`;
/// returns its instance id.
async fn ready_machine(name: &str) -> (Env, [tokio::task::JoinHandle<()>; 2], String) {
    let mut env = Env::start(fast_config()).await;
    env.config.resync = Duration::from_millis(200);
    let controllers = env.controllers();
    let machine = format!("{name}-cp-0");
    env.cluster(name, json!({})).await;
    env.machine(name, &machine).await;
    env.machine_ready(&machine).await;
    let id = env.h.sim.instance_named(&machine).expect("instance");
    (env, controllers, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_completes_when_the_instance_already_answers_404() {
    let (env, controllers, id) = ready_machine("r3").await;
    assert!(env.h.sim.remove_instance(&id), "removed out of band");

    let lost = env.machine_reason("r3-cp-0", "InstanceNotFound").await;
    assert!(!lost.status.expect("status").ready);
    assert_eq!(
        env.h.sim.created(Kind::Instance),
        1,
        "no replacement is created"
    );
    env.delete_machine("r3-cp-0").await;
    env.delete_cluster("r3").await;
    env.all_gone(Duration::from_secs(20)).await;
    env.assert_nothing_leaked();
    abort(controllers);
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_completes_when_the_instance_is_in_error() {
    let (env, controllers, id) = ready_machine("r4").await;
    assert!(env.h.sim.fail_instance(&id));

    let failed = env.machine_reason("r4-cp-0", "InstanceError").await;
    let status = failed.status.expect("status");
    assert!(!status.ready);
    assert_eq!(
        status.initialization.and_then(|i| i.provisioned),
        Some(true),
        "provisioned never goes back to false"
    );
    env.delete_machine("r4-cp-0").await;
    env.delete_cluster("r4").await;
    env.all_gone(Duration::from_secs(20)).await;
    env.assert_nothing_leaked();
    assert_eq!(env.h.sim.created(Kind::Instance), 1);
    abort(controllers);
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_token_rotates_objects_created_under_the_old_one_are_still_deleted() {
    let env = Env::start(fast_config()).await;
    let now = || jiff::Timestamp::now().as_second() as u64;
    let issued = now();
    let short = auth::issue(SECRET, ORG, issued, Duration::from_secs(3)).expect("token");
    env.put_credentials(&short).await;
    let controllers = env.controllers();
    env.cluster("r5", json!({})).await;
    env.machine("r5", "r5-cp-0").await;
    env.machine_ready("r5-cp-0").await;

    // The old token expires; deleting now is refused with 401 and reported.
    while now() <= issued + 3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env.delete_machine("r5-cp-0").await;
    env.delete_cluster("r5").await;
    env.machine_reason("r5-cp-0", "AuthFailed").await;
    assert_eq!(env.h.sim.live(Kind::Instance), 1, "nothing deleted yet");

    // The Secret is rotated: the same controllers finish the deletion.
    env.put_credentials(support::token().expose()).await;
    env.all_gone(Duration::from_secs(20)).await;
    env.assert_nothing_leaked();
    abort(controllers);
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_watch_410_is_survived() {
    let env = Env::start(fast_config()).await;
    let controllers = env.controllers();
    env.cluster("w1", json!({})).await;
    env.cluster_ready("w1").await;
    let lists_before = env.server.requests().count("list", "nvidiabmmclusters");

    // Every open watch ends with 410 Expired, and so does the next one.
    env.server.faults().expire_next_watch("*");
    let ended = env.server.expire_watches("*");
    assert!(ended > 0, "the controllers had watches open");

    env.cluster("w2", json!({})).await;
    env.machine("w2", "w2-cp-0").await;
    env.cluster_ready("w2").await;
    env.machine_ready("w2-cp-0").await;
    assert!(
        env.server.requests().count("list", "nvidiabmmclusters") > lists_before,
        "the watcher re-listed after the 410"
    );
    abort(controllers);
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_is_honoured_until_the_cluster_is_unpaused() {
    let env = Env::start(fast_config()).await;
    let controllers = env.controllers();
    env.cluster("p1", json!({"paused": true})).await;
    env.machine("p1", "p1-cp-0").await;
    env.cluster_condition("p1", "Paused", "Paused").await;
    eventually(Duration::from_secs(20), || async {
        env.machines().get("p1-cp-0").await.ok().filter(|m| {
            m.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Paused" && c.status == nephrite_krm::ConditionStatus::True)
            })
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        env.h.operations_seen().is_empty(),
        "nothing is called while paused: {:?}",
        env.h.operations_seen()
    );

    // Unpausing the Cluster is acted on without touching the infrastructure objects.
    capi(&env.client, "Cluster", "clusters")
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .expect("unpause");
    env.cluster_ready("p1").await;
    env.machine_ready("p1-cp-0").await;
    env.cluster_condition("p1", "Paused", "NotPaused").await;

    // The annotation pauses one object.
    env.clusters()
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}})),
        )
        .await
        .expect("annotate");
    env.cluster_condition("p1", "Paused", "Paused").await;
    abort(controllers);
    env.h.assert_contract_held();
}
