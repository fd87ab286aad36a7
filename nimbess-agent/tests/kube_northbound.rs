//! `nimbess-agent serve --kube` against the test API server: the agent's
//! reflectors follow Services and EndpointSlices and the kernel's Service
//! maps follow them (created, an endpoint turned not-ready, deleted);
//! NetworkPolicies and Pods become the policy table's chains (created,
//! deleted); a policy admitting only an IPv6 ipBlock isolates its pod; a
//! policy with a named port and an endPort (which kube-apiserver itself
//! refuses, the test server not) and a Service whose targetPort name no
//! endpoint has are skipped, each with a Warning Event on it, while the
//! rest stays applied. The EndpointSlices are written as
//! kube-controller-manager writes them: each port named after the Service
//! port (not after its targetPort), with the number the targetPort resolved
//! to on the pods, and no port where it did not resolve. The agent runs in a namespace playing the host,
//! joined to the test's namespace by a veth the API server listens on.
//! Needs root.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use support::{AgentProcess, Netns, policy_chains, unique};

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

fn wait_for_chains(host: &str, want: &[&str], agent: &AgentProcess) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while policy_chains(host) != want {
        assert!(
            Instant::now() < deadline,
            "policy chains {:?}, want {want:?}\n{}",
            policy_chains(host),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait for a Warning Event with `reason` on `kind` `name`; its note.
fn wait_for_event(
    rt: &tokio::runtime::Runtime,
    events: &Api<Event>,
    kind: &str,
    name: &str,
    reason: &str,
    agent: &AgentProcess,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = rt
            .block_on(events.list(&ListParams::default()))
            .expect("list events");
        let found = list.items.into_iter().find(|e| {
            let about = e.regarding.as_ref();
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
                && about.and_then(|r| r.kind.as_deref()) == Some(kind)
                && about.and_then(|r| r.name.as_deref()) == Some(name)
        });
        if let Some(event) = found {
            return event.note.unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "no Warning Event {reason} on {kind} {name}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn policy(name: &str, cidr: Option<&str>) -> NetworkPolicy {
    let from = match cidr {
        Some(cidr) => serde_json::json!([{"ipBlock": {"cidr": cidr}}]),
        None => serde_json::json!([{"podSelector": {"matchLabels": {"role": "client"}}}]),
    };
    policy_with_ports(
        name,
        from,
        serde_json::json!([{"protocol": "TCP", "port": 8080}]),
    )
}

fn policy_with_ports(
    name: &str,
    from: serde_json::Value,
    ports: serde_json::Value,
) -> NetworkPolicy {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "podSelector": {"matchLabels": {"role": "server"}},
            "ingress": [{"from": from, "ports": ports}],
        },
    }))
    .expect("policy")
}

/// The number of rules of chain `chain` of the policy table.
fn chain_rules(host: &str, chain: &str) -> usize {
    let out = Command::new("ip")
        .args(["netns", "exec", host, "nft", "-j", "list", "chain", "ip"])
        .args(["nimbess-policy", chain])
        .output()
        .expect("nft");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i.get("rule").is_some())
        .count()
}

fn slice(ready: [bool; 2]) -> EndpointSlice {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        // the Service port's name, the number its targetPort "http" has on the pods
        "ports": [{"name": "web", "port": 8080, "protocol": "TCP"}],
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
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.20", "ports": [{"name": "web", "port": 80, "targetPort": "http"}]},
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

    // a Service whose targetPort name no endpoint has: a Warning Event on
    // it, web stays rendered
    let typo: Service = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "typo", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.21", "ports": [{"port": 80, "targetPort": "htp"}]},
    }))
    .expect("service");
    rt.block_on(services.create(&PostParams::default(), &typo))
        .expect("create service");
    let mut typo_slice = slice([true, true]);
    typo_slice.metadata.name = Some("typo-1".into());
    // the controller leaves out a port whose targetPort no container has
    typo_slice.ports = Some(Vec::new());
    typo_slice.metadata.labels =
        Some([("kubernetes.io/service-name".to_string(), "typo".to_string())].into());
    rt.block_on(slices.create(&PostParams::default(), &typo_slice))
        .expect("create slice");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let note = wait_for_event(&rt, &events, "Service", "typo", "UnknownTargetPort", &agent);
    assert!(note.contains("targetPort \"htp\""), "{note}");
    wait_for(&host.name, Some(1), &agent);

    rt.block_on(services.delete("web", &DeleteParams::default()))
        .expect("delete service");
    wait_for(&host.name, None, &agent);

    // NetworkPolicies: pods by their status.podIP, a policy isolating the
    // server; one admitting an IPv6 block alone keeps it isolated; one the
    // agent cannot render skipped with a Warning Event
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, role, ip) in [
        ("server", "server", "10.232.0.2"),
        ("client", "client", "10.232.0.3"),
    ] {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"role": role}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }))
        .expect("pod");
        rt.block_on(pods.create(&PostParams::default(), &pod))
            .expect("create pod");
        let status = serde_json::json!({"status": {"podIP": ip}});
        rt.block_on(pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)))
            .expect("pod status");
    }
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), "default");
    rt.block_on(policies.create(&PostParams::default(), &policy("allow-client", None)))
        .expect("create policy");
    wait_for_chains(&host.name, &["in.10.232.0.2"], &agent);
    let with_client = chain_rules(&host.name, "in.10.232.0.2");
    rt.block_on(policies.create(
        &PostParams::default(),
        &policy("v6-only", Some("fd00::/64")),
    ))
    .expect("create policy");
    let bad_range = policy_with_ports(
        "bad-range",
        serde_json::json!([{"podSelector": {}}]),
        serde_json::json!([{"protocol": "TCP", "port": "http", "endPort": 90}]),
    );
    rt.block_on(policies.create(&PostParams::default(), &bad_range))
        .expect("create policy");
    let note = wait_for_event(
        &rt,
        &events,
        "NetworkPolicy",
        "bad-range",
        "InvalidNetworkPolicy",
        &agent,
    );
    assert!(
        note.contains("endPort 90 needs a numeric port, not the name \"http\""),
        "{note}"
    );
    assert_eq!(
        policy_chains(&host.name),
        ["in.10.232.0.2"],
        "the rest applied"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));
    // the client's policy gone, the IPv6 block's keeps the server isolated:
    // its chain loses the client's rule and keeps the drop
    rt.block_on(policies.delete("allow-client", &DeleteParams::default()))
        .expect("delete policy");
    let deadline = Instant::now() + Duration::from_secs(20);
    while chain_rules(&host.name, "in.10.232.0.2") >= with_client {
        assert!(
            Instant::now() < deadline,
            "chain in.10.232.0.2 keeps {with_client} rules\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        policy_chains(&host.name),
        ["in.10.232.0.2"],
        "still isolated"
    );
    assert!(chain_rules(&host.name, "in.10.232.0.2") >= 1, "the drop");
    for name in ["v6-only", "bad-range"] {
        rt.block_on(policies.delete(name, &DeleteParams::default()))
            .expect("delete policy");
    }
    wait_for_chains(&host.name, &[], &agent);
    drop(agent);
    let _ = Command::new("ip").args(["link", "del", &near]).status();
}
