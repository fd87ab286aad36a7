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
//! Rendered as one nf_tables netlink batch ([`render`]: delete the table,
//! add it again); drift is the rules of each chain counted by a netlink
//! dump ([`verify`]).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use nephrite_pipeline::{AclEntry, PodAcl};

use super::expr::{self, Hook};
use super::netlink::{Attrs, Batch, rules_by_chain, send_batch};
use super::nftables::{
    CROSSING_MARK, CT_ESTABLISHED_RELATED, IPV4_DADDR_OFFSET, IPV4_SADDR_OFFSET, NF_ACCEPT,
    NF_DROP, NF_INET_FORWARD, NFPROTO_IPV4, NFT_CMP_EQ, NFT_CT_STATE, NFT_JUMP, NFT_META_L4PROTO,
    NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE, NFT_MSG_NEWTABLE,
    NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER, NFT_REG_1, NFT_RETURN, NLM_F_APPEND,
    NLM_F_CREATE, POLICY_FORWARD_PRIORITY, POLICY_TABLE as TABLE, TRANSPORT_DPORT_OFFSET,
    protocol_number,
};
use crate::driver::DriverError;

/// The base chain every packet forwarded passes.
const FORWARD: &str = "forward";

/// The chain of a pod's ingress (`in`) or egress (`out`) ACL.
pub fn chain_name(direction: &str, pod: Ipv4Addr) -> String {
    format!("{direction}.{pod}")
}

/// The table's content: its regular chains and every rule, by chain, in
/// order.
#[derive(Default)]
struct Table {
    chains: Vec<String>,
    rules: Vec<(String, Attrs)>,
}

/// The rules of one ACL entry in `chain`: the peer (`offset`: the source
/// address for an ingress chain, the destination for an egress one) minus
/// its exceptions, per port range (none: any port), then the allow.
fn entry_rules(table: &mut Table, chain: &str, ingress: bool, e: &AclEntry) {
    let offset = if ingress {
        IPV4_SADDR_OFFSET
    } else {
        IPV4_DADDR_OFFSET
    };
    let peer = |list: &mut Attrs| {
        expr::match_prefix(list, offset, e.peer);
        for except in &e.except {
            expr::outside_prefix(list, offset, *except);
        }
    };
    let allow = |list: &mut Attrs| {
        // what an ingress chain lets in is marked for the isolation
        // between networks ([`CROSSING_MARK`])
        if ingress {
            expr::set_mark_bits(list, CROSSING_MARK);
        }
        expr::verdict(list, NFT_RETURN);
    };
    if e.ports.is_empty() {
        let mut list = Attrs::default();
        peer(&mut list);
        allow(&mut list);
        table.rules.push((chain.to_string(), list));
    }
    for p in &e.ports {
        let mut list = Attrs::default();
        peer(&mut list);
        // meta l4proto P [th dport LO[-HI]]
        expr::meta(&mut list, NFT_META_L4PROTO);
        expr::cmp(&mut list, NFT_CMP_EQ, &[protocol_number(p.protocol)]);
        if let Some((lo, hi)) = p.range {
            expr::payload(
                &mut list,
                NFT_REG_1,
                NFT_PAYLOAD_TRANSPORT_HEADER,
                TRANSPORT_DPORT_OFFSET,
                2,
            );
            if lo == hi {
                expr::cmp(&mut list, NFT_CMP_EQ, &lo.to_be_bytes());
            } else {
                expr::range(&mut list, &lo.to_be_bytes(), &hi.to_be_bytes());
            }
        }
        allow(&mut list);
        table.rules.push((chain.to_string(), list));
    }
}

/// What the table holds for `acls` (not empty).
fn table(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> Table {
    let mut t = Table::default();
    // ct state established,related accept
    let mut list = Attrs::default();
    expr::ct(&mut list, NFT_CT_STATE);
    expr::any_bit(&mut list, CT_ESTABLISHED_RELATED);
    expr::verdict(&mut list, NF_ACCEPT);
    t.rules.push((FORWARD.to_string(), list));
    for (pod, acl) in acls {
        for (direction, ingress, jump_on, list) in [
            ("out", false, IPV4_SADDR_OFFSET, &acl.egress),
            ("in", true, IPV4_DADDR_OFFSET, &acl.ingress),
        ] {
            let Some(list) = list else { continue };
            let chain = chain_name(direction, *pod);
            t.chains.push(chain.clone());
            for e in list {
                entry_rules(&mut t, &chain, ingress, e);
            }
            // counter drop
            let mut drop = Attrs::default();
            expr::counter(&mut drop);
            expr::verdict(&mut drop, NF_DROP);
            t.rules.push((chain.clone(), drop));
            // ip saddr|daddr <pod> jump <chain>
            let mut jump = Attrs::default();
            expr::payload(&mut jump, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, jump_on, 4);
            expr::cmp(&mut jump, NFT_CMP_EQ, &pod.octets());
            expr::verdict_to(&mut jump, NFT_JUMP, &chain);
            t.rules.push((FORWARD.to_string(), jump));
        }
    }
    t
}

/// Replace the table with `acls` in one transaction (none: the table goes).
///
/// # Errors
/// The kernel refused the batch (the previous table stays).
pub fn render(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    let name = expr::table(TABLE);
    batch.nft(NFPROTO_IPV4, NFT_MSG_NEWTABLE, NLM_F_CREATE, &name);
    batch.nft(NFPROTO_IPV4, NFT_MSG_DELTABLE, 0, &name);
    if !acls.is_empty() {
        batch.nft(NFPROTO_IPV4, NFT_MSG_NEWTABLE, NLM_F_CREATE, &name);
        let hook = Hook {
            number: NF_INET_FORWARD,
            priority: POLICY_FORWARD_PRIORITY,
            device: None,
        };
        let forward = expr::base_chain(TABLE, FORWARD, "filter", &hook);
        batch.nft(NFPROTO_IPV4, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &forward);
        let t = table(acls);
        for chain in &t.chains {
            let c = expr::chain(TABLE, chain);
            batch.nft(NFPROTO_IPV4, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &c);
        }
        for (chain, exprs) in &t.rules {
            let r = expr::rule(TABLE, chain, exprs);
            batch.nft(
                NFPROTO_IPV4,
                NFT_MSG_NEWRULE,
                NLM_F_CREATE | NLM_F_APPEND,
                &r,
            );
        }
    }
    send_batch(batch, &format!("policies of {} pods", acls.len()))
}

/// Differences between `acls` and the kernel, one line each: a missing
/// table or chain, a chain whose rules differ in number from what
/// [`render`] writes (a peer or a port added or deleted by hand).
pub fn verify(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> Vec<String> {
    let have = match rules_by_chain(NFPROTO_IPV4, TABLE) {
        Ok(have) => have,
        Err(e) => return vec![format!("policy: table ip {TABLE} cannot be read: {e}")],
    };
    if acls.is_empty() {
        return match have {
            Some(_) => vec![format!("policy: table ip {TABLE} exists with no policy")],
            None => Vec::new(),
        };
    }
    let Some(have) = have else {
        return vec![format!("policy: table ip {TABLE} is missing")];
    };
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    for (chain, _) in table(acls).rules {
        *want.entry(chain).or_insert(0) += 1;
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
    fn an_isolated_pod_gets_its_allowed_peers_then_a_drop_and_the_forward_chain_jumps() {
        let pod = Ipv4Addr::new(10, 0, 0, 1);
        let acls = BTreeMap::from([(
            pod,
            PodAcl {
                ingress: Some(vec![AclEntry {
                    peer: "10.0.0.0/24".parse().expect("cidr"),
                    except: vec!["10.0.0.8/29".parse().expect("cidr")],
                    ports: vec![
                        PortRange {
                            protocol: Protocol::Tcp,
                            range: Some((8080, 8090)),
                        },
                        PortRange {
                            protocol: Protocol::Udp,
                            range: None,
                        },
                    ],
                }]),
                egress: Some(vec![]),
            },
        )]);
        let t = table(&acls);
        let chains: Vec<&str> = t.rules.iter().map(|(c, _)| c.as_str()).collect();
        // established, then per pod: egress chain's drop and its jump,
        // the ingress chain's two port rules, its drop and its jump
        assert_eq!(
            chains,
            [
                "forward",
                "out.10.0.0.1",
                "forward",
                "in.10.0.0.1",
                "in.10.0.0.1",
                "in.10.0.0.1",
                "forward"
            ]
        );
        assert_eq!(t.chains, ["out.10.0.0.1", "in.10.0.0.1"]);
        let names = |a: &Attrs| String::from_utf8_lossy(&a.0).into_owned();
        let tcp = names(&t.rules[3].1);
        // a port range, an exception (cmp neq), the mark set, a return
        for e in ["range", "bitwise", "cmp", "meta", "immediate"] {
            assert!(tcp.contains(e), "{e} in the TCP rule");
        }
        assert!(!names(&t.rules[4].1).contains("range"), "UDP: any port");
        assert!(
            names(&t.rules[2].1).contains("out.10.0.0.1"),
            "the jump names its chain"
        );
    }
}
