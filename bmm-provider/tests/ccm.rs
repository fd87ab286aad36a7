//! `bmm-provider ccm`'s node controller against the in-memory API server and bmm-sim: a Node
//! registered with the `uninitialized` taint is initialized from its instance, powered-off
//! and rebooting instances taint their Node `shutdown`, a Node goes only when its instance
//! answers 404 — never during a storm of 5xx, a timeout or with a provider ID it cannot trust.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use nephrite_bmm::decide::cloud_node::{SHUTDOWN_TAINT, UNINITIALIZED_TAINT};
use nephrite_bmm::decide::{INSTANCE_TYPE_LABEL, REGION_LABEL, ZONE_LABEL};
use nephrite_bmm_provider::client::ClientConfig;
use nephrite_bmm_provider::client::RetryPolicy;
use nephrite_bmm_provider::controller::{ControllerConfig, NodeCredentials, run_node_controller};
use nephrite_bmm_provider::metrics::ReconcileLabels;
use nephrite_bmm_sim::{Kind, SimConfig};
use serde_json::json;
use support::capi::{Env, NS, gone};
use support::{eventually, fast_config, ready_instance};

/// Registers a Node as a kubelet with `--cloud-provider=external` does: the `uninitialized`
/// taint, its host name, and a provider ID only when given.
async fn register(client: &kube::Client, name: &str, provider_id: Option<&str>, tainted: bool) {
    let taints = if tainted {
        json!([{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
    let mut spec = json!({"taints": taints});
    if let Some(id) = provider_id {
        spec["providerID"] = json!(id);
    }
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec,
        "status": {"addresses": [{"type": "Hostname", "address": name}]},
    }))
    .expect("node");
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("create Node");
}

fn taint_keys(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .map(|t| t.key.clone())
        .collect()
}

/// The node controller with the simulator's client given directly (as `--endpoint`, `--org`,
/// `--token-file` give it) and short waits.
fn ccm_config(env: &Env) -> ControllerConfig {
    ControllerConfig {
        node_credentials: Some(NodeCredentials::fixed(env.h.client())),
        zones: [("sim-site".to_string(), "sim-zone-a".to_string())].into(),
        resync: Duration::from_millis(200),
        dependency_poll: Duration::from_millis(200),
        error_backoff: Duration::from_millis(50),
        error_backoff_max: Duration::from_millis(400),
        ..env.config.clone()
    }
}

fn node_reconciles(config: &ControllerConfig) -> u64 {
    config
        .metrics
        .reconciles
        .get_or_create(&ReconcileLabels {
            controller: "node".into(),
            result: "ok".into(),
        })
        .get()
}

async fn events_for(client: &kube::Client, node: &str) -> Vec<(String, String)> {
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tainted_node_is_initialized_tainted_while_down_and_deleted_with_its_instance() {
    let env = Env::start(SimConfig {
        reboot_delay: Duration::from_millis(400),
        ..fast_config()
    })
    .await;
    let client = env.h.client();
    let instance = ready_instance(&client, "w-0", "10.40.0.0").await;
    let address = instance.interfaces[0].ip_addresses[0].clone();
    let site = env.h.sim.site_id();
    let nodes: Api<Node> = Api::all(env.client.clone());
    // The kubelet set no provider ID: the instance is found by the Node's name.
    register(&env.client, "w-0", None, true).await;
    let config = ccm_config(&env);
    let ccm = tokio::spawn(run_node_controller(env.client.clone(), config.clone()));

    let initialized = eventually(Duration::from_secs(10), || async {
        nodes
            .get("w-0")
            .await
            .ok()
            .filter(|n| !taint_keys(n).contains(&UNINITIALIZED_TAINT.to_string()))
    })
    .await;
    // One reconcile did it: at most the two echoes of its own writes ran besides.
    assert!(
        node_reconciles(&config) <= 3,
        "{}",
        node_reconciles(&config)
    );
    let spec = initialized.spec.clone().expect("spec");
    assert_eq!(
        spec.provider_id,
        Some(format!("nvidia-bmm://{site}/{}", instance.id))
    );
    let labels = initialized.metadata.labels.clone().expect("labels");
    assert_eq!(labels[REGION_LABEL], "sim-site");
    assert_eq!(labels[ZONE_LABEL], "sim-zone-a");
    assert_eq!(labels[INSTANCE_TYPE_LABEL], "sim.baremetal");
    let addresses: Vec<(String, String)> = initialized
        .status
        .and_then(|s| s.addresses)
        .expect("addresses")
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addresses,
        vec![
            ("InternalIP".to_string(), address),
            ("Hostname".to_string(), "w-0".to_string())
        ]
    );

    // Powered off: tainted shutdown; on again (the host boots, Rebooting, then Ready): not.
    let shutdown = SHUTDOWN_TAINT.to_string();
    assert!(env.h.sim.power_instance(&instance.id, "off"));
    eventually(Duration::from_secs(10), || async {
        nodes
            .get("w-0")
            .await
            .ok()
            .filter(|n| taint_keys(n) == vec![shutdown.clone()])
    })
    .await;
    assert!(env.h.sim.power_instance(&instance.id, "on"));
    assert_eq!(
        env.h.sim.instance_status(&instance.id).as_deref(),
        Some("Rebooting")
    );
    eventually(Duration::from_secs(10), || async {
        nodes
            .get("w-0")
            .await
            .ok()
            .filter(|n| taint_keys(n).is_empty())
    })
    .await;
    assert_eq!(
        env.h.sim.instance_status(&instance.id).as_deref(),
        Some("Ready")
    );

    // A reboot through the API is down time too.
    client.reboot_instance(&instance.id).await.expect("reboot");
    eventually(Duration::from_secs(10), || async {
        nodes
            .get("w-0")
            .await
            .ok()
            .filter(|n| taint_keys(n) == vec![shutdown.clone()])
    })
    .await;

    // The instance goes: so does its Node.
    client.delete_instance(&instance.id).await.expect("delete");
    gone(&nodes, "w-0").await;
    ccm.abort();
    env.h.assert_contract_held();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_5xx_deletes_nothing_and_the_404_after_it_does() {
    let env = Env::start(fast_config()).await;
    let client = env.h.client();
    let keep = ready_instance(&client, "keep-0", "10.41.0.0").await;
    let lose = ready_instance(&client, "lose-0", "10.42.0.0").await;
    let site = env.h.sim.site_id();
    let nodes: Api<Node> = Api::all(env.client.clone());
    for i in [&keep, &lose] {
        let id = format!("nvidia-bmm://{site}/{}", i.id);
        register(&env.client, &i.name, Some(&id), false).await;
    }
    let config = ControllerConfig {
        retry: RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        },
        ..ccm_config(&env)
    };
    let ccm = tokio::spawn(run_node_controller(env.client.clone(), config));
    eventually(Duration::from_secs(10), || async {
        nodes.get("keep-0").await.ok().filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(REGION_LABEL))
        })
    })
    .await;

    // Every answer is a 503 and one instance goes meanwhile: no Node is deleted.
    env.h.sim.fail_next(u64::MAX, 503);
    assert!(env.h.sim.remove_instance(&lose.id));
    let faults = env.h.sim.faults_injected();
    eventually(Duration::from_secs(10), || async {
        (env.h.sim.faults_injected() >= faults + 6).then_some(())
    })
    .await;
    for name in ["keep-0", "lose-0"] {
        assert!(nodes.get_opt(name).await.expect("get").is_some(), "{name}");
    }
    // The storm ends: the instance answers 404 and its Node goes, the other stays.
    env.h.sim.fail_next(0, 503);
    gone(&nodes, "lose-0").await;
    assert!(nodes.get_opt("keep-0").await.expect("get").is_some());
    assert_eq!(env.h.sim.live(Kind::Instance), 1);
    ccm.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_it_cannot_trust_are_left_alone_with_an_event_and_few_calls() {
    let env = Env::start(fast_config()).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    register(
        &env.client,
        "malformed",
        Some("nvidia-bmm://only-a-site"),
        true,
    )
    .await;
    register(
        &env.client,
        "other-site",
        Some("nvidia-bmm://0badc0de-0000-4000-8000-000000000000/9b2f0000-0000-4000-8000-00000000dead"),
        true,
    )
    .await;
    register(&env.client, "unmatched", None, true).await;
    register(&env.client, "aws", Some("aws:///us-east-1a/i-0123"), false).await;
    let ccm = tokio::spawn(run_node_controller(env.client.clone(), ccm_config(&env)));

    for (node, reason) in [
        ("malformed", "MalformedProviderID"),
        ("other-site", "ProviderIDInOtherSite"),
        ("unmatched", "InstanceNotFound"),
    ] {
        let events = eventually(Duration::from_secs(10), || async {
            let e = events_for(&env.client, node).await;
            (!e.is_empty()).then_some(e)
        })
        .await;
        assert!(
            events.iter().any(|(r, _)| r == reason),
            "{node}: {events:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    // All still there, still tainted; the foreign site's Node was looked up once, the
    // malformed and the other provider's never.
    for name in ["malformed", "other-site", "unmatched", "aws"] {
        let node = nodes.get(name).await.expect("still there");
        if name != "aws" {
            assert!(taint_keys(&node).contains(&UNINITIALIZED_TAINT.to_string()));
        }
    }
    let by_path = env.h.sim.requests_by_path();
    let count = |route: &str| {
        by_path
            .iter()
            .find(|(r, _)| r == route)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count("GET instance/{id}"), 1, "{by_path:?}");
    assert_eq!(count("GET site/{id}"), 1, "{by_path:?}");
    ccm.abort();
}

fn node_config(env: &Env) -> ControllerConfig {
    ControllerConfig {
        default_credentials: Some(format!("{NS}/bmm-credentials")),
        resync: Duration::from_millis(200),
        ..env.config.clone()
    }
}

async fn node(client: &kube::Client, name: &str, provider_id: &str) {
    register(client, name, Some(provider_id), false).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_name_their_secret_back_off_and_delete_nothing() {
    let env = Env::start(fast_config()).await;
    env.put_credentials("not-a-token").await;
    let site = env.h.sim.site_id();
    register(
        &env.client,
        "w-9",
        Some(&format!(
            "nvidia-bmm://{site}/9b2f0000-0000-4000-8000-000000000009"
        )),
        false,
    )
    .await;
    let config = ControllerConfig {
        error_backoff: Duration::from_millis(100),
        error_backoff_max: Duration::from_secs(1),
        ..node_config(&env)
    };
    let ccm = tokio::spawn(run_node_controller(env.client.clone(), config));
    let events = eventually(Duration::from_secs(10), || async {
        let e = events_for(&env.client, "w-9").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "InstanceLookupFailed"
                && note.contains(&format!("Secret {NS}/bmm-credentials"))
                && note.contains("401")),
        "{events:?}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    assert!(nodes.get_opt("w-9").await.expect("get").is_some());
    // Backing off: a handful of lookups in 1.5 s, not one per poll.
    let lookups = env
        .h
        .sim
        .requests_by_path()
        .into_iter()
        .find(|(r, _)| r == "GET instance/{id}")
        .map_or(0, |(_, n)| n);
    assert!((1..=6).contains(&lookups), "{lookups}");
    ccm.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_file_is_used_without_a_restart() {
    let env = Env::start(fast_config()).await;
    let instance = ready_instance(&env.h.client(), "w-r", "10.44.0.0").await;
    let dir = tempfile::tempdir().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "expired-or-wrong\n").expect("write");
    // As `ccm --endpoint --org --token-file` builds it.
    let credentials = NodeCredentials::token_file(
        ClientConfig::new(&env.h.url, support::ORG, support::token()),
        &token_file,
        None,
    )
    .expect("token file");
    register(&env.client, "w-r", None, true).await;
    let config = ControllerConfig {
        node_credentials: Some(credentials),
        ..ccm_config(&env)
    };
    let ccm = tokio::spawn(run_node_controller(env.client.clone(), config));
    let events = eventually(Duration::from_secs(10), || async {
        let e = events_for(&env.client, "w-r").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|(_, note)| note.contains(&format!("token file {}", token_file.display()))),
        "{events:?}"
    );
    let nodes: Api<Node> = Api::all(env.client.clone());
    let node = nodes.get("w-r").await.expect("node");
    assert!(taint_keys(&node).contains(&UNINITIALIZED_TAINT.to_string()));

    // The token is rotated by replacing the file, as a mounted Secret is updated.
    let next = dir.path().join("token.new");
    std::fs::write(&next, format!("{}\n", support::token().expose())).expect("write");
    std::fs::rename(&next, &token_file).expect("rename");
    let node = eventually(Duration::from_secs(10), || async {
        nodes
            .get("w-r")
            .await
            .ok()
            .filter(|n| !taint_keys(n).contains(&UNINITIALIZED_TAINT.to_string()))
    })
    .await;
    let site = env.h.sim.site_id();
    assert_eq!(
        node.spec.and_then(|s| s.provider_id),
        Some(format!("nvidia-bmm://{site}/{}", instance.id))
    );
    ccm.abort();
}

/// The real `bmm-provider ccm` as the workload cluster's manifest runs it (host network: a
/// non-loopback gRPC port), with a kubeconfig and a token file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_initializes_a_node_and_refuses_an_open_port_unless_told() {
    let env = Env::start(fast_config()).await;
    ready_instance(&env.h.client(), "w-b", "10.46.0.0").await;
    register(&env.client, "w-b", None, true).await;
    let dir = tempfile::tempdir().expect("dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, env.server.kubeconfig()).expect("kubeconfig");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{}\n", support::token().expose())).expect("token");
    let ccm = |insecure: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_bmm-provider"));
        command
            .args(["ccm", "--kubeconfig"])
            .arg(&kubeconfig)
            .args([
                "--endpoint",
                &env.h.url,
                "--org",
                support::ORG,
                "--token-file",
            ])
            .arg(&token_file)
            .args(["--leader-elect=false", "--listen", "0.0.0.0:0"])
            .args(["--metrics-listen", "127.0.0.1:0", "--pending-poll", "200ms"])
            .env_remove("NEPHRITE_INSECURE")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if insecure {
            command.env("NEPHRITE_INSECURE", "true");
        }
        command
    };
    let mut open = ccm(false);
    let refused = tokio::task::spawn_blocking(move || open.output())
        .await
        .expect("join")
        .expect("run");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("--insecure"), "{stderr}");

    let mut child = ccm(true).spawn().expect("ccm starts");
    let nodes: Api<Node> = Api::all(env.client.clone());
    let initialized = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Ok(node) = nodes.get("w-b").await
                && !taint_keys(&node).contains(&UNINITIALIZED_TAINT.to_string())
            {
                return node;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let _ = child.kill();
    let output = child.wait_with_output().expect("wait");
    let node = initialized.unwrap_or_else(|_| {
        panic!(
            "not initialized: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let site = env.h.sim.site_id();
    assert!(
        node.spec
            .and_then(|s| s.provider_id)
            .is_some_and(|id| id.starts_with(&format!("nvidia-bmm://{site}/"))),
    );
}
