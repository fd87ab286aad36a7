//! Two "hosts" of a fabric for the root tests: network namespaces joined
//! by a veth link, etcd on the link in the first, and what the fabric tests
//! ask of the agents (their `ports`, waiting for the fabric to converge).
//! Included by `tests/fabric.rs` and `tests/fabric_v6.rs` with `#[path]`
//! beside `mod support`.
#![allow(dead_code)]

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use nephrite_test_services::Etcd;
use serde_json::Value;

use crate::support::{AgentProcess, Netns, unique};

/// Run `ip <args>`, which must succeed.
pub fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().expect("ip");
    assert!(ok.success(), "ip {args:?}");
}

/// The family of the link between the two hosts (their underlay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Underlay {
    /// `10.199.x.1` and `10.199.x.2` on a /24.
    V4,
    /// `fd00:199:x::1` and `fd00:199:x::2` on a /64 (no DAD).
    V6,
}

/// Two hosts joined by a veth link with etcd on the link in A.
pub struct TwoHosts {
    /// Host A (etcd runs here).
    pub a: Netns,
    /// Host B.
    pub b: Netns,
    /// A's and B's underlay addresses.
    pub underlay: (IpAddr, IpAddr),
    /// The fabric's store, listening on A's underlay address.
    pub etcd: Etcd,
}

impl TwoHosts {
    /// The `--store` value of the agents.
    pub fn store(&self) -> String {
        format!("etcd://{}", self.etcd.client_addr())
    }
}

/// [`TwoHosts`] on an underlay of `family`; `None` when etcd is missing
/// (the skip is printed for `test`).
pub fn two_hosts(test: &str, family: Underlay) -> Option<TwoHosts> {
    let (host_a, host_b) = (Netns::new("ha"), Netns::new("hb"));
    let x = std::process::id() % 200 + 20;
    let (ul_a, ul_b, prefix): (IpAddr, IpAddr, u8) = match family {
        Underlay::V4 => (
            format!("10.199.{x}.1").parse().expect("ip"),
            format!("10.199.{x}.2").parse().expect("ip"),
            24,
        ),
        Underlay::V6 => (
            format!("fd00:199:{x}::1").parse().expect("ip"),
            format!("fd00:199:{x}::2").parse().expect("ip"),
            64,
        ),
    };
    let (link_a, link_b) = (unique("ul"), unique("ul"));
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
    for (ns, link, addr) in [(&host_a, &link_a, ul_a), (&host_b, &link_b, ul_b)] {
        let cidr = format!("{addr}/{prefix}");
        let mut add = vec!["-n", &ns.name, "addr", "add", &cidr, "dev", link];
        if family == Underlay::V6 {
            add.push("nodad");
        }
        ip(&add);
        ip(&["-n", &ns.name, "link", "set", link, "up"]);
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
    }
    match Etcd::start_in_netns(&host_a.name, ul_a) {
        Ok(etcd) => Some(TwoHosts {
            a: host_a,
            b: host_b,
            underlay: (ul_a, ul_b),
            etcd,
        }),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

/// The `ports -o json` of an agent.
pub fn ports(agent: &AgentProcess) -> Vec<Value> {
    let (code, out) = agent.cli(&["ports", "-o", "json"]);
    assert_eq!(code, 0, "ports failed: {out}\n{}", agent.log());
    serde_json::from_str(&out).expect("ports JSON")
}

/// Wait until `agent` lists exactly `n` ports (the fabric converges asynchronously).
pub fn wait_for_ports(agent: &AgentProcess, n: usize) -> Vec<Value> {
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
