//! Pods beyond their own network, as a Kubernetes CNI gives them: a default
//! route to the network's gateway on the host, masquerade towards the
//! outside (a namespace playing "the internet", with no route back to the
//! pods), the host reaching its pods, and pod networks still isolated from
//! each other through the host. The agent runs in a namespace of its own
//! (its forwarding and nftables stay there). Needs root.

mod support;

use std::net::Ipv4Addr;
use std::process::Command;

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
