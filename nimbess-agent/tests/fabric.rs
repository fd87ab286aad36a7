//! The multi-host fabric: agents sharing one etcd (Debian's `etcd-server`,
//! started by the test). Without root, two agents on the `sim` driver show
//! the shared state (addresses by compare-and-swap, every host's ports,
//! DEL seen everywhere); with root, two hosts — each agent in its own
//! network namespace, joined by a veth link, etcd on the link — carry a
//! ping between pods of different hosts over VXLAN.

#[path = "support/fabric_hosts.rs"]
mod fabric_hosts;
mod support;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::process::Command;

use fabric_hosts::{Underlay, ports, two_hosts, wait_for_ports};
use nephrite_test_services::Etcd;
use serde_json::Value;
use support::{AgentProcess, Netns, first_ip, ping, unique};

fn config(driver: &str, network: &str, subnet: &str) -> String {
    format!("driver: {driver}\nnetworks:\n  - name: {network}\n    subnet: {subnet}\n")
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
    support::root(test, "creates network namespaces, veths and VXLAN devices")
}

#[test]
fn a_pod_on_host_a_pings_a_pod_on_host_b_over_vxlan() {
    if !root("a_pod_on_host_a_pings_a_pod_on_host_b_over_vxlan") {
        return;
    }
    let Some(hosts) = two_hosts(
        "a_pod_on_host_a_pings_a_pod_on_host_b_over_vxlan",
        Underlay::V4,
    ) else {
        return;
    };
    let (store, host_a, host_b) = (hosts.store(), &hosts.a, &hosts.b);
    let net = unique("fab");
    let tagged = unique("fabq");
    let (routed, routed2) = (unique("fabr"), unique("fabs"));
    let cfg = format!(
        "{}  - name: {tagged}\n    subnet: 10.79.0.0/24\n    vlan: 100\n\
         \x20 - name: {routed}\n    subnet: 10.81.0.0/24\n    kind: l3\n\
         \x20 - name: {routed2}\n    subnet: 10.82.0.0/24\n    kind: l3\n",
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
    let (a, b) = (agent(host_a, "a"), agent(host_b, "b"));
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
    wait_for_ports(&b, 5);
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

    routed_networks_span_the_hosts(&a, &b, &routed, &routed2, &first_ip(&rb));

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
    // both hosts must know both pods (no learning: B answers only a MAC it was told)
    wait_for_ports(&a, 53);
    wait_for_ports(&b, 53);
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

/// `kind: l3` across two hosts: a pod on A reaches a pod of its network on
/// B through the network's VRF and VXLAN device; a pod of another routed
/// network on B and a pod of an L2 network on B stay unreachable, though
/// the pod has a default route; `verify` is clean on both hosts (the remote
/// routes are the model's); a DEL on B withdraws the route on A.
fn routed_networks_span_the_hosts(
    a: &AgentProcess,
    b: &AgentProcess,
    routed: &str,
    routed2: &str,
    l2_pod_on_b: &Ipv4Addr,
) {
    let before = ports(a).len();
    let (ra, rb, rc) = (Netns::new("ra"), Netns::new("rb"), Netns::new("rc"));
    let (code, res_a) = a.cni("ADD", routed, &ra.name, &ra.path());
    assert_eq!(code, 0, "{res_a}\n{}", a.log());
    let (code, res_b) = b.cni("ADD", routed, &rb.name, &rb.path());
    assert_eq!(code, 0, "{res_b}\n{}", b.log());
    let (code, res_c) = b.cni("ADD", routed2, &rc.name, &rc.path());
    assert_eq!(code, 0, "{res_c}\n{}", b.log());
    assert_eq!(
        res_a["interfaces"][0]["mtu"], 1450,
        "routed packets cross the hosts in VXLAN too"
    );
    wait_for_ports(a, before + 3);
    wait_for_ports(b, before + 3);
    assert_eq!(
        ping(&ra.path(), first_ip(&res_b), 3),
        3,
        "routed: A's pod reaches B's pod\nA:\n{}\nB:\n{}",
        a.log(),
        b.log()
    );
    assert_eq!(ping(&rb.path(), first_ip(&res_a), 3), 3, "and back");
    // A's pod has a way out of its subnet (its default route), yet the VRF
    // ends other pod networks at its table
    assert_eq!(
        res_a["routes"][1],
        serde_json::json!({"dst": "0.0.0.0/0", "gw": "10.81.0.1"}),
        "{res_a}"
    );
    assert_eq!(
        ping(&ra.path(), first_ip(&res_c), 2),
        0,
        "a pod of another routed network on B is not reachable"
    );
    assert_eq!(
        ping(&ra.path(), *l2_pod_on_b, 2),
        0,
        "a pod of an L2 network on B is not reachable"
    );
    for agent in [a, b] {
        let (code, out) = agent.cli(&["verify"]);
        assert_eq!(code, 0, "routes to remote ports are no drift: {out}");
    }
    let (code, out) = b.cni("DEL", routed, &rb.name, &rb.path());
    assert_eq!(code, 0, "{out}");
    wait_for_ports(a, before + 2);
    assert_eq!(ping(&ra.path(), first_ip(&res_b), 2), 0, "deleted on B");
    let (code, out) = a.cli(&["verify"]);
    assert_eq!(code, 0, "the route to the deleted port is gone: {out}");
    for (agent, net, pod) in [(a, routed, &ra), (b, routed2, &rc)] {
        let (code, out) = agent.cni("DEL", net, &pod.name, &pod.path());
        assert_eq!(code, 0, "{out}");
    }
    wait_for_ports(a, before);
}

/// `nimbess-agent fabric forget-host NAME --store URL`.
fn forget_host(store: &str, host: &str) -> (i32, String) {
    let out = Command::new(support::AGENT)
        .args(["fabric", "forget-host", host, "--store", store])
        .output()
        .expect("forget-host");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_dead_host_leaves_the_fabric_keeps_its_addresses_and_comes_back() {
    let etcd = match Etcd::start() {
        Ok(etcd) => etcd,
        Err(e) => {
            return e.skip("a_dead_host_leaves_the_fabric_keeps_its_addresses_and_comes_back");
        }
    };
    let store = format!("etcd://{}", etcd.client_addr());
    let net = unique("live");
    let cfg = config("sim", &net, "10.76.0.0/24");
    let host = |name: &str| {
        let flags = ["--store", &store, "--host-name", name, "--lease-ttl", "2"];
        AgentProcess::start_with(&cfg, "sim", &[&net], &[], &flags)
    };
    let (a, mut b) = (host("a"), host("b"));
    let netns = tempfile::NamedTempFile::new().expect("netns stand-in");
    let netns = netns.path().display().to_string();
    let add = |agent: &AgentProcess, container: &str| {
        let (code, result) = agent.cni("ADD", &net, container, &netns);
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        first_ip(&result)
    };
    add(&a, "a1");
    let b_held = [add(&b, "b1"), add(&b, "b2")];
    wait_for_ports(&a, 3);
    let (code, out) = forget_host(&store, "b");
    assert_ne!(code, 0, "a live host is not forgotten: {out}");
    assert!(out.contains("alive"), "{out}");

    // b dies without DEL: its lease expires and a drops its ports
    b.kill9();
    wait_for_ports(&a, 1);
    // ... but not its addresses: the dead host may still use them
    let fresh = add(&a, "a2");
    assert!(!b_held.contains(&fresh), "{fresh} is still b's");

    // b comes back and publishes its ports again from its own state
    b.spawn();
    wait_for_ports(&a, 4);
    let (code, out) = b.cni("DEL", &net, "b1", &netns);
    assert_eq!(code, 0, "{out}");
    wait_for_ports(&a, 3);

    // b is gone for good: forgetting it releases its claims
    b.kill9();
    wait_for_ports(&a, 2);
    let (code, out) = forget_host(&store, "b");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 address claims released"), "{out}");
    let reused: Vec<Ipv4Addr> = (0..3).map(|i| add(&a, &format!("a{}", i + 3))).collect();
    assert!(
        reused.contains(&b_held[1]),
        "b's last address {} is handed out again: {reused:?}",
        b_held[1]
    );
}

/// Run `ip netns exec NS <args>` and return its stdout.
fn in_host(ns: &Netns, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .args(args)
        .output()
        .expect("ip netns exec");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Host A killed with `-9`: restarted within its lease, its pods keep
/// pinging across the hosts and it sweeps the entries of B's ports deleted
/// meanwhile (and hand-added leftovers `verify` named); killed for good,
/// its lease expires and B drops its ports, FDB entries and routes.
#[test]
fn a_host_killed_and_restarted_keeps_pinging_and_sweeps_what_vanished_meanwhile() {
    let test = "a_host_killed_and_restarted_keeps_pinging_and_sweeps_what_vanished_meanwhile";
    if !root(test) {
        return;
    }
    let Some(hosts) = two_hosts(test, Underlay::V4) else {
        return;
    };
    let (store, host_a, host_b) = (hosts.store(), &hosts.a, &hosts.b);
    let (net, routed) = (unique("swl"), unique("swr"));
    let cfg = format!(
        "{}  - name: {routed}\n    subnet: 10.84.0.0/24\n    kind: l3\n",
        config("kernel", &net, "10.83.0.0/24")
    );
    let agent = |ns: &Netns, name: &str| {
        AgentProcess::start_with(
            &cfg,
            "kernel",
            &[],
            &["ip", "netns", "exec", &ns.name],
            &["--store", &store, "--host-name", name, "--lease-ttl", "5"],
        )
    };
    let (mut a, b) = (agent(host_a, "a"), agent(host_b, "b"));
    let add = |agent: &AgentProcess, network: &str, pod: &Netns| {
        let (code, result) = agent.cni("ADD", network, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        result
    };
    let (pa, ra) = (Netns::new("pa"), Netns::new("ra"));
    let (pb, pb2, rb, rb2) = (
        Netns::new("pb"),
        Netns::new("pb"),
        Netns::new("rb"),
        Netns::new("rb"),
    );
    let (res_pa, res_ra) = (add(&a, &net, &pa), add(&a, &routed, &ra));
    let (res_pb, res_pb2) = (add(&b, &net, &pb), add(&b, &net, &pb2));
    let (res_rb, res_rb2) = (add(&b, &routed, &rb), add(&b, &routed, &rb2));
    wait_for_ports(&a, 6);
    wait_for_ports(&b, 6);
    assert_eq!(ping(&pa.path(), first_ip(&res_pb), 2), 2, "{}", a.log());
    assert_eq!(ping(&ra.path(), first_ip(&res_rb), 2), 2, "{}", a.log());

    // entries no remote port needs, added by hand, are drift
    let (l2_dev, l3_dev) = (
        nimbess_agent::naming::vxlan_name(&net),
        nimbess_agent::naming::vxlan_name(&routed),
    );
    let table = nimbess_agent::driver::kernel::routed::route_table(&routed).to_string();
    let b_underlay = ports(&a)
        .iter()
        .find_map(|p| p["remote"]["underlay"].as_str().map(str::to_string))
        .expect("a remote port with its host's underlay");
    let stray_mac = "02:00:00:00:00:99";
    in_host(
        host_a,
        &[
            "bridge",
            "fdb",
            "add",
            stray_mac,
            "dev",
            &l2_dev,
            "dst",
            &b_underlay,
            "self",
            "permanent",
        ],
    );
    in_host(
        host_a,
        &[
            "ip",
            "route",
            "add",
            "10.84.0.99/32",
            "dev",
            &l3_dev,
            "table",
            &table,
        ],
    );
    let (code, out) = a.cli(&["verify"]);
    assert_eq!(code, 1, "leftovers are drift: {out}");
    assert!(
        out.contains(stray_mac) && out.contains("10.84.0.99"),
        "{out}"
    );

    // A dies; B's second pods go away while A is down
    a.kill9();
    for (network, pod) in [(&net, &pb2), (&routed, &rb2)] {
        let (code, out) = b.cni("DEL", network, &pod.name, &pod.path());
        assert_eq!(code, 0, "{out}");
    }
    a.spawn();
    wait_for_ports(&a, 4);
    let (code, out) = a.cli(&["verify"]);
    assert_eq!(
        code,
        0,
        "A swept what vanished while it was down: {out}\n{}",
        a.log()
    );
    let fdb = in_host(host_a, &["bridge", "fdb", "show", "dev", &l2_dev]);
    let gone_mac = res_pb2["interfaces"][0]["mac"].as_str().expect("mac");
    assert!(
        !fdb.contains(gone_mac) && !fdb.contains(stray_mac),
        "no FDB entry of a vanished port: {fdb}"
    );
    assert!(
        fdb.contains(res_pb["interfaces"][0]["mac"].as_str().expect("mac")),
        "the live remote port keeps its entries: {fdb}"
    );
    let routes = in_host(host_a, &["ip", "route", "show", "table", &table]);
    let gone_ip = first_ip(&res_rb2).to_string();
    assert!(
        !routes.contains(&format!("{gone_ip} ")) && !routes.contains("10.84.0.99"),
        "no route of a vanished port: {routes}"
    );

    // the pods of the restarted host keep pinging across the hosts
    wait_for_ports(&b, 4);
    assert_eq!(ping(&pa.path(), first_ip(&res_pb), 3), 3, "{}", a.log());
    assert_eq!(ping(&pb.path(), first_ip(&res_pa), 3), 3, "{}", b.log());
    assert_eq!(ping(&ra.path(), first_ip(&res_rb), 3), 3, "{}", a.log());
    assert_eq!(ping(&rb.path(), first_ip(&res_ra), 3), 3, "{}", b.log());
    assert_eq!(
        ping(&pa.path(), first_ip(&res_pb2), 2),
        0,
        "deleted meanwhile"
    );

    // A dies for good: at its lease's expiry B drops A's ports, kernel entries included
    a.kill9();
    wait_for_ports(&b, 2);
    let (code, out) = b.cli(&["verify"]);
    assert_eq!(code, 0, "{out}");
    let fdb = in_host(host_b, &["bridge", "fdb", "show", "dev", &l2_dev]);
    let a_mac = res_pa["interfaces"][0]["mac"].as_str().expect("mac");
    assert!(!fdb.contains(a_mac), "A's MAC left B's FDB: {fdb}");
    let routes = in_host(host_b, &["ip", "route", "show", "table", &table]);
    let a_ip = first_ip(&res_ra).to_string();
    assert!(
        !routes.contains(&format!("{a_ip} ")),
        "A's route left B's table: {routes}"
    );
    assert_eq!(ping(&pb.path(), first_ip(&res_pa), 1), 0, "A is gone");
}
