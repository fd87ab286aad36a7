//! The node-lifecycle controller against the in-memory API server and bmm-sim: Nodes with a
//! `nvidia-bmm://` provider ID get the site's topology labels, the instance type and the
//! instance's addresses; a Node is deleted only when its instance answers 404, never when the
//! API fails or times out.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use nephrite_bmm::decide::{INSTANCE_TYPE_LABEL, REGION_LABEL, ZONE_LABEL};
use nephrite_bmm_provider::client::RetryPolicy;
use nephrite_bmm_provider::controller::{ControllerConfig, run_node_controller};
use serde_json::json;
use support::capi::{Env, NS, gone};
use support::{eventually, fast_config};

async fn node(client: &kube::Client, name: &str, provider_id: &str) {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "spec": {"providerID": provider_id}
    }))
    .expect("node");
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("create Node");
}

fn node_config(env: &Env) -> ControllerConfig {
    ControllerConfig {
        default_credentials: Some(format!("{NS}/bmm-credentials")),
        resync: Duration::from_millis(200),
        ..env.config.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_topology_labels_and_addresses_and_go_when_their_instance_is_404() {
    let env = Env::start(fast_config()).await;
    let controllers = env.controllers();
    env.cluster("n1", json!({})).await;
    env.machine("n1", "n1-cp-0").await;
    let machine = env.machine_ready("n1-cp-0").await;
    let provider_id = machine.spec.provider_id.expect("providerID");
    let site = env.h.sim.site_id();

    let nodes: Api<Node> = Api::all(env.client.clone());
    node(&env.client, "n1-cp-0", &provider_id).await;
    node(
        &env.client,
        "orphan",
        &format!("nvidia-bmm://{site}/9b2f0000-0000-4000-8000-00000000dead"),
    )
    .await;
    node(&env.client, "elsewhere", "aws:///us-east-1a/i-0123").await;
    let lifecycle = tokio::spawn(run_node_controller(env.client.clone(), node_config(&env)));

    let labelled = eventually(Duration::from_secs(20), || async {
        nodes.get("n1-cp-0").await.ok().filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(REGION_LABEL))
                && n.status
                    .as_ref()
                    .and_then(|s| s.addresses.as_ref())
                    .is_some_and(|a| !a.is_empty())
        })
    })
    .await;
    let labels = labelled.metadata.labels.expect("labels");
    assert_eq!(labels[REGION_LABEL], site);
    assert_eq!(labels[ZONE_LABEL], site);
    assert_eq!(labels[INSTANCE_TYPE_LABEL], "sim.baremetal");
    let addresses = labelled
        .status
        .and_then(|s| s.addresses)
        .expect("addresses");
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address.starts_with("10.7.0.")),
        "{addresses:?}"
    );
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "Hostname" && a.address == "n1-cp-0")
    );

    // The instance that answers 404 loses its Node; a Node of another provider is left alone.
    gone(&nodes, "orphan").await;
    let elsewhere = nodes.get("elsewhere").await.expect("other provider's Node");
    assert!(
        !elsewhere
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(REGION_LABEL)
    );

    // The instance goes out of band: its Node follows.
    let id = env.h.sim.instance_named("n1-cp-0").expect("instance");
    env.h.sim.remove_instance(&id);
    gone(&nodes, "n1-cp-0").await;
    lifecycle.abort();
    for c in controllers {
        c.abort();
    }
    env.h.assert_contract_held();
}

/// An API that answers 503 or does not answer in time, counting the requests.
async fn failing_api() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            if n % 2 == 1 {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            (
                http::StatusCode::SERVICE_UNAVAILABLE,
                [(http::header::CONTENT_TYPE, "application/json")],
                r#"{"source":"sim","message":"unavailable","data":null}"#,
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_never_deleted_when_the_api_fails_or_times_out() {
    let env = Env::start(fast_config()).await;
    let (url, hits) = failing_api().await;
    env.put_secret("bmm-credentials", &url, support::token().expose())
        .await;
    node(
        &env.client,
        "flaky",
        "nvidia-bmm://5a7e0000-0000-4000-8000-000000000001/9b2f0000-0000-4000-8000-000000000001",
    )
    .await;
    let config = ControllerConfig {
        request_timeout: Duration::from_millis(300),
        retry: RetryPolicy {
            max_attempts: 2,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(20),
        },
        ..node_config(&env)
    };
    let lifecycle = tokio::spawn(run_node_controller(env.client.clone(), config));
    // Several lookups, each failed (503 or timeout) ...
    eventually(Duration::from_secs(20), || async {
        (hits.load(Ordering::SeqCst) >= 6).then_some(())
    })
    .await;
    // ... and the Node is still there.
    let nodes: Api<Node> = Api::all(env.client.clone());
    assert!(nodes.get_opt("flaky").await.expect("get").is_some());
    lifecycle.abort();
}
