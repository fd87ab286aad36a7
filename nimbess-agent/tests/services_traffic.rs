//! Kubernetes Services through the kernel driver, with real TCP traffic
//! between network namespaces: the agent (in a namespace playing the host)
//! reads a Service and its EndpointSlice from `--resources dir:PATH` and
//! renders nftables DNAT; a client pod opens connections to the ClusterIP
//! and counts which backend pod answered. Needs root.

mod support;
mod traffic;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{AgentProcess, Netns, first_ip, policy_chains, unique};
use traffic::{connect_many, serve_on};

const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

/// A server on port 8080 of the pod at `netns` answering with `name`.
fn serve(netns: &str, name: &str) {
    serve_on(netns, name, 8080);
}

fn service_yaml(affinity: &str, endpoints: &[(Ipv4Addr, bool)]) -> String {
    let mut eps = String::new();
    for (address, ready) in endpoints {
        eps.push_str(&format!(
            "  - addresses: [\"{address}\"]\n    conditions: {{ready: {ready}}}\n"
        ));
    }
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: default}}\nspec:\n  clusterIP: {VIP}\n  sessionAffinity: {affinity}\n  ports:\n  - {{name: http, port: 80, targetPort: http}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports:\n- {{name: http, port: 8080, protocol: TCP}}\nendpoints:\n{eps}"
    )
}

/// The backends the kernel holds for the Service, as `nft` lists them.
fn rendered_backends(host: &str) -> usize {
    let out = Command::new("ip")
        .args(["netns", "exec", host, "nft", "-j", "list", "map", "ip"])
        .args(["nimbess-svc", "be.default.web.tcp.80"])
        .output()
        .expect("nft");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["map"]["elem"].as_array())
        .map(Vec::len)
        .sum()
}

/// Write the resources and wait until the agent has rendered `want` backends.
fn publish(dir: &Path, host: &str, yaml: &str, want: usize, agent: &AgentProcess) {
    std::fs::write(dir.join("web.yaml"), yaml).expect("write resources");
    let deadline = Instant::now() + Duration::from_secs(20);
    while rendered_backends(host) != want {
        assert!(
            Instant::now() < deadline,
            "the agent never rendered {want} backends\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_cluster_ip_spreads_connections_over_ready_endpoints_only() {
    if !support::root(
        "a_cluster_ip_spreads_connections_over_ready_endpoints_only",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("sh");
    let resources = tempfile::tempdir().expect("tempdir");
    let net = unique("sv");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.230.0.0/24\n");
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let pods: Vec<Netns> = (0..4).map(|_| Netns::new("sp")).collect();
    let mut ips = Vec::new();
    for pod in &pods {
        let (code, result) = agent.cni("ADD", &net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        ips.push(first_ip(&result));
    }
    let client = pods[0].path();
    let names = ["b1", "b2", "b3"];
    for (pod, name) in pods[1..].iter().zip(names) {
        serve(&pod.path(), name);
    }
    let vip = SocketAddrV4::new(VIP, 80);

    // three ready endpoints: 300 connections land on all three, 20-50 % each
    let all: Vec<(Ipv4Addr, bool)> = ips[1..].iter().map(|ip| (*ip, true)).collect();
    publish(
        resources.path(),
        &host.name,
        &service_yaml("None", &all),
        3,
        &agent,
    );
    let counts = connect_many(&client, vip, 300);
    for name in names {
        let n = counts.get(name).copied().unwrap_or(0);
        assert!(
            (60..=150).contains(&n),
            "{name} took {n} of 300: {counts:?}"
        );
    }
    assert_eq!(counts.values().sum::<usize>(), 300, "{counts:?}");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));
    // the load-balancer module sits in every local port's pipeline
    let (_, text) = agent.cli(&["pipelines"]);
    for pod in &pods {
        let line = format!(
            "lb.default.web.tcp.80.port_{}_eth0: load_balancer {VIP}:80 -> [{}:8080, {}:8080, {}:8080]",
            pod.name, ips[1], ips[2], ips[3]
        );
        assert!(text.contains(&line), "{line}\n{text}");
    }

    // b3 not ready: it gets no new connection
    let mut some = all.clone();
    some[2].1 = false;
    publish(
        resources.path(),
        &host.name,
        &service_yaml("None", &some),
        2,
        &agent,
    );
    let counts = connect_many(&client, vip, 100);
    assert_eq!(counts.get("b3"), None, "{counts:?}");
    assert_eq!(
        counts.get("b1").unwrap_or(&0) + counts.get("b2").unwrap_or(&0),
        100,
        "{counts:?}"
    );

    // session affinity: one client keeps its backend
    publish(
        resources.path(),
        &host.name,
        &service_yaml("ClientIP", &all),
        3,
        &agent,
    );
    let counts = connect_many(&client, vip, 50);
    assert_eq!(counts.len(), 1, "one backend for one client: {counts:?}");

    // drift: the Service's map emptied behind the agent's back is named,
    // then repaired
    let ok = Command::new("ip")
        .args(["netns", "exec", &host.name, "nft", "flush", "map", "ip"])
        .args(["nimbess-svc", "be.default.web.tcp.80"])
        .status()
        .expect("nft");
    assert!(ok.success());
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("service be.default.web.tcp.80: backends are []"),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(rendered_backends(&host.name), 3);

    // no ready endpoint: the client is refused at once
    let none: Vec<(Ipv4Addr, bool)> = ips[1..].iter().map(|ip| (*ip, false)).collect();
    publish(
        resources.path(),
        &host.name,
        &service_yaml("None", &none),
        0,
        &agent,
    );
    let counts = connect_many(&client, vip, 3);
    assert_eq!(counts.get("refused"), Some(&3), "{counts:?}");
}

/// Write (or with `None` remove) the policy file and wait until the
/// agent's policy chains are `want`.
fn publish_policy(
    dir: &Path,
    host: &str,
    yaml: Option<&str>,
    want: &[String],
    agent: &AgentProcess,
) {
    let file = dir.join("policy.yaml");
    match yaml {
        Some(y) => std::fs::write(&file, y).expect("write policy"),
        None => std::fs::remove_file(&file).expect("remove policy"),
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let have = policy_chains(host);
        if have == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "policy chains {have:?}, want {want:?}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Pod object: `ip` as its `status.podIP` (`None`: none reported yet),
/// its container's port 8080 named `http`.
fn pod_yaml(name: &str, role: &str, ip: Option<Ipv4Addr>) -> String {
    let status = ip
        .map(|ip| format!("status: {{podIP: \"{ip}\"}}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {{role: {role}}}}}\nspec: {{containers: [{{name: c, image: x, ports: [{{name: http, containerPort: 8080}}]}}]}}\n{status}---\n"
    )
}

/// Deny-all ingress, and role=client may reach role=server's port named
/// `http` (8080 on the server's container).
const DENY_AND_ALLOW_CLIENT: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-all, namespace: default}\nspec:\n  podSelector: {}\n  policyTypes: [Ingress]\n---\n\
apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-client, namespace: default}\nspec:\n  podSelector: {matchLabels: {role: server}}\n  ingress:\n  - from: [{podSelector: {matchLabels: {role: client}}}]\n    ports: [{protocol: TCP, port: http}]\n";

const CLIENT_EGRESS_8080: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: client-out, namespace: default}\nspec:\n  podSelector: {matchLabels: {role: client}}\n  policyTypes: [Egress]\n  egress:\n  - ports: [{protocol: TCP, port: 8080}]\n";

#[test]
fn a_network_policy_lets_the_labelled_client_in_and_keeps_others_out() {
    if !support::root(
        "a_network_policy_lets_the_labelled_client_in_and_keeps_others_out",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("ph");
    let resources = tempfile::tempdir().expect("tempdir");
    let net = unique("pn");
    let yaml = format!("driver: kernel\nnetworks:\n  - name: {net}\n    subnet: 10.231.0.0/24\n");
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let (server, client, other) = (Netns::new("ps"), Netns::new("pc"), Netns::new("po"));
    let mut ips = Vec::new();
    // the runtime names each pod in CNI_ARGS: the agent places the Pod
    // objects by those names, whatever their status.podIP says
    for (pod, name) in [(&server, "server"), (&client, "client"), (&other, "other")] {
        let (code, result) =
            agent.cni_for_pod("ADD", &net, &pod.name, &pod.path(), ("default", name));
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        ips.push(first_ip(&result));
    }
    serve_on(&server.path(), "8080", 8080);
    serve_on(&server.path(), "9090", 9090);
    // the server has no podIP yet, the client's is another pod's (stale)
    let pods = pod_yaml("server", "server", None)
        + &pod_yaml("client", "client", Some(ips[2]))
        + &pod_yaml("other", "other", Some(ips[2]));
    std::fs::write(resources.path().join("pods.yaml"), pods).expect("pods");
    let at = |port| SocketAddrV4::new(ips[0], port);
    let once = |from: &Netns, port| {
        connect_many(&from.path(), at(port), 1)
            .into_keys()
            .next()
            .expect("one answer")
    };
    assert_eq!(once(&other, 8080), "8080", "no policy: open to all");

    // deny-all ingress + allow role=client on TCP 8080 to role=server
    let ingress: Vec<String> = ips.iter().map(|ip| format!("in.{ip}")).collect();
    publish_policy(
        resources.path(),
        &host.name,
        Some(DENY_AND_ALLOW_CLIENT),
        &ingress,
        &agent,
    );
    assert_eq!(
        once(&client, 8080),
        "8080",
        "the labelled client gets in, on the server's port named http"
    );
    assert_eq!(once(&other, 8080), "timeout", "another pod does not");
    assert_eq!(
        once(&client, 9090),
        "timeout",
        "nor the client on another port"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // drift: the server's ingress chain flushed by hand is named, then
    // rendered again (and keeps the other pod out again)
    let chain = format!("in.{}", ips[0]);
    let ok = Command::new("ip")
        .args(["netns", "exec", &host.name, "nft", "flush", "chain", "ip"])
        .args(["nimbess-policy", &chain])
        .status()
        .expect("nft");
    assert!(ok.success());
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("policy: chain {chain} holds 0 rules, the model ")),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(once(&other, 8080), "timeout", "the policy holds again");

    // an egress policy: the client reaches TCP 8080 only
    publish_policy(
        resources.path(),
        &host.name,
        Some(CLIENT_EGRESS_8080),
        &[format!("out.{}", ips[1])],
        &agent,
    );
    assert_eq!(once(&client, 8080), "8080");
    assert_eq!(
        once(&client, 9090),
        "timeout",
        "egress blocks what it should"
    );
    assert_eq!(once(&other, 9090), "9090", "other pods are not isolated");

    // the policy deleted: access restored
    publish_policy(resources.path(), &host.name, None, &[], &agent);
    assert_eq!(once(&client, 9090), "9090");
}

/// Role=client may reach role=server on TCP 8080 (by number).
const CLIENT_TO_SERVER_8080: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: client-to-server, namespace: default}\nspec:\n  podSelector: {matchLabels: {role: server}}\n  ingress:\n  - from: [{podSelector: {matchLabels: {role: client}}}]\n    ports: [{protocol: TCP, port: 8080}]\n";

/// One connection from the pod at `from` to `dst`: the answer, "refused"
/// or "timeout". What should answer gets a generous 10 s (a loaded
/// machine); what should not costs the 1 s the drop takes to show.
fn one(from: &Netns, dst: SocketAddrV4, expect_answer: bool) -> String {
    let patience = Duration::from_secs(if expect_answer { 10 } else { 1 });
    traffic::in_netns(&from.path(), move || traffic::answer_within(dst, patience))
}

/// Run `nft` (or `ip`, per `tool`) with `args` in the namespace `netns`.
fn run_in(netns: &str, tool: &str, args: &[&str], input: Option<&str>) -> String {
    use std::io::Write as _;
    let mut child = Command::new("ip")
        .args(["netns", "exec", netns, tool])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect(tool);
    if let Some(text) = input {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect(tool);
    assert!(
        out.status.success(),
        "{tool} {args:?} in {netns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The TCP SYNs from `src` to port 8080 the pod at `netns` received since
/// [`spy`] set its counter up.
fn spied(netns: &str) -> u64 {
    let out = run_in(netns, "nft", &["-j", "list", "table", "ip", "spy"], None);
    let v: serde_json::Value = serde_json::from_str(&out).expect("nft json");
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["rule"]["expr"].as_array())
        .flatten()
        .filter_map(|e| e["counter"]["packets"].as_u64())
        .sum()
}

/// Count, in the pod at `netns`, the TCP SYNs from `src` to port 8080.
fn spy(netns: &str, src: Ipv4Addr) {
    let script = format!(
        "add table ip spy\nadd chain ip spy in {{ type filter hook input priority 0; policy accept; }}\n\
         add rule ip spy in ip saddr {src} tcp dport 8080 tcp flags syn counter\n"
    );
    run_in(netns, "nft", &["-f", "-"], Some(&script));
}

/// A connection attempt from the pod at `netns` with the source address
/// `src` (which the pod holds): waits 1 s, the answer does not matter.
fn syn_from(netns: &Netns, src: Ipv4Addr, dst: SocketAddrV4) {
    traffic::in_netns(&netns.path(), move || {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        s.bind(&SocketAddrV4::new(src, 0).into()).expect("bind");
        let _ = s.connect_timeout(&dst.into(), Duration::from_secs(1));
    });
}

#[test]
fn a_service_or_a_policy_opens_the_path_between_pod_networks() {
    if !support::root(
        "a_service_or_a_policy_opens_the_path_between_pod_networks",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("xh");
    let resources = tempfile::tempdir().expect("tempdir");
    // A and B bridged, R routed
    let (net_a, net_b, net_r) = (unique("xa"), unique("xb"), unique("xr"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {net_a}\n    subnet: 10.236.0.0/24\n  - name: {net_b}\n    subnet: 10.237.0.0/24\n  \
         - name: {net_r}\n    subnet: 10.238.0.0/24\n    kind: l3\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent = AgentProcess::start_with(
        &yaml,
        "kernel",
        &[&net_a, &net_b, &net_r],
        &prefix,
        &["--resources", &flag],
    );
    let (client, server) = (Netns::new("xc"), Netns::new("xs"));
    let (code, rc) = agent.cni_for_pod(
        "ADD",
        &net_a,
        &client.name,
        &client.path(),
        ("default", "client"),
    );
    assert_eq!(code, 0, "{rc}\n{}", agent.log());
    let (code, rs) = agent.cni_for_pod(
        "ADD",
        &net_b,
        &server.name,
        &server.path(),
        ("default", "server"),
    );
    assert_eq!(code, 0, "{rs}\n{}", agent.log());
    let routed = Netns::new("xr");
    let (code, rr) = agent.cni_for_pod(
        "ADD",
        &net_r,
        &routed.name,
        &routed.path(),
        ("default", "rclient"),
    );
    assert_eq!(code, 0, "{rr}\n{}", agent.log());
    // a pod of B without a Pod object: no policy lets it anywhere
    let intruder = Netns::new("xi");
    let (code, ri) = agent.cni("ADD", &net_b, &intruder.name, &intruder.path());
    assert_eq!(code, 0, "{ri}\n{}", agent.log());
    let (client_ip, server_ip) = (first_ip(&rc), first_ip(&rs));
    serve_on(&server.path(), "8080", 8080);
    serve_on(&server.path(), "9090", 9090);
    serve_on(&client.path(), "client", 8080);
    let pods = pod_yaml("server", "server", None)
        + &pod_yaml("client", "client", None)
        + &pod_yaml("rclient", "client", None);
    std::fs::write(resources.path().join("pods.yaml"), pods).expect("pods");
    let server_at = |port| SocketAddrV4::new(server_ip, port);

    // no Service, no policy: the networks are isolated both ways
    assert_eq!(one(&client, server_at(8080), false), "timeout", "A to B");
    assert_eq!(
        one(&server, SocketAddrV4::new(client_ip, 8080), false),
        "timeout",
        "B to A"
    );
    assert_eq!(one(&routed, server_at(8080), false), "timeout", "R to B");
    assert_eq!(
        one(&routed, SocketAddrV4::new(client_ip, 8080), false),
        "timeout",
        "R to A"
    );

    // a ClusterIP Service whose endpoint is on B: the client on A reaches
    // it through the VIP, while its direct connection stays dropped
    publish(
        resources.path(),
        &host.name,
        &service_yaml("None", &[(server_ip, true)]),
        1,
        &agent,
    );
    assert_eq!(
        one(&client, SocketAddrV4::new(VIP, 80), true),
        "8080",
        "through the Service\n{}",
        agent.log()
    );
    assert_eq!(
        one(&client, server_at(8080), false),
        "timeout",
        "the Service opens its own connections only"
    );
    assert_eq!(
        one(&routed, SocketAddrV4::new(VIP, 80), true),
        "8080",
        "from the routed network too\n{}",
        agent.log()
    );
    assert_eq!(one(&routed, server_at(8080), false), "timeout", "R to B");

    // a policy letting A's client into B's server on TCP 8080: that port
    // only, that direction only
    publish_policy(
        resources.path(),
        &host.name,
        Some(CLIENT_TO_SERVER_8080),
        &[format!("in.{server_ip}")],
        &agent,
    );
    assert_eq!(
        one(&client, server_at(8080), true),
        "8080",
        "the policy opens TCP 8080\n{}",
        agent.log()
    );
    assert_eq!(
        one(&client, server_at(9090), false),
        "timeout",
        "not another port"
    );
    assert_eq!(
        one(&server, SocketAddrV4::new(client_ip, 8080), false),
        "timeout",
        "nor the other direction"
    );
    assert_eq!(
        one(&routed, server_at(8080), true),
        "8080",
        "the routed client is role=client too"
    );
    assert_eq!(one(&routed, server_at(9090), false), "timeout");
    // the routed pod borrowing the A client's address (which the policy
    // lets in) is dropped at the host: not one SYN reaches the server
    run_in(
        &routed.name,
        "ip",
        &["addr", "add", &format!("{client_ip}/32"), "dev", "eth0"],
        None,
    );
    spy(&server.name, client_ip);
    syn_from(&routed, client_ip, server_at(8080));
    assert_eq!(spied(&server.name), 0, "a borrowed source address");
    // so is a pod of B's own bridge claiming it
    run_in(
        &intruder.name,
        "ip",
        &["addr", "add", &format!("{client_ip}/32"), "dev", "eth0"],
        None,
    );
    syn_from(&intruder, client_ip, server_at(8080));
    assert_eq!(spied(&server.name), 0, "borrowed on B's own bridge");
    assert_eq!(
        one(&client, SocketAddrV4::new(VIP, 80), true),
        "8080",
        "the Service still"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // the policy deleted: isolated again, the Service still open
    publish_policy(resources.path(), &host.name, None, &[], &agent);
    assert_eq!(
        one(&client, server_at(8080), false),
        "timeout",
        "isolated again"
    );
    assert_eq!(one(&routed, server_at(8080), false), "timeout");
    assert_eq!(one(&client, SocketAddrV4::new(VIP, 80), true), "8080");
}
