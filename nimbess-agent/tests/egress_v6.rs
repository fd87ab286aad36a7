//! IPv6 leaving the pod networks, in real traffic: the agent (in a
//! namespace playing the host) has two dual-stack networks, one with
//! `egress6: masquerade` (the default) and one with `egress6: routed`; an
//! "outside" namespace joined to the host by a veth knows no route back to
//! the pods' IPv6 subnets. A pod of the masquerading network reaches it
//! (its packets leave behind the host's address), a pod of the routed
//! network does not (they leave with its own); pods of the two networks
//! do not reach each other through the host. Needs root.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{AgentProcess, Netns, unique};

fn ip(netns: &str, args: &[&str]) {
    let out = Command::new("ip")
        .args(["netns", "exec", netns, "ip"])
        .args(args)
        .output()
        .expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?} in {netns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Echo replies to `count` IPv6 echo requests from `netns` to `dst`.
fn ping6(netns: &Netns, dst: &str, count: u16) -> u16 {
    let out = Command::new("ip")
        .args(["netns", "exec", &netns.name, "ping", "-6", "-n", "-q"])
        .args(["-c", &count.to_string(), "-i", "0.2", "-W", "1", dst])
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The host namespace joined to an "outside" namespace by a veth:
/// 2001:db8:99::1 on the host, 2001:db8:99::2 outside, no route back to pods.
fn host_and_outside() -> (Netns, Netns) {
    let (host, outside) = (Netns::new("e6h"), Netns::new("e6o"));
    let (up, wan) = (unique("up"), unique("wan"));
    let ok = Command::new("ip")
        .args(["link", "add", &up, "netns", &host.name, "type", "veth"])
        .args(["peer", "name", &wan, "netns", &outside.name])
        .status()
        .expect("ip link add");
    assert!(ok.success());
    ip(&host.name, &["link", "set", "lo", "up"]);
    ip(
        &host.name,
        &["addr", "add", "2001:db8:99::1/64", "dev", &up, "nodad"],
    );
    ip(&host.name, &["link", "set", &up, "up"]);
    ip(
        &outside.name,
        &["addr", "add", "2001:db8:99::2/64", "dev", &wan, "nodad"],
    );
    ip(&outside.name, &["link", "set", &wan, "up"]);
    (host, outside)
}

/// True when the `ip6 nimbess` table exists in `netns`.
fn table6(netns: &str) -> bool {
    Command::new("ip")
        .args([
            "netns", "exec", netns, "nft", "list", "table", "ip6", "nimbess",
        ])
        .output()
        .expect("nft")
        .status
        .success()
}

#[test]
fn ipv6_masquerade_lets_a_pod_out_and_routed_egress_keeps_its_address() {
    if !support::root(
        "ipv6_masquerade_lets_a_pod_out_and_routed_egress_keeps_its_address",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let (host, outside) = host_and_outside();
    let (masq, routed) = (unique("em"), unique("er"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {masq}\n    subnets: [10.236.0.0/24, 'fd00:236::/64']\n  - name: {routed}\n    subnets: [10.237.0.0/24, 'fd00:237::/64']\n    egress6: routed\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let agent = AgentProcess::start_with(&yaml, "kernel", &[&masq, &routed], &prefix, &[]);
    let (a, b, a2) = (Netns::new("e6a"), Netns::new("e6b"), Netns::new("e6c"));
    let mut v6 = Vec::new();
    for (pod, net) in [(&a, &masq), (&b, &routed), (&a2, &masq)] {
        let (code, result): (i32, Value) = agent.cni("ADD", net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        let cidr = result["ips"][1]["address"]
            .as_str()
            .expect("an IPv6 address");
        v6.push(cidr.split('/').next().expect("host").to_string());
    }
    // the table follows the networks: wait for it rather than for a log line
    let deadline = Instant::now() + Duration::from_secs(20);
    while !table6(&host.name) {
        assert!(Instant::now() < deadline, "no ip6 nimbess\n{}", agent.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        ping6(&a, "2001:db8:99::2", 3),
        3,
        "masqueraded: the outside answers the host's address\n{}",
        agent.log()
    );
    assert_eq!(
        ping6(&b, "2001:db8:99::2", 2),
        0,
        "routed: the outside has no route back to fd00:237::/64"
    );
    // with a route back, the routed pod's own address gets its answer
    ip(
        &outside.name,
        &["route", "add", "fd00:237::/64", "via", "2001:db8:99::1"],
    );
    assert_eq!(
        ping6(&b, "2001:db8:99::2", 3),
        3,
        "routed with its own address"
    );
    // the networks stay isolated from each other through the host, on IPv6
    // as on IPv4; a pod of the same network is reached
    assert_eq!(ping6(&a, &v6[2], 2), 2, "the same network");
    assert_eq!(ping6(&a, &v6[1], 2), 0, "another network: isolated");
    assert_eq!(ping6(&b, &v6[0], 2), 0, "and back");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // drift: the table deleted behind the agent's back is named, then
    // rendered again
    let ok = Command::new("ip")
        .args([
            "netns", "exec", &host.name, "nft", "delete", "table", "ip6", "nimbess",
        ])
        .status()
        .expect("nft");
    assert!(ok.success());
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("egress: table ip6 nimbess is missing"),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(ping6(&a, "2001:db8:99::2", 2), 2, "masqueraded again");
}
