//! IPv6 across the multi-host fabric (root): two hosts — each agent in its
//! own network namespace, joined by a veth link, etcd on the link — serve a
//! dual-stack L2 network. Pods on different hosts find each other by
//! neighbour discovery over VXLAN, ping and open TCP on IPv6 (and still on
//! IPv4), full-size packets of both families cross the overlay, and a DEL
//! on one host withdraws the pod from the other.

#[path = "support/fabric_hosts.rs"]
mod fabric_hosts;
mod support;
#[path = "traffic/mod.rs"]
mod traffic;

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use fabric_hosts::{TwoHosts, Underlay, two_hosts, wait_for_ports};
use serde_json::Value;
use support::{AgentProcess, Netns, ping, unique};

/// What a pod's TCP server sends every client: enough full-size segments
/// that a path MTU problem cannot hide.
const PAYLOAD: usize = 4 << 20;

/// The pod MTU inside the fabric: the network's 1500 less the VXLAN overhead.
const POD_MTU: usize = 1450;

/// The IPv4 and IPv6 addresses of a dual-stack CNI result.
fn addresses(result: &Value) -> (Ipv4Addr, Ipv6Addr) {
    let ips: Vec<IpAddr> = result["ips"]
        .as_array()
        .expect("ips")
        .iter()
        .map(|ip| {
            let cidr = ip["address"].as_str().expect("address");
            cidr.split('/').next().expect("host").parse().expect("ip")
        })
        .collect();
    match ips[..] {
        [IpAddr::V4(v4), IpAddr::V6(v6)] => (v4, v6),
        _ => panic!("one IPv4 and one IPv6 address: {result}"),
    }
}

/// Echo replies to `count` IPv6 echo requests of `size` payload bytes from
/// `pod` to `dst`, fragmentation forbidden (`-M do`).
fn ping6(pod: &Netns, dst: Ipv6Addr, count: u16, size: usize) -> u16 {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &pod.name, "ping", "-6", "-n", "-q", "-M", "do",
        ])
        .args(["-s", &size.to_string(), "-c", &count.to_string()])
        .args(["-i", "0.2", "-W", "1", &dst.to_string()])
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    // "N packets transmitted, M received, ..."
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// A TCP server in `pod` on `[::]:port` (IPv4 too, as a dual-stack
/// socket) sending [`PAYLOAD`] bytes to every client.
fn serve_bulk(pod: &Netns, port: u16) {
    let listener = traffic::in_netns(&pod.path(), move || {
        TcpListener::bind(SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port)).expect("bind")
    });
    std::thread::spawn(move || {
        let data = vec![0x5a; PAYLOAD];
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(&data);
        }
    });
}

/// The bytes a client in `pod` receives from `dst` (0 when it cannot connect).
fn fetch(pod: &Netns, dst: SocketAddr) -> usize {
    traffic::in_netns(&pod.path(), move || {
        let Ok(mut conn) = TcpStream::connect_timeout(&dst, Duration::from_secs(2)) else {
            return 0;
        };
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got);
        got.len()
    })
}

/// The MAC `pod`'s eth0 has for `dst` in its neighbour table, when any.
fn neighbour_mac(pod: &Netns, dst: Ipv6Addr) -> Option<String> {
    let out = Command::new("ip")
        .args(["-n", &pod.name, "-6", "-j", "neigh", "show", "dev", "eth0"])
        .output()
        .expect("ip neigh");
    let neighbours: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    neighbours
        .as_array()?
        .iter()
        .find(|n| n["dst"] == dst.to_string())
        .and_then(|n| n["lladdr"].as_str().map(str::to_string))
}

/// Dual-stack pods on two hosts over a fabric whose underlay is `family`.
fn dual_stack_pods_talk_across_the_hosts(test: &str, family: Underlay) {
    if !support::root(test, "creates network namespaces, veths and VXLAN devices") {
        return;
    }
    let Some(hosts) = two_hosts(test, family) else {
        return;
    };
    let TwoHosts {
        a: host_a,
        b: host_b,
        ..
    } = &hosts;
    let store = hosts.store();
    let (net, v4only) = (unique("f6d"), unique("f6v"));
    let cfg = format!(
        "driver: kernel\nnetworks:\n  - name: {net}\n    subnets: [10.86.0.0/24, 'fd00:86::/64']\n\
         \x20 - name: {v4only}\n    subnet: 10.87.0.0/24\n"
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
    let add = |agent: &AgentProcess, network: &str, pod: &Netns| {
        let (code, result) = agent.cni("ADD", network, &pod.name, &pod.path());
        assert_eq!(code, 0, "{result}\n{}", agent.log());
        result
    };
    let (pa, pb, pb2) = (Netns::new("pa"), Netns::new("pb"), Netns::new("pb"));
    let (ra, rb, rb2) = (add(&a, &net, &pa), add(&b, &net, &pb), add(&b, &net, &pb2));
    let [(a4, a6), (b4, b6), (b24, b26)] = [&ra, &rb, &rb2].map(addresses);

    // the fabric makes the IPv4 addresses unique and each IPv6 address is
    // the twin of its IPv4 host number, so the IPv6 ones are unique too
    for (v4, v6) in [(a4, a6), (b4, b6), (b24, b26)] {
        assert_eq!(
            v6.segments()[7],
            u16::from(v4.octets()[3]),
            "{v6} is the twin of {v4}"
        );
        assert_eq!(v6.segments()[..4], [0xfd00, 0x86, 0, 0], "{v6}");
    }
    assert_eq!(
        BTreeSet::from([a6, b6, b26]).len(),
        3,
        "distinct: {a6} {b6} {b26}"
    );
    assert_eq!(ra["interfaces"][0]["mtu"], POD_MTU, "{ra}");
    wait_for_ports(&a, 3);
    wait_for_ports(&b, 3);

    // neighbour discovery crosses the hosts: A's pod learns B's pod's MAC
    let logs = || format!("A:\n{}\nB:\n{}", a.log(), b.log());
    assert_eq!(ping6(&pa, b6, 3, 56), 3, "IPv6 A → B\n{}", logs());
    let b_mac = rb["interfaces"][0]["mac"].as_str().expect("mac");
    assert_eq!(
        neighbour_mac(&pa, b6).as_deref(),
        Some(b_mac),
        "A's pod resolved B's pod by neighbour discovery"
    );
    assert_eq!(ping6(&pb2, a6, 3, 56), 3, "IPv6 B → A\n{}", logs());
    assert_eq!(ping6(&pb, b26, 2, 56), 2, "IPv6 between B's own pods");
    assert_eq!(ping(&pa.path(), b4, 3), 3, "IPv4 A → B\n{}", logs());
    assert_eq!(ping(&pb2.path(), a4, 3), 3, "IPv4 B → A");

    // full-size packets fit the overlay: the pod MTU less the IP and ICMP headers
    assert_eq!(
        ping6(&pa, b6, 2, POD_MTU - 48),
        2,
        "a 1450-byte IPv6 packet"
    );
    let big4 = Command::new("ip")
        .args([
            "netns", "exec", &pa.name, "ping", "-4", "-n", "-q", "-M", "do",
        ])
        .args(["-s", &(POD_MTU - 28).to_string(), "-c", "2", "-i", "0.2"])
        .args(["-W", "1", &b4.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("ping");
    assert!(big4.success(), "a 1450-byte IPv4 packet");

    // TCP on IPv6 and IPv4, both ways, with full-size segments
    serve_bulk(&pb, 8086);
    serve_bulk(&pa, 8086);
    for (from, to) in [
        (&pa, SocketAddr::new(b6.into(), 8086)),
        (&pa, SocketAddr::new(b4.into(), 8086)),
        (&pb2, SocketAddr::new(a6.into(), 8086)),
        (&pb2, SocketAddr::new(a4.into(), 8086)),
    ] {
        assert_eq!(fetch(from, to), PAYLOAD, "TCP {} → {to}", from.name);
    }

    // an IPv4-only network of the same hosts keeps multicast off its ports
    let (qa, qb) = (Netns::new("qa"), Netns::new("qb"));
    let (rqa, rqb) = (add(&a, &v4only, &qa), add(&b, &v4only, &qb));
    assert_eq!(rqa["ips"].as_array().map(Vec::len), Some(1), "{rqa}");
    wait_for_ports(&a, 5);
    wait_for_ports(&b, 5);
    assert_eq!(
        ping(&qa.path(), support::first_ip(&rqb), 2),
        2,
        "IPv4-only across"
    );
    assert_eq!(
        ping6(&pa, b6, 1, 56),
        1,
        "the dual-stack network still carries IPv6"
    );

    for agent in [&a, &b] {
        let (code, out) = agent.cli(&["verify"]);
        assert_eq!(code, 0, "no drift: {out}\n{}", agent.log());
    }

    // a DEL on B withdraws the pod from A: no answer on either family
    let (code, out) = b.cni("DEL", &net, &pb.name, &pb.path());
    assert_eq!(code, 0, "{out}");
    wait_for_ports(&a, 4);
    assert_eq!(ping6(&pa, b6, 2, 56), 0, "a deleted pod answers nobody");
    assert_eq!(fetch(&pa, SocketAddr::new(b6.into(), 8086)), 0);
    assert_eq!(
        ping6(&pa, b26, 2, 56),
        2,
        "the other pod of B still answers"
    );
}

#[test]
fn dual_stack_pods_on_two_hosts_talk_over_a_v4_underlay() {
    dual_stack_pods_talk_across_the_hosts(
        "dual_stack_pods_on_two_hosts_talk_over_a_v4_underlay",
        Underlay::V4,
    );
}
