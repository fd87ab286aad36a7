//! NetworkPolicy ACL modules rendered as nftables, one `ip` table
//! (`nimbess-policy`) replaced whole on every change: a `forward` chain
//! (after the Services' DNAT, so a policy sees the backend pod) accepting
//! established flows (conntrack lets replies back), then jumping to
//! `out.<pod>` for what an egress-isolated pod sends and `in.<pod>` for what
//! reaches an ingress-isolated pod. Each of those chains returns for an
//! allowed peer and port and drops (counted) the rest; an ingress chain
//! marks what it lets in ([`CROSSING_MARK`]), so the egress table's
//! isolation between pod networks, hooked after this chain, lets a
//! connection a policy allowed into another network pass. Bridged traffic
//! between pods of one network reaches the forward hook through the
//! bridge's `nf_call_iptables` (see the Services' table).
//!
//! Written as `nft` input ([`script`]) and loaded by `nft -f -`
//! ([`super::nft_program::load`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;

use nephrite_pipeline::{AclEntry, PodAcl};

use super::nft_program::listed_rules;
use super::nftables::{
    CROSSING_MARK, POLICY_FORWARD_PRIORITY, POLICY_TABLE as TABLE, protocol_keyword,
};

/// The chain of a pod's ingress (`in`) or egress (`out`) ACL.
pub fn chain_name(direction: &str, pod: Ipv4Addr) -> String {
    format!("{direction}.{pod}")
}

fn entry_rules(out: &mut String, chain: &str, field: &str, e: &AclEntry) {
    // what an ingress chain lets in is marked for the isolation between
    // networks ([`CROSSING_MARK`])
    let allow = if field == "saddr" {
        format!("meta mark set meta mark or {CROSSING_MARK:#x} return")
    } else {
        "return".to_string()
    };
    let mut peer = format!("ip {field} {}", e.peer);
    if !e.except.is_empty() {
        let except: Vec<String> = e.except.iter().map(ToString::to_string).collect();
        let _ = write!(peer, " ip {field} != {{ {} }}", except.join(", "));
    }
    if e.ports.is_empty() {
        let _ = writeln!(out, "add rule ip {TABLE} {chain} {peer} {allow}");
    }
    for p in &e.ports {
        let ports = match p.range {
            None => String::new(),
            Some((lo, hi)) if lo == hi => format!(" th dport {lo}"),
            Some((lo, hi)) => format!(" th dport {lo}-{hi}"),
        };
        let _ = writeln!(
            out,
            "add rule ip {TABLE} {chain} {peer} meta l4proto {}{ports} {allow}",
            protocol_keyword(p.protocol)
        );
    }
}

/// The `nft` input replacing the table with `acls` (none: the table goes).
pub fn script(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> String {
    let mut out = format!("add table ip {TABLE}\ndelete table ip {TABLE}\n");
    if acls.is_empty() {
        return out;
    }
    let _ = writeln!(out, "add table ip {TABLE}");
    let _ = writeln!(
        out,
        "add chain ip {TABLE} forward {{ type filter hook forward priority {POLICY_FORWARD_PRIORITY}; policy accept; }}"
    );
    let _ = writeln!(
        out,
        "add rule ip {TABLE} forward ct state established,related accept"
    );
    for (pod, acl) in acls {
        for (direction, field, jump_on, list) in [
            ("out", "daddr", "saddr", &acl.egress),
            ("in", "saddr", "daddr", &acl.ingress),
        ] {
            let Some(list) = list else { continue };
            let chain = chain_name(direction, *pod);
            let _ = writeln!(out, "add chain ip {TABLE} {chain}");
            for e in list {
                entry_rules(&mut out, &chain, field, e);
            }
            let _ = writeln!(out, "add rule ip {TABLE} {chain} counter drop");
            let _ = writeln!(
                out,
                "add rule ip {TABLE} forward ip {jump_on} {pod} jump {chain}"
            );
        }
    }
    out
}

/// Differences between `acls` and the kernel, one line each: a missing
/// table or chain, a chain whose rules differ in number from what
/// [`script`] writes (a peer or a port added or deleted by hand).
pub fn verify(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> Vec<String> {
    let have = listed_rules(TABLE);
    if acls.is_empty() {
        return match have {
            Some(_) => vec![format!("policy: table ip {TABLE} exists with no policy")],
            None => Vec::new(),
        };
    }
    let Some(have) = have else {
        return vec![format!("policy: table ip {TABLE} is missing")];
    };
    // what the script adds, rule by rule, counted by chain
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    let prefix = format!("add rule ip {TABLE} ");
    for line in script(acls).lines() {
        if let Some(chain) = line.strip_prefix(&prefix).and_then(|r| r.split(' ').next()) {
            *want.entry(chain.to_string()).or_insert(0) += 1;
        }
    }
    let mut drift = Vec::new();
    for (chain, n) in &want {
        match have.get(chain) {
            None => drift.push(format!("policy: chain {chain} is missing")),
            Some(h) if h != n => drift.push(format!(
                "policy: chain {chain} holds {h} rules, the model {n}"
            )),
            Some(_) => {}
        }
    }
    for chain in have.keys().filter(|c| !want.contains_key(*c)) {
        drift.push(format!(
            "policy: chain {chain} is in no policy of the model"
        ));
    }
    drift
}

#[cfg(test)]
mod tests {
    use super::*;
    use nephrite_pipeline::{PortRange, Protocol};

    #[test]
    fn an_isolated_pod_gets_its_allowed_peers_then_a_drop() {
        let pod = Ipv4Addr::new(10, 0, 0, 1);
        let acls = BTreeMap::from([(
            pod,
            PodAcl {
                ingress: Some(vec![AclEntry {
                    peer: "10.0.0.0/24".parse().expect("cidr"),
                    except: vec!["10.0.0.8/29".parse().expect("cidr")],
                    ports: vec![PortRange {
                        protocol: Protocol::Tcp,
                        range: Some((8080, 8090)),
                    }],
                }]),
                egress: Some(vec![]),
            },
        )]);
        let s = script(&acls);
        assert!(s.contains("add rule ip nimbess-policy in.10.0.0.1 ip saddr 10.0.0.0/24 ip saddr != { 10.0.0.8/29 } meta l4proto tcp th dport 8080-8090 meta mark set meta mark or 0x100000 return\n"), "{s}");
        assert!(
            s.contains("add rule ip nimbess-policy in.10.0.0.1 counter drop\n"),
            "{s}"
        );
        assert!(
            s.contains("add rule ip nimbess-policy out.10.0.0.1 counter drop\n"),
            "{s}"
        );
        assert!(
            s.contains("forward ip daddr 10.0.0.1 jump in.10.0.0.1\n"),
            "{s}"
        );
        assert!(
            s.contains("forward ip saddr 10.0.0.1 jump out.10.0.0.1\n"),
            "{s}"
        );
        assert_eq!(
            script(&BTreeMap::new()),
            "add table ip nimbess-policy\ndelete table ip nimbess-policy\n"
        );
    }
}
