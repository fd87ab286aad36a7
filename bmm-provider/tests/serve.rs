//! The controllers of `bmm-provider serve` against the in-memory Kubernetes API server and
//! bmm-sim.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use nephrite_bmm_provider::controller::{Role, run_cluster_controller};
use nephrite_bmm_provider::daemon;
use nephrite_bmm_sim::Kind;
use nephrite_runtime::{DaemonIdentity, GrpcServer, ShutdownReason};
use serde_json::json;
use support::capi::{Env, NS, gone};
use support::fast_config;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_controller_provisions_and_deletes_without_leaks() {
    let env = Env::start(fast_config()).await;
    let controller = tokio::spawn(run_cluster_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    env.cluster("c1", json!({"paused": false})).await;

    let ready = env.cluster_ready("c1").await;
    let status = ready.status.expect("status");
    assert_eq!(
        status.initialization.and_then(|i| i.provisioned),
        Some(true)
    );
    assert_eq!(status.failure_domains.len(), 1);
    assert!(status.vpc_id.is_some());
    assert!(
        ready
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == nephrite_bmm::CLUSTER_FINALIZER)
    );
    let created: Vec<u64> = Kind::ALL.iter().map(|k| env.h.sim.created(*k)).collect();
    assert_eq!(created, vec![1, 1, 1, 1, 0]);

    env.delete_cluster("c1").await;
    env.all_gone(Duration::from_secs(20)).await;
    env.assert_nothing_leaked();
    let again: Vec<u64> = Kind::ALL.iter().map(|k| env.h.sim.created(*k)).collect();
    assert_eq!(again, created, "nothing created twice");
    controller.abort();
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_give_a_condition_and_no_api_call() {
    let env = Env::start(fast_config()).await;
    Api::<Secret>::namespaced(env.client.clone(), NS)
        .delete("bmm-credentials", &DeleteParams::default())
        .await
        .expect("delete the Secret");
    let controller = tokio::spawn(run_cluster_controller(
        env.client.clone(),
        env.config.clone(),
    ));
    env.cluster("c2", json!({})).await;
    let c = env
        .cluster_condition("c2", "Ready", "CredentialsInvalid")
        .await;
    let ready = c
        .status
        .expect("status")
        .conditions
        .into_iter()
        .find(|k| k.type_ == "Ready")
        .expect("Ready");
    assert!(
        ready
            .message
            .as_deref()
            .is_some_and(|m| m.contains("bmm-credentials")),
        "{ready:?}"
    );
    assert!(
        env.h.operations_seen().is_empty(),
        "no API call without credentials"
    );
    controller.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_controller_waits_for_bootstrap_data_then_provisions_and_deletes() {
    let env = Env::start(fast_config()).await;
    let controllers = env.controllers();
    env.cluster("c3", json!({})).await;
    env.machine_without_bootstrap("c3", "c3-cp-0").await;

    // No bootstrap data yet: it waits and creates nothing.
    env.machine_reason("c3-cp-0", "WaitingForBootstrapData")
        .await;
    assert_eq!(env.h.sim.created(Kind::Instance), 0);
    env.bootstrap_secret("c3-cp-0").await;

    let ready = env.machine_ready("c3-cp-0").await;
    let provider_id = ready.spec.provider_id.clone().expect("providerID");
    assert!(
        provider_id.starts_with(&format!("nvidia-bmm://{}/", env.h.sim.site_id())),
        "{provider_id}"
    );
    let status = ready.status.expect("status");
    assert_eq!(
        status.failure_domain.as_deref(),
        Some(env.h.sim.site_id().as_str())
    );
    assert!(
        status
            .addresses
            .iter()
            .any(|a| a.address.starts_with("10.7.0.")),
        "{:?}",
        status.addresses
    );
    assert_eq!(env.h.sim.created(Kind::Instance), 1);

    env.delete_machine("c3-cp-0").await;
    gone(&env.machines(), "c3-cp-0").await;
    assert_eq!(
        env.h.sim.live(Kind::Instance),
        0,
        "the finalizer went only after the instance was gone"
    );
    env.delete_cluster("c3").await;
    env.all_gone(Duration::from_secs(20)).await;
    env.assert_nothing_leaked();
    assert_eq!(env.h.sim.created(Kind::Instance), 1, "never created twice");
    for c in controllers {
        c.abort();
    }
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_metrics_with_reconciles_and_api_calls() {
    let env = Env::start(fast_config()).await;
    let config = env.config.clone();
    let mut server = GrpcServer::new(DaemonIdentity::new("bmm-provider", "test"))
        .handle_signals(false)
        .metrics_listen(Some("127.0.0.1:0".parse().expect("endpoint")));
    config.metrics.register(&mut server).expect("register");
    let bound = server
        .bind(&"127.0.0.1:0".parse().expect("endpoint"))
        .await
        .expect("bind");
    let metrics_at = bound
        .metrics_endpoint()
        .and_then(|e| e.authority())
        .expect("metrics endpoint");
    let shutdown = bound.shutdown_handle();
    let serving = tokio::spawn(daemon::serve(
        bound,
        env.client.clone(),
        config,
        Role::Provider,
        None,
    ));
    env.cluster("c4", json!({})).await;
    env.machine("c4", "c4-cp-0").await;
    env.machine_ready("c4-cp-0").await;

    let text = reqwest::get(format!("http://{metrics_at}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("body");
    for expected in [
        r#"bmm_provider_reconciles_total{controller="cluster",result="ok"}"#,
        r#"bmm_provider_reconciles_total{controller="machine",result="ok"}"#,
        r#"bmm_provider_reconcile_seconds_count{controller="machine"}"#,
        r#"bmm_provider_api_calls_total{operation="POST instance",result="201"}"#,
        r#"bmm_provider_api_calls_total{operation="POST vpc",result="201"}"#,
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
    shutdown.trigger();
    let report = tokio::time::timeout(Duration::from_secs(15), serving)
        .await
        .expect("serve returns after shutdown")
        .expect("join")
        .expect("clean drain");
    assert_eq!(report.reason, ShutdownReason::Requested);
}
