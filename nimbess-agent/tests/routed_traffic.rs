//! `kind: l3` networks through the kernel driver: each network is a VRF
//! made of its own routing table and ip rules. Real ICMP between pods
//! (network namespaces). Needs root; skipped loudly otherwise.

mod support;

use std::process::{Command, Stdio};

use nimbess_agent::driver::kernel::routed::route_table;
use nimbess_agent::naming::host_veth_name;
use support::{AgentProcess, Netns, first_ip, ping, unique};

/// Removes what the agent's tables and rules leave behind once the test's
/// namespaces (and with them the veths) are gone.
struct Tables(Vec<u32>);

impl Drop for Tables {
    fn drop(&mut self) {
        for table in &self.0 {
            let t = table.to_string();
            let _ = Command::new("ip")
                .args(["route", "flush", "table", &t])
                .stderr(Stdio::null())
                .status();
            while Command::new("ip")
                .args(["rule", "del", "table", &t])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            {}
        }
    }
}

fn ip_out(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn routed_pods_ping_through_their_vrf_and_vrfs_are_isolated() {
    if let Err(e) = nephrite_test_services::require_root("creates namespaces, veths, rules") {
        e.skip("routed_pods_ping_through_their_vrf_and_vrfs_are_isolated");
        return;
    }
    let green = unique("green");
    let violet = unique("violet");
    // violet's subnet covers green's: only the VRFs (each table ends its
    // own subnet in `unreachable`) and the egress table's `forward` chain
    // (what falls through into another pod subnet is dropped) keep them apart
    let config = format!(
        "driver: kernel\nnetworks:\n  - name: {green}\n    subnet: 10.202.1.0/24\n    kind: l3\n  \
         - name: {violet}\n    subnet: 10.202.0.0/16\n    kind: l3\n    gateway: 10.202.0.200\n"
    );
    let _tables = Tables(vec![route_table(&green), route_table(&violet)]);
    let agent = AgentProcess::start(&config, "kernel", &[&green, &violet]);
    let (a, b, d) = (Netns::new("ra"), Netns::new("rb"), Netns::new("rd"));
    let (code, ra) = agent.cni("ADD", &green, &a.name, &a.path());
    assert_eq!(code, 0, "{ra}\n{}", agent.log());
    let (code, rb) = agent.cni("ADD", &green, &b.name, &b.path());
    assert_eq!(code, 0, "{rb}");
    let (code, rd) = agent.cni("ADD", &violet, &d.name, &d.path());
    assert_eq!(code, 0, "{rd}");
    let (ip_a, ip_b, ip_d) = (first_ip(&ra), first_ip(&rb), first_ip(&rd));

    assert_eq!(ping(&a.path(), ip_b, 3), 3, "a reaches b\n{}", agent.log());
    assert_eq!(ping(&b.path(), ip_a, 3), 3, "b reaches a");
    // d's subnet route covers a and b, a's default route covers d, and
    // forwarding is on for their veths, but each table holds only its own
    // network's ports
    assert_eq!(ping(&d.path(), ip_b, 2), 0, "violet cannot reach green");
    assert_eq!(ping(&a.path(), ip_d, 2), 0, "green cannot reach violet");
    assert_eq!(agent.cli(&["verify"]), (0, "no drift\n".to_string()));

    let (code, json) = agent.cli(&[
        "pipelines",
        "--port",
        &format!("port_{}_eth0", a.name),
        "-o",
        "json",
    ]);
    assert_eq!(code, 0);
    assert!(
        json.contains("l3_router") && json.contains("rule iif"),
        "{json}"
    );

    // a FIB entry deleted by hand breaks a -> b only, and verify names it
    let table = route_table(&green).to_string();
    let status = Command::new("ip")
        .args(["route", "del", &format!("{ip_b}/32"), "table", &table])
        .status()
        .expect("ip route del");
    assert!(status.success());
    assert_eq!(ping(&a.path(), ip_b, 2), 0, "a no longer reaches b");
    let (code, drift) = agent.cli(&["verify"]);
    assert_ne!(code, 0);
    assert!(
        drift.contains(&format!("{ip_b} -> port_{}_eth0", b.name)),
        "{drift}"
    );

    // DEL removes the veth and its rule
    let b_veth = host_veth_name(&format!("port_{}_eth0", b.name));
    assert!(ip_out(&["rule", "show"]).contains(&b_veth));
    let (code, out) = agent.cni("DEL", &green, &b.name, &b.path());
    assert_eq!(code, 0, "{out}");
    assert!(!ip_out(&["rule", "show"]).contains(&b_veth), "rule gone");
    assert!(!ip_out(&["link", "show"]).contains(&b_veth), "veth gone");
}
