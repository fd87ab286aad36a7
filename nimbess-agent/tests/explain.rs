//! `nimbess-agent explain` against a running agent with the kernel driver
//! (in a namespace playing the host): pods on two networks, a
//! NetworkPolicy, an AdminNetworkPolicy and a Service read from
//! `--resources dir:PATH`; `explain` names the rule deciding an allowed
//! connection, one denied by the NetworkPolicy, one denied by the ANP, one
//! isolated between networks, unrouted ones and one through the Service,
//! in text and JSON, and what it says is what real TCP does; `--live`
//! finds the rules in the kernel and flags one deleted behind the agent's
//! back; `--probe`'s connection meets what the model says and the deciding
//! drop counts it, until that rule is deleted. Needs root.

mod support;
mod traffic;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{AGENT, AgentProcess, Netns, first_ip, unique};
use traffic::serve_on;

/// Namespaces `shop` and `other`; in `shop` a server (8080 named `http`)
/// and a client; in `other` an outsider (on the server's network) and a
/// pod on another network (`far`).
const CLUSTER: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {tier: shop}}\n---\n\
apiVersion: v1\nkind: Namespace\nmetadata: {name: other, labels: {tier: other}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: server, namespace: shop, labels: {app: server}}\nspec: {containers: [{name: c, image: x, ports: [{name: http, containerPort: 8080}]}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: client, namespace: shop, labels: {app: client}}\nspec: {containers: [{name: c, image: x}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: outsider, namespace: other, labels: {app: client}}\nspec: {containers: [{name: c, image: x}]}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata: {name: far, namespace: other, labels: {app: far}}\nspec: {containers: [{name: c, image: x}]}\n";

/// The server takes `app: client` pods of every namespace on `http`.
const ALLOW_CLIENTS: &str = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-clients, namespace: shop}\nspec:\n  podSelector: {matchLabels: {app: server}}\n  policyTypes: [Ingress]\n  ingress:\n  - from: [{namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}]\n    ports: [{protocol: TCP, port: http}]\n";

/// At priority 10, nothing of `other` reaches `shop`'s pods.
const GUARD: &str = "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: guard}\nspec:\n  priority: 10\n  subject: {namespaces: {matchLabels: {tier: shop}}}\n  ingress:\n  - name: no-other\n    action: Deny\n    from: [{namespaces: {matchLabels: {tier: other}}}]\n";

const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 50);

/// Service `shop/web` (port 80 → `http`) with the server as its endpoint.
fn web(server: Ipv4Addr) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: shop}}\nspec:\n  clusterIP: {VIP}\n  ports:\n  - {{name: http, port: 80, targetPort: http}}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: shop\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports:\n- {{name: http, port: 8080, protocol: TCP}}\nendpoints:\n  - addresses: [\"{server}\"]\n    conditions: {{ready: true}}\n"
    )
}

/// `nimbess-agent explain ARGS` in the host namespace: (exit code, stdout, stderr).
fn explain(
    host: &str,
    agent: &AgentProcess,
    resources: &Path,
    args: &[&str],
) -> (i32, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", host, AGENT, "explain"])
        .args(args)
        .arg("--socket")
        .arg(&agent.socket)
        .arg("--resources")
        .arg(format!("dir:{}", resources.display()))
        .output()
        .expect("explain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `explain ARGS -o json`, which must succeed.
fn explain_json(host: &str, agent: &AgentProcess, resources: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let (code, out, err) = explain(host, agent, resources, &all);
    assert!(
        code == 0 || all.contains(&"--live"),
        "explain {args:?}: {code} {out}{err}"
    );
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("explain {args:?} JSON: {e}: {out}{err}"))
}

/// The host namespace's nftables ruleset, for a failure's message.
fn ruleset(host: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", host, "nft", "-j", "list", "ruleset"])
        .output()
        .expect("nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn one(from: &Netns, dst: SocketAddrV4, expect_answer: bool) -> String {
    let patience = Duration::from_secs(if expect_answer { 10 } else { 1 });
    traffic::in_netns(&from.path(), move || traffic::answer_within(dst, patience))
}

#[test]
fn explain_names_the_deciding_rule_and_live_finds_a_rule_deleted_by_hand() {
    if !support::root(
        "explain_names_the_deciding_rule_and_live_finds_a_rule_deleted_by_hand",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("eh");
    let resources = tempfile::tempdir().expect("tempdir");
    let dir = resources.path();
    let (near, away) = (unique("en"), unique("ef"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {near}\n    subnet: 10.237.0.0/24\n  - name: {away}\n    subnet: 10.238.0.0/24\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", dir.display());
    let agent = AgentProcess::start_with(
        &yaml,
        "kernel",
        &[&near, &away],
        &prefix,
        &["--resources", &flag],
    );
    let server = Netns::new("es");
    let client = Netns::new("ec");
    let outsider = Netns::new("eo");
    let far = Netns::new("ea");
    let mut ips = Vec::new();
    for (pod, net, ns, name) in [
        (&server, &near, "shop", "server"),
        (&client, &near, "shop", "client"),
        (&outsider, &near, "other", "outsider"),
        (&far, &away, "other", "far"),
    ] {
        let (code, result) = agent.cni_for_pod("ADD", net, &pod.name, &pod.path(), (ns, name));
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        ips.push(first_ip(&result));
    }
    let (server_ip, far_ip) = (ips[0], ips[3]);
    serve_on(&server.path(), "server", 8080);
    serve_on(&far.path(), "far", 8080);
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).expect("cluster");
    std::fs::write(dir.join("np.yaml"), ALLOW_CLIENTS).expect("np");
    std::fs::write(dir.join("anp.yaml"), GUARD).expect("anp");
    std::fs::write(dir.join("web.yaml"), web(server_ip)).expect("web");

    // the agent has applied the objects: its tiers are theirs, the Service is there
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, out, _) = explain(
            &host.name,
            &agent,
            dir,
            &["shop/client", "shop/web", "-o", "json"],
        );
        let v: Value = serde_json::from_str(&out).unwrap_or_default();
        if code == 0 && v["in_sync"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the agent never applied the objects: {out}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // allowed: the NetworkPolicy's rule decides
    let (code, text, err) = explain(
        &host.name,
        &agent,
        dir,
        &["shop/client", "shop/server", "8080/tcp"],
    );
    assert_eq!(code, 0, "{text}{err}");
    assert!(text.contains(": allowed"), "{text}");
    assert!(
        text.contains("allowed by ingress: NetworkPolicy shop/allow-clients ingress[0]: Allow"),
        "{text}"
    );
    let v = explain_json(
        &host.name,
        &agent,
        dir,
        &["shop/client", "shop/server", "8080"],
    );
    let path = &v["explanation"]["paths"][0];
    assert_eq!(path["verdict"], "allowed", "{v}");
    assert_eq!(path["decided_by"]["kind"], "policy", "{v}");
    let rule = &path["decided_by"]["decider"]["rule"];
    assert_eq!(
        (&rule["tier"], &rule["policy"]),
        (&Value::from("network"), &Value::from("allow-clients")),
        "{v}"
    );
    assert_eq!(
        one(&client, SocketAddrV4::new(server_ip, 8080), true),
        "server"
    );

    // denied by the NetworkPolicy: its isolation, no rule for 9090
    let (_, text, _) = explain(
        &host.name,
        &agent,
        dir,
        &["shop/client", "shop/server", "9090"],
    );
    assert!(text.contains(": denied"), "{text}");
    assert!(
        text.contains("isolated by NetworkPolicy shop/allow-clients and no rule of theirs matches"),
        "{text}"
    );

    // denied by the ANP's Deny, although the NetworkPolicy would allow it
    let (_, text, _) = explain(
        &host.name,
        &agent,
        dir,
        &["other/outsider", "shop/server", "8080"],
    );
    assert!(text.contains(": denied"), "{text}");
    assert!(
        text.contains("AdminNetworkPolicy guard (priority 10) ingress[0] \"no-other\": Deny"),
        "{text}"
    );
    assert_eq!(
        one(&outsider, SocketAddrV4::new(server_ip, 8080), false),
        "timeout"
    );

    // isolated between networks: nothing on far's ingress opens it
    let (_, text, _) = explain(
        &host.name,
        &agent,
        dir,
        &["shop/client", &far_ip.to_string(), "8080"],
    );
    assert!(text.contains(": denied"), "{text}");
    assert!(
        text.contains(&format!("isolation between networks {near} and {away}")),
        "{text}"
    );
    let v = explain_json(
        &host.name,
        &agent,
        dir,
        &["shop/client", "other/far", "8080"],
    );
    assert_eq!(
        v["explanation"]["paths"][0]["decided_by"]["kind"], "network_isolation",
        "{v}"
    );
    assert_eq!(
        one(&client, SocketAddrV4::new(far_ip, 8080), false),
        "timeout"
    );

    // unrouted: no pod at that address, no Service at that VIP and port
    let (_, text, _) = explain(
        &host.name,
        &agent,
        dir,
        &["shop/client", "10.237.0.200:8080"],
    );
    assert!(text.contains(": unrouted"), "{text}");
    assert!(
        text.contains(&format!("no pod has that address on network {near}")),
        "{text}"
    );
    let v = explain_json(&host.name, &agent, dir, &["shop/client", "10.96.0.99:80"]);
    assert_eq!(v["explanation"]["paths"][0]["verdict"], "unrouted", "{v}");
    assert_eq!(
        v["explanation"]["paths"][0]["decided_by"]["kind"], "no_service",
        "{v}"
    );
    // a name that is neither a pod nor a Service is refused, naming it
    let (code, _, err) = explain(
        &host.name,
        &agent,
        dir,
        &["shop/client", "shop/nothing", "80"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("no pod and no Service shop/nothing"), "{err}");

    // through the Service: DNAT to the server, then its ingress decides
    let (_, text, _) = explain(&host.name, &agent, dir, &["shop/client", "shop/web"]);
    assert!(
        text.contains(&format!(
            "Service shop/web DNAT {VIP}:80 -> {server_ip}:8080"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("-> {server_ip}:8080 (shop/server)")),
        "{text}"
    );
    assert!(text.contains(": allowed"), "{text}");
    assert_eq!(one(&client, SocketAddrV4::new(VIP, 80), true), "server");

    // --live: the kernel holds every rule these answers rely on
    for args in [
        ["shop/client", "shop/server", "8080"],
        ["shop/client", "shop/server", "9090"],
        ["other/outsider", "shop/server", "8080"],
        ["shop/client", "other/far", "8080"],
        ["shop/client", "shop/web", "80"],
    ] {
        let mut all = args.to_vec();
        all.push("--live");
        let (code, text, err) = explain(&host.name, &agent, dir, &all);
        assert_eq!(code, 0, "{args:?}: {text}{err}\n{}", ruleset(&host.name));
        assert!(text.contains("live: model and kernel agree"), "{text}");
        assert!(!text.contains("MISSING"), "{text}");
    }

    // --probe: a real connection from the source pod meets what the model
    // says, and a deciding drop counts it
    let (code, text, err) = explain(
        &host.name,
        &agent,
        dir,
        &["shop/client", "shop/web", "--live", "--probe"],
    );
    assert_eq!(code, 0, "{text}{err}");
    assert!(
        text.contains(&format!("probe: TCP to {VIP}:80: connected")),
        "{text}"
    );
    for (source, port) in [("other/outsider", "8080"), ("shop/client", "9090")] {
        let v = explain_json(
            &host.name,
            &agent,
            dir,
            &[source, "shop/server", port, "--live", "--probe"],
        );
        let probe = &v["probe"];
        assert_eq!(probe["outcome"], "timed_out", "{v}");
        assert_eq!(probe["agrees"], true, "{v}");
        let counted = probe["counters"]
            .as_array()
            .expect("counters")
            .iter()
            .any(|c| {
                c["rule"].as_str().is_some_and(|r| r.ends_with(" drop"))
                    && c["after"].as_u64() > c["before"].as_u64()
            });
        assert!(counted, "the deciding drop did not count the probe: {v}");
    }

    // the ANP's Deny rule deleted behind the agent's back
    let v = explain_json(
        &host.name,
        &agent,
        dir,
        &["other/outsider", "shop/server", "8080", "--live"],
    );
    let live = &v["live"];
    assert_eq!(live["agrees"], true, "{v}");
    let deny = live["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["expected"]["verdict"] == "drop")
        .unwrap_or_else(|| panic!("no drop rule looked for: {v}"));
    let chain = deny["expected"]["chain"]
        .as_str()
        .expect("chain")
        .to_string();
    assert_eq!(chain, format!("in.{server_ip}"));
    let handle = deny["found"]["handle"]
        .as_u64()
        .expect("handle")
        .to_string();
    let status = Command::new("ip")
        .args(["netns", "exec", &host.name, "nft", "delete", "rule", "ip"])
        .args(["nimbess-policy", &chain, "handle", &handle])
        .status()
        .expect("nft");
    assert!(status.success());
    let (code, text, err) = explain(
        &host.name,
        &agent,
        dir,
        &["other/outsider", "shop/server", "8080", "--live"],
    );
    assert_eq!(code, 1, "{text}{err}");
    assert!(text.contains("MODEL AND KERNEL DISAGREE"), "{text}");
    assert!(
        text.contains(&format!(
            "model and kernel disagree: ip nimbess-policy {chain}: ip saddr {} drop missing",
            ips[2]
        )),
        "{text}"
    );
    let v = explain_json(
        &host.name,
        &agent,
        dir,
        &["other/outsider", "shop/server", "8080", "--live"],
    );
    assert_eq!(v["live"]["agrees"], false, "{v}");
    // the model still says denied: the kernel is what is wrong, and traffic shows it
    assert_eq!(v["explanation"]["paths"][0]["verdict"], "denied", "{v}");
    let (code, text, err) = explain(
        &host.name,
        &agent,
        dir,
        &["other/outsider", "shop/server", "8080", "--live", "--probe"],
    );
    assert_eq!(code, 1, "{text}{err}");
    assert!(
        text.contains("model and kernel disagree: the model says denied, the probe met connected"),
        "{text}"
    );
    assert_eq!(
        one(&outsider, SocketAddrV4::new(server_ip, 8080), true),
        "server"
    );
}
