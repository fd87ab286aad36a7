//! `nimbess-agent serve --kube` against the test API server: the agent's
//! reflectors follow Services and EndpointSlices and the kernel's Service
//! maps follow them (created, an endpoint turned not-ready, deleted). The
//! test API server serves no NetworkPolicies: the agent takes that as none.
//! The agent runs in a namespace playing the host, joined to the test's
//! namespace by a veth the API server listens on. Needs root.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use support::{AgentProcess, Netns, unique};

const API: Ipv4Addr = Ipv4Addr::new(198, 18, 77, 1);

fn sh(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .status()
        .expect("run");
    assert!(ok.success(), "{args:?}");
}

/// Backends the kernel holds for default/web port 80 (`None`: no map).
fn backends(host: &str) -> Option<usize> {
    let out = Command::new("ip")
        .args(["netns", "exec", host, "nft", "-j", "list", "map", "ip"])
        .args(["nimbess-svc", "be.default.web.tcp.80"])
        .output()
        .expect("nft");
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    Some(
        v["nftables"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| i["map"]["elem"].as_array())
            .map(Vec::len)
            .sum(),
    )
}

fn wait_for(host: &str, want: Option<usize>, agent: &AgentProcess) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while backends(host) != want {
        assert!(
            Instant::now() < deadline,
            "backends {:?}, want {want:?}\n{}",
            backends(host),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn slice(ready: [bool; 2]) -> EndpointSlice {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": ["10.232.0.2"], "conditions": {"ready": ready[0]}},
            {"addresses": ["10.232.0.3"], "conditions": {"ready": ready[1]}},
        ],
    }))
    .expect("slice")
}

#[test]
fn the_agent_follows_services_and_endpoint_slices_of_the_cluster() {
    if !support::root(
        "the_agent_follows_services_and_endpoint_slices_of_the_cluster",
        "creates network namespaces, veths and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("kh");
    let (near, far) = (unique("ka"), unique("kb"));
    sh(&[
        "ip", "link", "add", &near, "type", "veth", "peer", "name", &far, "netns", &host.name,
    ]);
    sh(&["ip", "addr", "add", &format!("{API}/30"), "dev", &near]);
    sh(&["ip", "link", "set", &near, "up"]);
    sh(&[
        "ip",
        "netns",
        "exec",
        &host.name,
        "ip",
        "addr",
        "add",
        "198.18.77.2/30",
        "dev",
        &far,
    ]);
    sh(&[
        "ip", "netns", "exec", &host.name, "ip", "link", "set", &far, "up",
    ]);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let _entered = rt.enter();
    let server = rt
        .block_on(
            nephrite_test_apiserver::TestApiServer::builder()
                .listen(SocketAddr::from((API, 0)))
                .start(),
        )
        .expect("test apiserver");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig()).expect("kubeconfig");
    let env = format!("KUBECONFIG={}", kubeconfig.display());
    let net = unique("kn");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.232.0.0/24\n");
    let prefix = [
        "ip",
        "netns",
        "exec",
        host.name.as_str(),
        "env",
        env.as_str(),
    ];
    let agent = AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--kube"]);

    let client = server.client().expect("client");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    let service: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.20", "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }))
    .expect("service");
    rt.block_on(services.create(&PostParams::default(), &service))
        .expect("create service");
    rt.block_on(slices.create(&PostParams::default(), &slice([true, true])))
        .expect("create slice");
    wait_for(&host.name, Some(2), &agent);

    let mut changed = rt.block_on(slices.get("web-1")).expect("get slice");
    changed.endpoints = slice([true, false]).endpoints;
    rt.block_on(slices.replace("web-1", &PostParams::default(), &changed))
        .expect("replace slice");
    wait_for(&host.name, Some(1), &agent);

    rt.block_on(services.delete("web", &DeleteParams::default()))
        .expect("delete service");
    wait_for(&host.name, None, &agent);
    assert!(
        agent.log().contains("does not serve this kind"),
        "NetworkPolicies taken as none: {}",
        agent.log()
    );
    drop(agent);
    let _ = Command::new("ip").args(["link", "del", &near]).status();
}
