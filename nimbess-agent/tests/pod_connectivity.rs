//! Pods beyond their own network, as a Kubernetes CNI gives them: a default
//! route to the network's gateway on the host, masquerade towards the
//! outside (a namespace playing "the internet", with no route back to the
//! pods), the host reaching its pods, and pod networks still isolated from
//! each other through the host — for bridged (`kind: l2`) and routed
//! (`kind: l3`) networks alike. The agent runs in a namespace of its own
//! (its forwarding, rules and nftables stay there). Needs root.

mod support;

use std::net::Ipv4Addr;
use std::process::Command;

use nimbess_agent::driver::kernel::routed::route_table;
use support::{AgentProcess, Netns, first_ip, ping, unique};

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

/// The host namespace joined to an "internet" namespace by a veth:
/// 198.51.100.1 on the host, 198.51.100.2 outside, no route back to pods.
fn host_and_internet() -> (Netns, Netns) {
    let (host, internet) = (Netns::new("ch"), Netns::new("ci"));
    let (up, wan) = (unique("up"), unique("wan"));
    let ok = Command::new("ip")
        .args(["link", "add", &up, "netns", &host.name, "type", "veth"])
        .args(["peer", "name", &wan, "netns", &internet.name])
        .status()
        .expect("ip link add");
    assert!(ok.success());
    ip(&host.name, &["link", "set", "lo", "up"]);
    ip(&host.name, &["addr", "add", "198.51.100.1/24", "dev", &up]);
    ip(&host.name, &["link", "set", &up, "up"]);
    ip(
        &internet.name,
        &["addr", "add", "198.51.100.2/24", "dev", &wan],
    );
    ip(&internet.name, &["link", "set", &wan, "up"]);
    (host, internet)
}

const OUTSIDE: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);

#[test]
fn pods_reach_the_outside_through_masquerade_and_the_host_reaches_them() {
    if !support::root(
        "pods_reach_the_outside_through_masquerade_and_the_host_reaches_them",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let (host, _internet) = host_and_internet();
    let (blue, red) = (unique("cb"), unique("cr"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {blue}\n    subnet: 10.220.0.0/24\n  - name: {red}\n    subnet: 10.221.0.0/24\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let mut agent = AgentProcess::start_with(&yaml, "kernel", &[&blue, &red], &prefix, &[]);
    let (a, b) = (Netns::new("ca"), Netns::new("cb"));
    let (code, ra) = agent.cni("ADD", &blue, &a.name, &a.path());
    assert_eq!(code, 0, "{ra}\n{}", agent.log());
    let (code, rb) = agent.cni("ADD", &red, &b.name, &b.path());
    assert_eq!(code, 0, "{rb}");
    assert_eq!(
        ra["routes"],
        serde_json::json!([
            {"dst": "10.220.0.0/24"},
            {"dst": "0.0.0.0/0", "gw": "10.220.0.1"},
        ]),
        "the result names the default route"
    );

    assert_eq!(
        ping(&a.path(), Ipv4Addr::new(10, 220, 0, 1), 2),
        2,
        "the gateway answers\n{}",
        agent.log()
    );
    assert_eq!(ping(&a.path(), OUTSIDE, 2), 2, "the outside, masqueraded");
    assert_eq!(ping(&b.path(), OUTSIDE, 2), 2, "from the other network too");
    assert_eq!(
        ping(&host.path(), first_ip(&ra), 2),
        2,
        "the host reaches its pod"
    );
    assert_eq!(
        ping(&a.path(), first_ip(&rb), 2),
        0,
        "pod networks stay isolated through the host"
    );
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // drift: the masquerade chain deleted behind the agent's back is named,
    // then rendered again, and the outside answers again
    for verb in ["flush", "delete"] {
        let ok = Command::new("ip")
            .args(["netns", "exec", &host.name, "nft", verb, "chain", "ip"])
            .args(["nimbess", "postrouting"])
            .status()
            .expect("nft");
        assert!(ok.success(), "nft {verb} chain");
    }
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("egress: chain postrouting of table ip nimbess is missing"),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert_eq!(ping(&a.path(), OUTSIDE, 2), 2, "masqueraded again");

    // the outside excepted from masquerade: the pods' own addresses arrive
    // there, and the outside has no route back
    std::fs::write(
        &agent.config,
        format!("{yaml}masquerade:\n  except: [198.51.100.0/24]\n"),
    )
    .expect("config");
    agent.kill9();
    agent.spawn();
    assert_eq!(
        ping(&a.path(), OUTSIDE, 2),
        0,
        "not masqueraded, no way back"
    );
    assert_eq!(ping(&host.path(), first_ip(&ra), 2), 2);
}

/// Echo replies out of three: at least one means reached (a busy machine
/// may lose one), none means not.
fn reaches(netns: &Netns, dst: Ipv4Addr) -> bool {
    ping(&netns.path(), dst, 3) > 0
}

#[test]
fn routed_pods_get_a_gateway_a_default_route_masquerade_and_stay_isolated() {
    if !support::root(
        "routed_pods_get_a_gateway_a_default_route_masquerade_and_stay_isolated",
        "creates network namespaces, veths, ip rules and nftables rules",
    ) {
        return;
    }
    let (host, _internet) = host_and_internet();
    let (green, violet, blue) = (unique("cg"), unique("cv"), unique("cb"));
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {green}\n    subnet: 10.222.0.0/24\n    kind: l3\n  \
         - name: {violet}\n    subnet: 10.224.0.0/24\n    kind: l3\n  \
         - name: {blue}\n    subnet: 10.223.0.0/24\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let mut agent =
        AgentProcess::start_with(&yaml, "kernel", &[&green, &violet, &blue], &prefix, &[]);
    let (g1, g2, v, b) = (
        Netns::new("cg"),
        Netns::new("cg"),
        Netns::new("cv"),
        Netns::new("cb"),
    );
    let add = |net: &str, pod: &Netns| {
        let (code, result) = agent.cni("ADD", net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        result
    };
    let (r1, r2, rv, rb) = (
        add(&green, &g1),
        add(&green, &g2),
        add(&violet, &v),
        add(&blue, &b),
    );
    assert_eq!(
        r1["routes"],
        serde_json::json!([
            {"dst": "10.222.0.0/24"},
            {"dst": "0.0.0.0/0", "gw": "10.222.0.1"},
        ]),
        "the result names the default route"
    );
    let gateway = Ipv4Addr::new(10, 222, 0, 1);
    assert!(
        reaches(&g1, gateway),
        "the gateway answers\n{}",
        agent.log()
    );
    assert!(
        reaches(&g1, first_ip(&r2)),
        "its own network, through the VRF"
    );
    assert!(reaches(&g1, OUTSIDE), "the outside, masqueraded");
    assert!(reaches(&v, OUTSIDE), "from the other routed network too");
    assert!(reaches(&host, first_ip(&r1)), "the host reaches its pod");
    assert!(!reaches(&g1, first_ip(&rv)), "routed networks stay apart");
    assert!(!reaches(&v, first_ip(&r1)), "both ways");
    assert!(!reaches(&g1, first_ip(&rb)), "routed cannot reach bridged");
    assert!(!reaches(&b, first_ip(&r1)), "bridged cannot reach routed");
    assert!(reaches(&b, OUTSIDE), "the bridged network still goes out");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // drift: the rule that brings the host (and the outside's replies) into
    // the VRF deleted by hand is named, rendered again, and the host
    // reaches the pod again
    let table = route_table(&green).to_string();
    ip(
        &host.name,
        &["rule", "del", "to", "10.222.0.0/24", "table", &table],
    );
    assert!(!reaches(&host, first_ip(&r1)), "no way in without the rule");
    let (code, out) = agent.cli(&["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "network {green}: rule to 10.222.0.0/24 lookup table {table} is missing"
        )),
        "{out}"
    );
    assert_eq!(
        agent.cli(&["verify"]),
        (0, "no drift\n".to_string()),
        "repaired"
    );
    assert!(reaches(&host, first_ip(&r1)), "the host reaches it again");

    // the outside excepted from masquerade: the routed pod's own address
    // arrives there, and the outside has no route back
    std::fs::write(
        &agent.config,
        format!("{yaml}masquerade:\n  except: [198.51.100.0/24]\n"),
    )
    .expect("config");
    agent.kill9();
    agent.spawn();
    assert!(!reaches(&g1, OUTSIDE), "not masqueraded, no way back");
    assert!(
        reaches(&host, first_ip(&r1)),
        "the adopted port still has its gateway"
    );
}
