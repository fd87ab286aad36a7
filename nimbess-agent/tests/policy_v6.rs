//! A NetworkPolicy with an IPv6 `ipBlock` in real traffic: pods of a
//! dual-stack network (the agent in a namespace playing the host, the
//! policy and Pods from `--resources dir:PATH`); the policy lets in what
//! its IPv6 block holds minus its `except`, so one client reaches the
//! server on IPv6 and the other, in the `except`, is dropped; on IPv4 the
//! block holds nobody, so both are kept out. Needs root.

mod support;
mod traffic;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{AgentProcess, Netns, policy_chains_in, unique};
use traffic::{answer_within, in_netns, serve_on6};

/// The IPv4 and IPv6 addresses of a dual-stack CNI result.
fn both_addresses(result: &Value) -> (Ipv4Addr, Ipv6Addr) {
    let host = |i: usize| {
        let cidr = result["ips"][i]["address"].as_str().expect("address");
        cidr.split('/').next().expect("host").to_string()
    };
    (
        host(0).parse().expect("an IPv4 address first"),
        host(1).parse().expect("an IPv6 address second"),
    )
}

/// One connection from the pod `from` to `dst`: the answer, "refused" or
/// "timeout". What should answer gets 10 s (a loaded machine), what should
/// not 1 s.
fn one(from: &Netns, dst: SocketAddr, expect_answer: bool) -> String {
    let patience = Duration::from_secs(if expect_answer { 10 } else { 1 });
    in_netns(&from.path(), move || answer_within(dst, patience))
}

/// A Pod object labelled `role`.
fn pod_yaml(name: &str, role: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, labels: {{role: {role}}}}}\nspec: {{containers: [{{name: c, image: x}}]}}\n---\n"
    )
}

/// Write (or with `None` remove) the policy file and wait until the
/// agent's `ip6` policy chains are `want`.
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
        let have = policy_chains_in(host, "ip6");
        if have == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "ip6 policy chains {have:?}, want {want:?}\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_ipv6_ip_block_admits_one_client_and_drops_the_other() {
    if !support::root(
        "an_ipv6_ip_block_admits_one_client_and_drops_the_other",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("p6h");
    let resources = tempfile::tempdir().expect("tempdir");
    let net = unique("p6");
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {net}\n    subnets: [10.233.0.0/24, 'fd00:233::/64']\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let flag = format!("dir:{}", resources.path().display());
    let agent =
        AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &["--resources", &flag]);
    let (server, admitted, dropped) = (Netns::new("p6s"), Netns::new("p6a"), Netns::new("p6d"));
    let mut ips = Vec::new();
    for (pod, name) in [
        (&server, "server"),
        (&admitted, "admitted"),
        (&dropped, "dropped"),
    ] {
        let (code, result) =
            agent.cni_for_pod("ADD", &net, &pod.name, &pod.path(), ("default", name));
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        ips.push(both_addresses(&result));
    }
    serve_on6(&server.path(), "server", 8080);
    let pods = pod_yaml("server", "server")
        + &pod_yaml("admitted", "client")
        + &pod_yaml("dropped", "client");
    std::fs::write(resources.path().join("pods.yaml"), pods).expect("pods");
    let (server4, server6) = ips[0];
    let at6 = SocketAddr::new(server6.into(), 8080);
    let at4 = SocketAddr::new(server4.into(), 8080);
    assert_eq!(one(&dropped, at6, true), "server", "no policy: open");

    // the server admits fd00:233::/64 except the dropped client's address
    let policy = format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: v6-block, namespace: default}}\nspec:\n  podSelector: {{matchLabels: {{role: server}}}}\n  policyTypes: [Ingress]\n  ingress:\n  - from:\n    - ipBlock: {{cidr: 'fd00:233::/64', except: ['{}/128']}}\n    ports: [{{protocol: TCP, port: 8080}}]\n",
        ips[2].1
    );
    let chain = format!("in.{}", server6.to_string().replace(':', "-"));
    publish_policy(
        resources.path(),
        &host.name,
        Some(&policy),
        std::slice::from_ref(&chain),
        &agent,
    );
    assert_eq!(
        one(&admitted, at6, true),
        "server",
        "in the block: admitted"
    );
    assert_eq!(
        one(&dropped, at6, false),
        "timeout",
        "in the except: dropped"
    );
    // IPv4: the IPv6 block holds nobody, the policy isolates the server
    assert_eq!(one(&admitted, at4, false), "timeout", "IPv4 kept out");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // drift: the server's IPv6 ingress chain flushed by hand is named,
    // then rendered again
    let ok = Command::new("ip")
        .args(["netns", "exec", &host.name, "nft", "flush", "chain", "ip6"])
        .args(["nimbess-policy", &chain])
        .status()
        .expect("nft");
    assert!(ok.success());
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("policy: chain {chain} holds 0 rules, the model 2")),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(
        one(&dropped, at6, false),
        "timeout",
        "the policy holds again"
    );
    assert_eq!(one(&admitted, at6, true), "server");

    // the policy removed: open on both families, the ip6 table gone
    publish_policy(resources.path(), &host.name, None, &[], &agent);
    assert_eq!(one(&dropped, at6, true), "server");
    assert_eq!(one(&dropped, at4, true), "server");
}
