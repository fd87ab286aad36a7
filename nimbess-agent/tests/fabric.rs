//! The multi-host fabric: agents sharing one etcd (Debian's `etcd-server`,
//! started by the test). Without root, two agents on the `sim` driver show
//! the shared state (addresses by compare-and-swap, every host's ports,
//! DEL seen everywhere); with root, two hosts — each agent in its own
//! network namespace, joined by a veth link, etcd on the link — carry a
//! ping between pods of different hosts over VXLAN.

mod support;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use nephrite_test_services::Etcd;
use serde_json::Value;
use support::{AgentProcess, Netns, first_ip, ping, unique};

fn config(driver: &str, network: &str, subnet: &str) -> String {
    format!("driver: {driver}\nnetworks:\n  - name: {network}\n    subnet: {subnet}\n")
}

/// The `ports -o json` of an agent.
fn ports(agent: &AgentProcess) -> Vec<Value> {
    let (code, out) = agent.cli(&["ports", "-o", "json"]);
    assert_eq!(code, 0, "ports failed: {out}\n{}", agent.log());
    serde_json::from_str(&out).expect("ports JSON")
}

/// Wait until `agent` lists exactly `n` ports (the fabric converges asynchronously).
fn wait_for_ports(agent: &AgentProcess, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = ports(agent);
        if now.len() == n {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "agent lists {} ports, expected {n}\n{}",
            now.len(),
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_agents_share_addresses_ports_and_deletions() {
    let etcd = match Etcd::start() {
        Ok(etcd) => etcd,
        Err(e) => return e.skip("two_agents_share_addresses_ports_and_deletions"),
    };
    let store = format!("etcd://{}", etcd.client_addr());
    let net = unique("fab");
    let cfg = config("sim", &net, "10.77.0.0/24");
    let a = AgentProcess::start_with(
        &cfg,
        "sim",
        &[&net],
        &[],
        &["--store", &store, "--host-name", "a"],
    );
    let b = AgentProcess::start_with(
        &cfg,
        "sim",
        &[&net],
        &[],
        &["--store", &store, "--host-name", "b"],
    );
    // the sim driver needs an existing netns path only
    let netns = tempfile::NamedTempFile::new().expect("netns stand-in");
    let netns = netns.path().display().to_string();

    // 2 x 25 concurrent ADDs across the two hosts
    let results: Vec<(i32, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|i| {
                let agent = if i % 2 == 0 { &a } else { &b };
                let (net, netns) = (&net, &netns);
                s.spawn(move || agent.cni("ADD", net, &format!("c{i:03}"), netns))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ADD thread"))
            .collect()
    });
    let mut addresses = BTreeSet::new();
    for (code, result) in &results {
        assert_eq!(*code, 0, "{result}\nA:\n{}\nB:\n{}", a.log(), b.log());
        addresses.insert(first_ip(result));
    }
    assert_eq!(addresses.len(), 50, "50 distinct addresses: {addresses:?}");
    assert!(
        !addresses.contains(&Ipv4Addr::new(10, 77, 0, 1)),
        "never the gateway"
    );

    // every host lists every host's ports
    for agent in [&a, &b] {
        let listed = wait_for_ports(agent, 50);
        let hosts: BTreeSet<String> = listed
            .iter()
            .map(|p| p["remote"]["host"].as_str().unwrap_or("local").to_string())
            .collect();
        assert_eq!(hosts.len(), 2, "local and one remote host: {hosts:?}");
    }

    for agent in [&a, &b] {
        let (code, out) = agent.cli(&["verify"]);
        assert_eq!(code, 0, "remote ports are no drift: {out}");
    }

    // a DEL on B is seen by A, and the address is free for A to hand out again
    let (code, out) = b.cni("DEL", &net, "c001", &netns);
    assert_eq!(code, 0, "{out}");
    let freed = first_ip(&results[1].1);
    let listed = wait_for_ports(&a, 49);
    assert!(
        !listed.iter().any(|p| p["container_id"] == "c001"),
        "A still lists B's deleted port"
    );
    let (code, again) = a.cni("ADD", &net, "c100", &netns);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        first_ip(&again),
        freed,
        "the freed address is the lowest free one"
    );
    wait_for_ports(&b, 50);

    // an ADD of a container another host holds is refused
    let (code, out) = a.cni("ADD", &net, "c003", &netns);
    assert_ne!(code, 0, "{out}");
    assert_eq!(out["code"], 7, "c003 is on host b: {out}");
}

fn root(test: &str) -> bool {
    match nephrite_test_services::require_root(
        "creates network namespaces, veths and VXLAN devices",
    ) {
        Ok(()) => true,
        Err(e) => {
            e.skip(test);
            false
        }
    }
}

fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().expect("ip");
    assert!(ok.success(), "ip {args:?}");
}

#[test]
fn a_pod_on_host_a_pings_a_pod_on_host_b_over_vxlan() {
    if !root("a_pod_on_host_a_pings_a_pod_on_host_b_over_vxlan") {
        return;
    }
    // two hosts joined by a veth link: 10.199.x.1 and 10.199.x.2
    let (host_a, host_b) = (Netns::new("ha"), Netns::new("hb"));
    let x = std::process::id() % 200 + 20;
    let (ul_a, ul_b) = (format!("10.199.{x}.1"), format!("10.199.{x}.2"));
    let link_a = unique("ul");
    let link_b = unique("ul");
    ip(&[
        "link",
        "add",
        &link_a,
        "netns",
        &host_a.name,
        "type",
        "veth",
        "peer",
        "name",
        &link_b,
        "netns",
        &host_b.name,
    ]);
    for (ns, link, addr) in [(&host_a, &link_a, &ul_a), (&host_b, &link_b, &ul_b)] {
        ip(&[
            "-n",
            &ns.name,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            link,
        ]);
        ip(&["-n", &ns.name, "link", "set", link, "up"]);
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
    }
    let etcd = match Etcd::start_in_netns(&host_a.name, ul_a.parse().expect("ip")) {
        Ok(etcd) => etcd,
        Err(e) => return e.skip("a_pod_on_host_a_pings_a_pod_on_host_b_over_vxlan"),
    };
    let store = format!("etcd://{}", etcd.client_addr());
    let net = unique("fab");
    let tagged = unique("fabq");
    let cfg = format!(
        "{}  - name: {tagged}\n    subnet: 10.79.0.0/24\n    vlan: 100\n",
        config("kernel", &net, "10.78.0.0/24")
    );
    let agent = |ns: &Netns, name: &str| {
        AgentProcess::start_with(
            &cfg,
            "kernel",
            &[],
            &["ip", "netns", "exec", &ns.name],
            &["--store", &store, "--host-name", name],
        )
    };
    let (a, b) = (agent(&host_a, "a"), agent(&host_b, "b"));
    let (pa, pb, pb2) = (Netns::new("pa"), Netns::new("pb"), Netns::new("pb"));
    let (code, ra) = a.cni("ADD", &net, &pa.name, &pa.path());
    assert_eq!(code, 0, "{ra}\n{}", a.log());
    let (code, rb) = b.cni("ADD", &net, &pb.name, &pb.path());
    assert_eq!(code, 0, "{rb}\n{}", b.log());
    let (code, rb2) = b.cni("ADD", &net, &pb2.name, &pb2.path());
    assert_eq!(code, 0, "{rb2}\n{}", b.log());
    assert_eq!(
        ra["interfaces"][0]["mtu"], 1450,
        "network MTU less the VXLAN overhead"
    );
    wait_for_ports(&a, 3);
    wait_for_ports(&b, 3);

    assert_eq!(
        ping(&pa.path(), first_ip(&rb), 3),
        3,
        "A's pod reaches B's pod\nA:\n{}\nB:\n{}",
        a.log(),
        b.log()
    );
    assert_eq!(ping(&pb2.path(), first_ip(&ra), 3), 3, "and back");
    assert_eq!(
        ping(&pb.path(), first_ip(&rb2), 3),
        3,
        "B's pods reach each other"
    );

    // a network with a vlan is carried with that id as its VNI
    let (qa, qb) = (Netns::new("qa"), Netns::new("qb"));
    let (code, rqa) = a.cni("ADD", &tagged, &qa.name, &qa.path());
    assert_eq!(code, 0, "{rqa}\n{}", a.log());
    let (code, rqb) = b.cni("ADD", &tagged, &qb.name, &qb.path());
    assert_eq!(code, 0, "{rqb}\n{}", b.log());
    assert_eq!(rqa["interfaces"][0]["mtu"], 1450);
    let out = Command::new("ip")
        .args([
            "-n",
            &host_a.name,
            "-d",
            "-j",
            "link",
            "show",
            &nimbess_agent::naming::vxlan_name(&tagged),
        ])
        .output()
        .expect("ip link show");
    let links: Value = serde_json::from_slice(&out.stdout).expect("ip -j");
    assert_eq!(
        links[0]["linkinfo"]["info_data"]["id"], 100,
        "VNI = vlan: {links}"
    );
    wait_for_ports(&a, 5);
    assert_eq!(
        ping(&qa.path(), first_ip(&rqb), 3),
        3,
        "tagged: A's pod reaches B's pod\nA:\n{}\nB:\n{}",
        a.log(),
        b.log()
    );
    let (code, out) = b.cni("DEL", &tagged, &qb.name, &qb.path());
    assert_eq!(code, 0, "{out}");
    let (code, out) = a.cni("DEL", &tagged, &qa.name, &qa.path());
    assert_eq!(code, 0, "{out}");
    let (code, out) = a.cli(&["verify"]);
    assert_eq!(code, 0, "no drift on A: {out}");

    // 2 x 25 concurrent ADDs across the two hosts: 50 distinct addresses
    let pods: Vec<Netns> = (0..50).map(|_| Netns::new("pz")).collect();
    let results: Vec<(i32, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = pods
            .iter()
            .enumerate()
            .map(|(i, pod)| {
                let agent = if i % 2 == 0 { &a } else { &b };
                let net = &net;
                s.spawn(move || agent.cni("ADD", net, &pod.name, &pod.path()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("ADD thread"))
            .collect()
    });
    let mut addresses: BTreeSet<Ipv4Addr> = [&ra, &rb, &rb2].into_iter().map(first_ip).collect();
    for (code, result) in &results {
        assert_eq!(*code, 0, "{result}\nA:\n{}\nB:\n{}", a.log(), b.log());
        addresses.insert(first_ip(result));
    }
    assert_eq!(addresses.len(), 53, "53 distinct addresses: {addresses:?}");
    wait_for_ports(&a, 53);
    assert_eq!(
        ping(&pods[0].path(), first_ip(&results[49].1), 3),
        3,
        "a concurrently added pod on A reaches one on B"
    );
    for (i, pod) in pods.iter().enumerate() {
        let agent = if i % 2 == 0 { &a } else { &b };
        let (code, out) = agent.cni("DEL", &net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{out}");
    }
    wait_for_ports(&a, 3);

    // a DEL on B is seen by A: the pod is gone from A's view and unreachable
    let (code, out) = b.cni("DEL", &net, &pb.name, &pb.path());
    assert_eq!(code, 0, "{out}");
    wait_for_ports(&a, 2);
    assert_eq!(
        ping(&pa.path(), first_ip(&rb), 2),
        0,
        "a deleted pod answers nobody"
    );
    assert_eq!(
        ping(&pa.path(), first_ip(&rb2), 3),
        3,
        "the other pod of B still answers"
    );
}
