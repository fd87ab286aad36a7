//! `nimbess-agent serve --kube` against the real kube-apiserver, run as its
//! manifest deploys it: the ServiceAccount, ClusterRole and binding of
//! `deploy/daemonset.yaml` are applied, and the agent runs with only that
//! ServiceAccount's token (TokenRequest), so a verb or resource missing from
//! the manifest fails the scenario as it would fail in a cluster.
//!
//! The in-memory server (`tests/apiserver`, `kube_northbound.rs`) is our
//! reading of the API; this binary checks the agent against upstream's:
//! its validation (an invalid CIDR never reaches the agent, an IPv6 one
//! does), `discovery.k8s.io/v1` EndpointSlices, ClusterIPs the server
//! allocates, Pods without a kubelet (placed by the CNI's pod names), and
//! `events.k8s.io/v1` Events created and then patched as a series. The
//! AdminNetworkPolicy CRDs of `deploy/admin-network-policies.yaml` are
//! applied and checked the same way: every field kept, the API's limits
//! enforced, an ANP on the server followed by the agent and named by
//! `explain --kube`.
//!
//! The agent runs in a namespace playing the host; the API server listens
//! on loopback in the test's own namespace, so a relay bound to the same
//! loopback address inside the host namespace passes its TLS through
//! untouched (the kubeconfig and the serving certificate stay as minted).
//! The scenario needs root; the manifest's table does not.

mod support;
mod traffic;

#[path = "real_apiserver/admin_crds.rs"]
mod admin_crds;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nephrite_test_services::{KubeApiServer, rbac};
use serde_json::{Value, json};
use support::{AgentProcess, Netns, first_ip, policy_chains, unique};
use tokio::runtime::Runtime;

/// The manifest the agent is deployed with, relative to this crate.
const MANIFEST: &str = "deploy/daemonset.yaml";

/// The agent's ServiceAccount in [`MANIFEST`].
const ACCOUNT: &str = "kube-system/nimbess-agent";

/// Everything the agent may do, `(API group, resource, verbs)`: a list and a
/// watch of each kind `--kube` reflects (`src/northbound/kube.rs`), and
/// Warning Events, created and patched when the same warning comes back
/// (kube-runtime's `Recorder` counts it in the Event's series).
const GRANTS: &[(&str, &str, &[&str])] = &[
    ("", "namespaces", &["list", "watch"]),
    ("", "pods", &["list", "watch"]),
    ("", "services", &["list", "watch"]),
    ("discovery.k8s.io", "endpointslices", &["list", "watch"]),
    ("events.k8s.io", "events", &["create", "patch"]),
    ("networking.k8s.io", "networkpolicies", &["list", "watch"]),
    (
        "policy.networking.k8s.io",
        "adminnetworkpolicies",
        &["list", "watch"],
    ),
    (
        "policy.networking.k8s.io",
        "baselineadminnetworkpolicies",
        &["list", "watch"],
    ),
];

/// How long the agent may take to follow one change of the cluster.
const PATIENCE: Duration = Duration::from_secs(30);

/// The manifest's text.
fn manifest_text() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/daemonset.yaml");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The manifest's documents, as JSON values.
fn manifest() -> Vec<Value> {
    serde_norway::Deserializer::from_str(&manifest_text())
        .map(|d| {
            <Value as serde::Deserialize>::deserialize(d)
                .unwrap_or_else(|e| panic!("{MANIFEST} is not YAML: {e}"))
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The documents of `kind` in the manifest.
fn of_kind<'a>(documents: &'a [Value], kind: &str) -> Vec<&'a Value> {
    documents.iter().filter(|d| d["kind"] == kind).collect()
}

/// The strings of the array at `value` (none when it is absent).
fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap_or_else(|| panic!("{s} is not a string")))
        .collect()
}

#[test]
fn the_manifest_grants_the_agent_exactly_what_it_uses_and_no_wildcard() {
    let documents = manifest();
    let roles = of_kind(&documents, "Role");
    assert!(roles.is_empty(), "{MANIFEST} has Roles: {roles:?}");
    let cluster_roles = of_kind(&documents, "ClusterRole");
    let [role] = cluster_roles.as_slice() else {
        panic!("{MANIFEST} should have one ClusterRole: {cluster_roles:?}");
    };
    assert_eq!(role["metadata"]["name"], "nimbess-agent");
    let granted =
        rbac::granted(&[(MANIFEST, &manifest_text())], ACCOUNT).unwrap_or_else(|e| panic!("{e}"));
    if let Err(mismatch) = rbac::assert_exact(&granted, rbac::cluster_wide(GRANTS)) {
        panic!("{MANIFEST}'s ClusterRole and what {ACCOUNT} uses differ: {mismatch}");
    }

    // bound to the agent's account only, which the DaemonSet runs as, with --kube
    let bindings = of_kind(&documents, "ClusterRoleBinding");
    let [binding] = bindings.as_slice() else {
        panic!("{MANIFEST} should have one ClusterRoleBinding: {bindings:?}");
    };
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], "nimbess-agent");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "nimbess-agent", "namespace": "kube-system"}])
    );
    assert!(of_kind(&documents, "RoleBinding").is_empty());
    let daemon_sets = of_kind(&documents, "DaemonSet");
    let [daemon_set] = daemon_sets.as_slice() else {
        panic!("{MANIFEST} should have one DaemonSet");
    };
    let pod = &daemon_set["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "nimbess-agent");
    assert_eq!(daemon_set["metadata"]["namespace"], "kube-system");
    let args = strings(&pod["containers"][0]["args"]);
    assert!(
        args.contains(&"--kube"),
        "the agent runs without --kube, so its grants are unused: {args:?}"
    );
}

/// The shared server, or None after saying why the test is skipped.
fn server(test: &str) -> Option<&'static KubeApiServer> {
    match KubeApiServer::shared() {
        Ok(kube) => Some(kube),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

fn sh(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .status()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(ok.success(), "{args:?}");
}

/// Make `api` (a loopback address of the test's namespace) reachable at the
/// same address inside `host`: a listener bound there, each connection
/// relayed by `rt` to the server. Runs as long as `rt`.
fn relay_api_into(rt: &Runtime, host: &Netns, api: SocketAddr) {
    sh(&[
        "ip", "netns", "exec", &host.name, "ip", "link", "set", "lo", "up",
    ]);
    let listener = traffic::in_netns(&host.path(), move || {
        let listener = std::net::TcpListener::bind(api)
            .unwrap_or_else(|e| panic!("binding {api} in the host namespace: {e}"));
        listener.set_nonblocking(true).expect("non-blocking");
        listener
    });
    let _entered = rt.enter();
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    rt.spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(api).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
}

/// Wait until `done` holds, failing after [`PATIENCE`] with `what` and the
/// agent's log.
fn wait_until(what: &str, agent: &AgentProcess, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} never happened\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The elements of the kernel's backend map `name` (`None`: no such map).
fn backend_map(host: &str, name: &str) -> Option<usize> {
    let out = Command::new("ip")
        .args(["netns", "exec", host, "nft", "-j", "list", "map", "ip"])
        .args(["nimbess-svc", name])
        .output()
        .expect("nft");
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
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

/// The load-balancer lines of the agent's `pipelines` for Service `ns/name`
/// port 80, one per local port.
fn balancers(agent: &AgentProcess, ns: &str, name: &str) -> Vec<String> {
    let (_, text) = agent.cli(&["pipelines"]);
    let prefix = format!("lb.{ns}.{name}.tcp.80.");
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// True when every one of `ports` local ports balances `vip:80` over exactly `backends`.
fn balanced(lines: &[String], ports: usize, vip: Ipv4Addr, backends: &[Ipv4Addr]) -> bool {
    let to: Vec<String> = backends.iter().map(|b| format!("{b}:8080")).collect();
    let tail = format!("load_balancer {vip}:80 -> [{}]", to.join(", "));
    lines.len() == ports && lines.iter().all(|l| l.ends_with(&tail))
}

/// The Warning Event with `reason` on `kind` `name` (of the namespace
/// `events` lists), once its series has counted at least `count`
/// occurrences (1: the Event itself); its note.
fn wait_for_event(
    rt: &Runtime,
    events: &Api<Event>,
    (kind, name): (&str, &str),
    reason: &str,
    count: i32,
    agent: &AgentProcess,
) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let list = rt
            .block_on(events.list(&ListParams::default()))
            .expect("the admin lists Events");
        let found = list.items.into_iter().find(|e| {
            let about = e.regarding.as_ref();
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
                && e.reporting_controller.as_deref() == Some("nimbess-agent")
                && about.and_then(|r| r.kind.as_deref()) == Some(kind)
                && about.and_then(|r| r.name.as_deref()) == Some(name)
                && e.series.as_ref().map_or(1, |s| s.count) >= count
        });
        if let Some(event) = found {
            return event.note.unwrap_or_default();
        }
        assert!(
            Instant::now() < deadline,
            "no Warning Event {reason} (count ≥ {count}) on {kind} {name}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

fn pod(ns: &str, name: &str, role: &str) -> Pod {
    from_json(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"role": role}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/none",
                                 "ports": [{"name": "http", "containerPort": 8080}]}]},
    }))
}

fn service(ns: &str, name: &str, target_port: &str) -> Service {
    from_json(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": target_port}]},
    }))
}

fn slice(ns: &str, service: &str, endpoints: &[(Ipv4Addr, bool)]) -> EndpointSlice {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(ip, ready)| json!({"addresses": [ip.to_string()], "conditions": {"ready": ready}}))
        .collect();
    from_json(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-1"), "namespace": ns,
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
}

fn policy(ns: &str, name: &str, from: Value) -> NetworkPolicy {
    from_json(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "podSelector": {"matchLabels": {"role": "server"}},
            "ingress": [{"from": from, "ports": [{"protocol": "TCP", "port": "http"}]}],
        },
    }))
}

/// Replace Service `name`'s targetPort (a JSON merge patch, as admin).
fn retarget(rt: &Runtime, services: &Api<Service>, name: &str, target_port: &str) {
    let patch =
        json!({"spec": {"ports": [{"name": "http", "port": 80, "targetPort": target_port}]}});
    rt.block_on(services.patch(name, &PatchParams::default(), &Patch::Merge(&patch)))
        .unwrap_or_else(|e| panic!("patching Service {name}: {e}"));
}

/// Give EndpointSlice `name` the `ports` the EndpointSlice controller writes
/// for its Service as it is now (there is no controller-manager here).
fn reslice(
    rt: &Runtime,
    slices: &Api<EndpointSlice>,
    name: &str,
    ports: Option<Vec<k8s_openapi::api::discovery::v1::EndpointPort>>,
) {
    let mut changed = rt
        .block_on(slices.get(name))
        .unwrap_or_else(|e| panic!("getting EndpointSlice {name}: {e}"));
    changed.ports = ports;
    rt.block_on(slices.replace(name, &PostParams::default(), &changed))
        .unwrap_or_else(|e| panic!("replacing EndpointSlice {name}: {e}"));
}

#[test]
fn the_agent_with_only_its_service_accounts_token_renders_the_cluster_and_warns() {
    let test = "the_agent_with_only_its_service_accounts_token_renders_the_cluster_and_warns";
    if !support::root(test, "creates network namespaces, veths and nftables rules") {
        return;
    }
    let Some(kube) = server(test) else {
        return;
    };
    let started = Instant::now();
    let rt = Runtime::new().expect("runtime");
    let _entered = rt.enter();
    let endpoint = kube.endpoint();
    let admin = endpoint.client().expect("admin client");

    // the agent's access, as its manifest gives it, and this scenario's namespace
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/daemonset.yaml"
    ))
    .expect("the manifest");
    let credentials = rt
        .block_on(endpoint.apply_access(MANIFEST, &yaml, ACCOUNT))
        .unwrap_or_else(|e| panic!("applying {MANIFEST}'s access: {e}"));
    let ns = unique("nb");
    let namespace: Namespace = from_json(json!({"metadata": {"name": ns}}));
    rt.block_on(Api::<Namespace>::all(admin.clone()).create(&PostParams::default(), &namespace))
        .expect("create the namespace");
    // what kube-controller-manager (not running here) gives every namespace,
    // and the ServiceAccount admission of Pods requires
    let account: ServiceAccount =
        from_json(json!({"metadata": {"name": "default", "namespace": ns}}));
    rt.block_on(
        Api::<ServiceAccount>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &account),
    )
    .expect("create the namespace's default ServiceAccount");

    let host = Netns::new("rh");
    relay_api_into(&rt, &host, endpoint.addr());
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = support::write(dir.path(), "kubeconfig", &credentials.kubeconfig);
    let env = format!("KUBECONFIG={}", kubeconfig.display());
    let net = unique("rn");
    let config = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.241.0.0/24\n");
    let prefix = [
        "ip",
        "netns",
        "exec",
        host.name.as_str(),
        "env",
        env.as_str(),
    ];
    let agent = AgentProcess::start_with(&config, "kernel", &[&net], &prefix, &["--kube"]);

    // pods: objects on the server (no kubelet: never a podIP), plugged
    // through the CNI with their names, so the agent places them itself
    let pods_api: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let mut pods = Vec::new();
    let mut ips = Vec::new();
    for (name, role) in [
        ("server-a", "server"),
        ("server-b", "server"),
        ("client", "client"),
    ] {
        rt.block_on(pods_api.create(&PostParams::default(), &pod(&ns, name, role)))
            .unwrap_or_else(|e| panic!("create Pod {name}: {e}"));
        let netns = Netns::new("rp");
        let (code, result) =
            agent.cni_for_pod("ADD", &net, &netns.name, &netns.path(), (&ns, name));
        assert_eq!(code, 0, "ADD {name}: {result}\n{}", agent.log());
        ips.push(first_ip(&result));
        pods.push(netns);
    }
    let (a, b) = (ips[0], ips[1]);
    traffic::serve_on(&pods[0].path(), "a", 8080);
    traffic::serve_on(&pods[1].path(), "b", 8080);

    // a Service (its ClusterIP the server's choice) and its EndpointSlice
    let services: Api<Service> = Api::namespaced(admin.clone(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(admin.clone(), &ns);
    let web = rt
        .block_on(services.create(&PostParams::default(), &service(&ns, "web", "http")))
        .expect("create Service web");
    let vip: Ipv4Addr = web
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("the server allocates a ClusterIP")
        .parse()
        .expect("an IPv4 ClusterIP");
    rt.block_on(slices.create(
        &PostParams::default(),
        &slice(&ns, "web", &[(a, true), (b, true)]),
    ))
    .expect("create EndpointSlice web-1");
    let map = format!("be.{ns}.web.tcp.80");
    wait_until("web balanced over a and b in every port", &agent, || {
        balanced(&balancers(&agent, &ns, "web"), 3, vip, &[a, b])
    });
    assert_eq!(backend_map(&host.name, &map), Some(2), "the kernel's map");
    let counts = traffic::connect_many(&pods[2].path(), SocketAddrV4::new(vip, 80), 40);
    assert!(
        counts.get("a").is_some_and(|n| *n > 0) && counts.get("b").is_some_and(|n| *n > 0),
        "both endpoints answer through {vip}:80: {counts:?}"
    );
    assert_eq!(counts.values().sum::<usize>(), 40, "{counts:?}");

    // an endpoint turned not-ready leaves the Service
    let mut changed = rt.block_on(slices.get("web-1")).expect("get web-1");
    changed.endpoints = slice(&ns, "web", &[(a, true), (b, false)]).endpoints;
    rt.block_on(slices.replace("web-1", &PostParams::default(), &changed))
        .expect("replace web-1");
    wait_until("web balanced over a alone", &agent, || {
        balanced(&balancers(&agent, &ns, "web"), 3, vip, &[a])
    });
    let counts = traffic::connect_many(&pods[2].path(), SocketAddrV4::new(vip, 80), 10);
    assert_eq!(counts.get("a"), Some(&10), "{counts:?}");

    // a Service whose targetPort name no endpoint has: a Warning Event on
    // it, created with the agent's own token; web stays rendered
    rt.block_on(services.create(&PostParams::default(), &service(&ns, "typo", "htp")))
        .expect("create Service typo");
    // as kube-controller-manager writes it: the pod has no port "htp", so
    // the slice has no port for the Service port
    let mut typo_slice = slice(&ns, "typo", &[(a, true)]);
    typo_slice.ports = Some(Vec::new());
    rt.block_on(slices.create(&PostParams::default(), &typo_slice))
        .expect("create EndpointSlice typo-1");
    let events: Api<Event> = Api::namespaced(admin.clone(), &ns);
    let typo = ("Service", "typo");
    let note = wait_for_event(&rt, &events, typo, "UnknownTargetPort", 1, &agent);
    assert!(note.contains("targetPort \"htp\""), "{note}");
    assert!(balanced(&balancers(&agent, &ns, "web"), 3, vip, &[a]));
    // fixed, it is rendered; broken again, the same Event counts a second
    // occurrence (a patch of its series)
    retarget(&rt, &services, "typo", "http");
    reslice(
        &rt,
        &slices,
        "typo-1",
        slice(&ns, "typo", &[(a, true)]).ports,
    );
    wait_until("typo rendered once fixed", &agent, || {
        balancers(&agent, &ns, "typo").len() == 3
    });
    retarget(&rt, &services, "typo", "htp");
    reslice(&rt, &slices, "typo-1", Some(Vec::new()));
    wait_for_event(&rt, &events, typo, "UnknownTargetPort", 2, &agent);

    // NetworkPolicies: the servers isolated but for the client on their
    // port named http (resolved on the Pods' containers, whose protocol the
    // server defaulted); the chains are at the addresses the CNI gave the pods
    let policies: Api<NetworkPolicy> = Api::namespaced(admin.clone(), &ns);
    let clients = json!([{"podSelector": {"matchLabels": {"role": "client"}}}]);
    rt.block_on(policies.create(
        &PostParams::default(),
        &policy(&ns, "allow-client", clients),
    ))
    .expect("create NetworkPolicy allow-client");
    let mut isolated = vec![format!("in.{a}"), format!("in.{b}")];
    isolated.sort();
    wait_until("the servers' ingress chains", &agent, || {
        policy_chains(&host.name) == isolated
    });
    let counts = traffic::connect_many(&pods[2].path(), SocketAddrV4::new(vip, 80), 5);
    assert_eq!(
        counts.get("a"),
        Some(&5),
        "the client is let in: {counts:?}"
    );
    let counts = traffic::connect_many(&pods[1].path(), SocketAddrV4::new(a, 8080), 1);
    assert_eq!(
        counts.get("timeout"),
        Some(&1),
        "server-b, no client, is kept out of server-a: {counts:?}"
    );

    // the real server refuses an invalid CIDR and an unknown selector
    // operator itself (the in-memory one passes them to the agent); an IPv6
    // block it accepts, and the agent renders its policy: it holds no IPv4
    // client, so the servers stay isolated once allow-client is gone
    let bad_operator = json!([{"podSelector": {"matchExpressions": [
        {"key": "role", "operator": "Near", "values": ["client"]}]}}]);
    for (name, from) in [
        ("bad-cidr", json!([{"ipBlock": {"cidr": "10.0.0.0/33"}}])),
        ("bad-operator", bad_operator),
    ] {
        match rt.block_on(policies.create(&PostParams::default(), &policy(&ns, name, from))) {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 422, "{name}: {status:?}"),
            other => panic!("the server accepted NetworkPolicy {name}: {other:?}"),
        }
    }
    rt.block_on(policies.create(
        &PostParams::default(),
        &policy(&ns, "v6-block", json!([{"ipBlock": {"cidr": "fd00::/64"}}])),
    ))
    .expect("create NetworkPolicy v6-block");
    rt.block_on(policies.delete("allow-client", &DeleteParams::default()))
        .expect("delete NetworkPolicy allow-client");
    wait_until("the client kept out by v6-block alone", &agent, || {
        traffic::connect_many(&pods[2].path(), SocketAddrV4::new(a, 8080), 1).get("timeout")
            == Some(&1)
    });
    assert_eq!(policy_chains(&host.name), isolated, "both servers isolated");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // deleted, the policies and the Service leave the kernel
    rt.block_on(policies.delete("v6-block", &DeleteParams::default()))
        .expect("delete NetworkPolicy v6-block");
    wait_until("no policy chain", &agent, || {
        policy_chains(&host.name).is_empty()
    });
    rt.block_on(services.delete("web", &DeleteParams::default()))
        .expect("delete Service web");
    wait_until("web's map removed", &agent, || {
        backend_map(&host.name, &map).is_none()
    });

    for (pod, name) in pods.iter().zip(["server-a", "server-b", "client"]) {
        let (code, result) = agent.cni_for_pod("DEL", &net, &pod.name, &pod.path(), (&ns, name));
        assert_eq!(code, 0, "DEL {name}: {result}");
    }
    drop(agent);
    let _ = rt.block_on(Api::<Namespace>::all(admin).delete(&ns, &DeleteParams::default()));
    eprintln!(
        "{test}: {:.1}s (the server shared, started in {:.1}s)",
        started.elapsed().as_secs_f64(),
        kube.started_in().as_secs_f64()
    );
}
