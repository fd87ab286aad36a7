//! Dual-stack pods in real traffic: a network with an IPv4 and an IPv6
//! subnet gives each pod one address of each family, both gateways and
//! both default routes; pods ping each other on both families, the host
//! reaches them on IPv6 through the gateway on the bridge, and addresses
//! survive an agent restart (journal) and are handed out again after DEL.
//! The agent runs in a namespace of its own. Needs root.

mod support;

use std::net::Ipv4Addr;
use std::process::Command;

use serde_json::{Value, json};
use support::{AgentProcess, Netns, ping, unique};

/// Echo replies to `count` IPv6 echo requests from `netns` to `dst`.
fn ping6(netns: &Netns, dst: &str, count: u16) -> u16 {
    let out = Command::new("ip")
        .args(["netns", "exec", &netns.name, "ping", "-6", "-n", "-q"])
        .args(["-c", &count.to_string(), "-i", "0.2", "-W", "1", dst])
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    // "N packets transmitted, M received, ..."
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The addresses of a CNI result, as text.
fn addresses(result: &Value) -> Vec<String> {
    result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .map(|ip| ip["address"].as_str().expect("address").to_string())
        .collect()
}

fn host_of(cidr: &str) -> String {
    cidr.split('/').next().expect("host").to_string()
}

#[test]
fn dual_stack_pods_reach_each_other_on_both_families() {
    if !support::root(
        "dual_stack_pods_reach_each_other_on_both_families",
        "creates network namespaces, veths, bridges and nftables rules",
    ) {
        return;
    }
    let host = Netns::new("dh");
    let net = unique("dd");
    let yaml = format!(
        "driver: kernel\nnetworks:\n  - name: {net}\n    subnets: [10.230.0.0/24, 'fd00:230::/64']\n"
    );
    let prefix = ["ip", "netns", "exec", host.name.as_str()];
    let mut agent = AgentProcess::start_with(&yaml, "kernel", &[&net], &prefix, &[]);
    let (a, b) = (Netns::new("da"), Netns::new("db"));
    let add = |agent: &AgentProcess, pod: &Netns| {
        let (code, result) = agent.cni("ADD", &net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        result
    };
    let (ra, rb) = (add(&agent, &a), add(&agent, &b));
    assert_eq!(
        ra["ips"],
        json!([
            {"address": "10.230.0.2/24", "gateway": "10.230.0.1", "interface": 0},
            {"address": "fd00:230::2/64", "gateway": "fd00:230::1", "interface": 0},
        ]),
        "one address of each family, each with its gateway"
    );
    assert_eq!(
        ra["routes"],
        json!([
            {"dst": "10.230.0.0/24"},
            {"dst": "0.0.0.0/0", "gw": "10.230.0.1"},
            {"dst": "fd00:230::/64"},
            {"dst": "::/0", "gw": "fd00:230::1"},
        ]),
        "both default routes"
    );
    assert_eq!(addresses(&rb), ["10.230.0.3/24", "fd00:230::3/64"]);

    let b4: Ipv4Addr = host_of(&addresses(&rb)[0]).parse().expect("v4");
    let a4: Ipv4Addr = host_of(&addresses(&ra)[0]).parse().expect("v4");
    assert_eq!(ping(&a.path(), b4, 2), 2, "IPv4 a → b\n{}", agent.log());
    assert_eq!(ping(&b.path(), a4, 2), 2, "IPv4 b → a");
    assert_eq!(
        ping6(&a, "fd00:230::3", 3),
        3,
        "IPv6 a → b\n{}",
        agent.log()
    );
    assert_eq!(ping6(&b, "fd00:230::2", 3), 3, "IPv6 b → a");
    assert_eq!(ping6(&a, "fd00:230::1", 2), 2, "the IPv6 gateway answers");
    assert_eq!(
        ping6(&host, "fd00:230::2", 2),
        2,
        "the host reaches its pod on IPv6"
    );
    assert_eq!(ping6(&a, "fd00:230::77", 2), 0, "no pod, no answer");

    // the addresses are journaled: after a restart the agent adopts the
    // pods, they still talk, and a new pod takes the next addresses
    agent.kill9();
    agent.spawn();
    let c = Netns::new("dc");
    let rc = add(&agent, &c);
    assert_eq!(addresses(&rc), ["10.230.0.4/24", "fd00:230::4/64"]);
    assert_eq!(ping6(&c, "fd00:230::2", 3), 3, "IPv6 new pod → adopted pod");
    assert_eq!(ping6(&a, "fd00:230::3", 2), 2, "IPv6 between adopted pods");

    // DEL frees both addresses; the next pod takes them
    let (code, out) = agent.cni("DEL", &net, &b.name, &b.path());
    assert_eq!(code, 0, "{out}");
    let d = Netns::new("dd");
    let rd = add(&agent, &d);
    assert_eq!(addresses(&rd), ["10.230.0.3/24", "fd00:230::3/64"]);
    assert_eq!(ping6(&d, "fd00:230::4", 3), 3, "IPv6 d → c");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    // CNI CHECK holds the pod to both addresses: the IPv6 one removed by
    // hand is named
    assert_eq!(agent.cni("CHECK", &net, &d.name, &d.path()).0, 0);
    let ok = Command::new("ip")
        .args([
            "netns",
            "exec",
            &d.name,
            "ip",
            "-6",
            "addr",
            "del",
            "fd00:230::3/64",
        ])
        .args(["dev", "eth0"])
        .status()
        .expect("ip");
    assert!(ok.success());
    let (code, out) = agent.cni("CHECK", &net, &d.name, &d.path());
    assert_ne!(code, 0, "{out}");
    assert!(
        out.to_string()
            .contains("eth0 does not hold fd00:230::3/64"),
        "{out}"
    );
}

#[test]
fn an_ipv6_only_network_is_refused_with_its_name() {
    let net = unique("d6");
    let yaml = format!("driver: sim\nnetworks:\n  - name: {net}\n    subnets: ['fd00:231::/64']\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("agent.yaml");
    std::fs::write(&config, yaml).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_nimbess-agent"))
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("s"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .expect("agent");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "network {net}: an IPv6-only network (fd00:231::/64) is not supported"
        )),
        "{err}"
    );
}
