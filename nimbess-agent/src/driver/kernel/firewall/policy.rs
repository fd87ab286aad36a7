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
//! dump ([`verify`]). The pods' IPv6 ACLs (NetworkPolicies) go in the `ip6`
//! twin of the table, the same way ([`render6`], [`verify6`]).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use nephrite_pipeline::{
    AclEntry, AdminAction, BaselineAction, Ipv4Cidr, PodAcl, PodTiers, PortRange, Tiers,
};

use super::expr::{self, Hook};
use super::netlink::{Attrs, Batch, rules_by_chain, send_batch};
use super::nftables::{
    CROSSING_MARK, CT_ESTABLISHED_RELATED, IPV4_DADDR_OFFSET, IPV4_SADDR_OFFSET, NF_ACCEPT,
    NF_DROP, NF_INET_FORWARD, NFPROTO_IPV4, NFT_CMP_EQ, NFT_CT_STATE, NFT_GOTO, NFT_JUMP,
    NFT_META_L4PROTO, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE, NFT_MSG_NEWTABLE,
    NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER, NFT_REG_1, NFT_RETURN, NLM_F_APPEND,
    NLM_F_CREATE, POLICY_FORWARD_PRIORITY, POLICY_TABLE as TABLE, TRANSPORT_DPORT_OFFSET,
    protocol_number,
};
use crate::driver::DriverError;

mod v6;

pub use v6::{render6, verify6};

/// The base chain every packet forwarded passes.
const FORWARD: &str = "forward";

/// The chain of a pod's ingress (`in`) or egress (`out`) ACL.
pub fn chain_name(direction: &str, pod: Ipv4Addr) -> String {
    format!("{direction}.{pod}")
}

/// The chain of a pod's IPv6 ingress (`in`) or egress (`out`) ACL (in the
/// `ip6` table): the address with `-` for `:` (`in.fd00-233--2`), which
/// `nft` reads as a name (a colon it does not, quoted or not).
pub fn chain_name6(direction: &str, pod: std::net::Ipv6Addr) -> String {
    format!("{direction}.{}", pod.to_string().replace(':', "-"))
}

/// The table's content: its regular chains and every rule, by chain, in
/// order.
#[derive(Default)]
struct Table {
    chains: Vec<String>,
    rules: Vec<(String, Attrs)>,
}

/// What a rule does with the packets it matches.
#[derive(Clone, Copy)]
enum Verdict<'a> {
    /// Let it through this direction (an ingress chain marks it,
    /// [`CROSSING_MARK`]): return.
    Allow,
    /// Drop it (counted).
    Deny,
    /// Leave it to the next tiers: go to that chain, not coming back.
    Pass(&'a str),
}

/// The rules matching `peer` (`offset`: the source address for an ingress
/// chain, the destination for an egress one) minus `except`, per port
/// range of `ports` (none: any port), each ending in `verdict`.
#[allow(clippy::too_many_arguments)]
fn match_rules(
    table: &mut Table,
    chain: &str,
    ingress: bool,
    peer: Ipv4Cidr,
    except: &[Ipv4Cidr],
    ports: &[PortRange],
    verdict: Verdict<'_>,
) {
    let offset = if ingress {
        IPV4_SADDR_OFFSET
    } else {
        IPV4_DADDR_OFFSET
    };
    let matched = |list: &mut Attrs| {
        expr::match_prefix(list, offset, peer);
        for e in except {
            expr::outside_prefix(list, offset, *e);
        }
    };
    let decide = |list: &mut Attrs| match verdict {
        Verdict::Allow => {
            // what an ingress chain lets in is marked for the isolation
            // between networks ([`CROSSING_MARK`])
            if ingress {
                expr::set_mark_bits(list, CROSSING_MARK);
            }
            expr::verdict(list, NFT_RETURN);
        }
        Verdict::Deny => {
            expr::counter(list);
            expr::verdict(list, NF_DROP);
        }
        Verdict::Pass(next) => expr::verdict_to(list, NFT_GOTO, next),
    };
    if ports.is_empty() {
        let mut list = Attrs::default();
        matched(&mut list);
        decide(&mut list);
        table.rules.push((chain.to_string(), list));
    }
    for p in ports {
        let mut list = Attrs::default();
        matched(&mut list);
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
        decide(&mut list);
        table.rules.push((chain.to_string(), list));
    }
}

/// One pod's address as a peer.
fn host(addr: Ipv4Addr) -> Ipv4Cidr {
    Ipv4Cidr { addr, prefix: 32 }
}

/// The NetworkPolicies' tier, then the baseline: when the NetworkPolicies
/// isolate the pod their entries allow and the rest is dropped (counted);
/// otherwise the BANP's entries decide and what none matches falls off the
/// chain (open).
fn lower_tiers(table: &mut Table, chain: &str, ingress: bool, tiers: &Tiers) {
    if let Some(list) = &tiers.network {
        for e in list {
            match_rules(
                table,
                chain,
                ingress,
                e.peer,
                &e.except,
                &e.ports,
                Verdict::Allow,
            );
        }
        // counter drop
        let mut drop = Attrs::default();
        expr::counter(&mut drop);
        expr::verdict(&mut drop, NF_DROP);
        table.rules.push((chain.to_string(), drop));
        return;
    }
    for e in &tiers.baseline {
        let verdict = match e.action {
            BaselineAction::Allow => Verdict::Allow,
            BaselineAction::Deny => Verdict::Deny,
        };
        match_rules(table, chain, ingress, host(e.peer), &[], &e.ports, verdict);
    }
}

/// One direction of one pod in `chain`: the admin entries in order (their
/// `Pass`, and what none matches, go to `<chain>.pass` holding the lower
/// tiers), or the lower tiers straight in `chain` when there is no admin
/// entry (a pod only NetworkPolicies select gets the chain it always had).
fn direction_rules(table: &mut Table, chain: &str, ingress: bool, tiers: &Tiers) {
    if tiers.admin.is_empty() {
        lower_tiers(table, chain, ingress, tiers);
        return;
    }
    let rest = format!("{chain}.pass");
    table.chains.push(rest.clone());
    for e in &tiers.admin {
        let verdict = match e.action {
            AdminAction::Allow => Verdict::Allow,
            AdminAction::Deny => Verdict::Deny,
            AdminAction::Pass => Verdict::Pass(&rest),
        };
        match_rules(table, chain, ingress, host(e.peer), &[], &e.ports, verdict);
    }
    let mut next = Attrs::default();
    expr::verdict_to(&mut next, NFT_GOTO, &rest);
    table.rules.push((chain.to_string(), next));
    lower_tiers(table, &rest, ingress, tiers);
}

/// The NetworkPolicies' ACLs as tiers with nothing but the NetworkPolicy tier.
pub fn network_tiers(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> BTreeMap<Ipv4Addr, PodTiers> {
    acls.iter()
        .map(|(pod, acl)| {
            let tier = |network: &Option<Vec<AclEntry>>| Tiers {
                network: network.clone(),
                ..Tiers::default()
            };
            (
                *pod,
                PodTiers {
                    ingress: tier(&acl.ingress),
                    egress: tier(&acl.egress),
                },
            )
        })
        .collect()
}

/// What the table holds for `tiers` (not empty).
fn table(tiers: &BTreeMap<Ipv4Addr, PodTiers>) -> Table {
    let mut t = Table::default();
    // ct state established,related accept
    let mut list = Attrs::default();
    expr::ct(&mut list, NFT_CT_STATE);
    expr::any_bit(&mut list, CT_ESTABLISHED_RELATED);
    expr::verdict(&mut list, NF_ACCEPT);
    t.rules.push((FORWARD.to_string(), list));
    for (pod, both) in tiers {
        for (direction, ingress, jump_on, tiers) in [
            ("out", false, IPV4_SADDR_OFFSET, &both.egress),
            ("in", true, IPV4_DADDR_OFFSET, &both.ingress),
        ] {
            if tiers.is_empty() {
                continue;
            }
            let chain = chain_name(direction, *pod);
            // the pod's chain first: a `.pass` chain follows it
            let at = t.chains.len();
            t.chains.insert(at, chain.clone());
            direction_rules(&mut t, &chain, ingress, tiers);
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
    render_tiers(&network_tiers(acls))
}

/// Replace the table with every pod's tiers (AdminNetworkPolicies,
/// NetworkPolicies, BaselineAdminNetworkPolicy) in one transaction (none:
/// the table goes).
///
/// # Errors
/// The kernel refused the batch (the previous table stays).
pub fn render_tiers(acls: &BTreeMap<Ipv4Addr, PodTiers>) -> Result<(), DriverError> {
    let t = (!acls.is_empty()).then(|| table(acls));
    send_table(NFPROTO_IPV4, t, &format!("policies of {} pods", acls.len()))
}

/// Replace the family's table with `t` in one transaction (`None`: the
/// table goes).
fn send_table(family: u8, t: Option<Table>, what: &str) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    let name = expr::table(TABLE);
    batch.nft(family, NFT_MSG_NEWTABLE, NLM_F_CREATE, &name);
    batch.nft(family, NFT_MSG_DELTABLE, 0, &name);
    if let Some(t) = t {
        batch.nft(family, NFT_MSG_NEWTABLE, NLM_F_CREATE, &name);
        let hook = Hook {
            number: NF_INET_FORWARD,
            priority: POLICY_FORWARD_PRIORITY,
            device: None,
        };
        let forward = expr::base_chain(TABLE, FORWARD, "filter", &hook);
        batch.nft(family, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &forward);
        for chain in &t.chains {
            let c = expr::chain(TABLE, chain);
            batch.nft(family, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &c);
        }
        for (chain, exprs) in &t.rules {
            let r = expr::rule(TABLE, chain, exprs);
            batch.nft(family, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, &r);
        }
    }
    send_batch(batch, what)
}

/// Differences between `acls` and the kernel, one line each: a missing
/// table or chain, a chain whose rules differ in number from what
/// [`render`] writes (a peer or a port added or deleted by hand).
pub fn verify(acls: &BTreeMap<Ipv4Addr, PodAcl>) -> Vec<String> {
    verify_tiers(&network_tiers(acls))
}

/// [`verify`] for every pod's tiers ([`render_tiers`]).
pub fn verify_tiers(acls: &BTreeMap<Ipv4Addr, PodTiers>) -> Vec<String> {
    let t = (!acls.is_empty()).then(|| table(acls));
    table_drift(NFPROTO_IPV4, "ip", t)
}

/// Differences between the family's table (`keyword`: `ip`, `ip6`) and
/// `t` (`None`: no table), one line each: a missing table or chain, a
/// chain whose rules differ in number, a chain of no policy.
fn table_drift(family: u8, keyword: &str, t: Option<Table>) -> Vec<String> {
    let have = match rules_by_chain(family, TABLE) {
        Ok(have) => have,
        Err(e) => {
            return vec![format!(
                "policy: table {keyword} {TABLE} cannot be read: {e}"
            )];
        }
    };
    let Some(t) = t else {
        return match have {
            Some(_) => vec![format!(
                "policy: table {keyword} {TABLE} exists with no policy"
            )],
            None => Vec::new(),
        };
    };
    let Some(have) = have else {
        return vec![format!("policy: table {keyword} {TABLE} is missing")];
    };
    // every chain, also one with no rule (a `.pass` chain with no lower
    // tier: what the admin entries pass is open)
    let mut want: BTreeMap<String, usize> = t.chains.into_iter().map(|chain| (chain, 0)).collect();
    for (chain, _) in t.rules {
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
    use super::super::nftables::{NFT_MSG_DELRULE, NFTA_RULE_CHAIN, NFTA_RULE_TABLE};
    use super::*;
    use nephrite_pipeline::{Direction, Protocol, RuleRef, TierEntry};

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
        let t = table(&network_tiers(&acls));
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

    fn entry<A>(peer: [u8; 4], ports: Vec<PortRange>, action: A) -> TierEntry<A> {
        TierEntry {
            peer: Ipv4Addr::from(peer),
            ports,
            action,
            rule: RuleRef::Network {
                namespace: "default".into(),
                policy: "test".into(),
                direction: Direction::Ingress,
                index: 0,
            },
        }
    }

    #[test]
    fn admin_entries_come_first_and_a_pass_or_no_match_goes_to_the_lower_tiers() {
        let pod = Ipv4Addr::new(10, 0, 0, 1);
        let tcp80 = vec![PortRange {
            protocol: Protocol::Tcp,
            range: Some((80, 80)),
        }];
        let tiers = BTreeMap::from([(
            pod,
            PodTiers {
                ingress: Tiers {
                    admin: vec![
                        entry([10, 0, 0, 2], tcp80.clone(), AdminAction::Deny),
                        entry([10, 0, 0, 3], vec![], AdminAction::Pass),
                        entry([10, 0, 0, 4], tcp80, AdminAction::Allow),
                    ],
                    network: Some(vec![AclEntry {
                        peer: "10.0.0.0/24".parse().expect("cidr"),
                        except: vec![],
                        ports: vec![],
                    }]),
                    baseline: vec![entry([10, 0, 0, 5], vec![], BaselineAction::Deny)],
                },
                egress: Tiers {
                    baseline: vec![entry([10, 0, 0, 6], vec![], BaselineAction::Allow)],
                    ..Tiers::default()
                },
            },
        )]);
        let t = table(&tiers);
        assert_eq!(
            t.chains,
            ["out.10.0.0.1", "in.10.0.0.1", "in.10.0.0.1.pass"]
        );
        let chains: Vec<&str> = t.rules.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            chains,
            [
                "forward",
                // egress: the baseline's one entry, nothing after it (open)
                "out.10.0.0.1",
                "forward",
                // ingress: three admin entries, then on to the lower tiers
                "in.10.0.0.1",
                "in.10.0.0.1",
                "in.10.0.0.1",
                "in.10.0.0.1",
                // the NetworkPolicies isolate: their entry, the drop; the
                // baseline never speaks
                "in.10.0.0.1.pass",
                "in.10.0.0.1.pass",
                "forward",
            ]
        );
        let text = |i: usize| String::from_utf8_lossy(&t.rules[i].1.0).into_owned();
        assert!(text(3).contains("counter"), "a Deny is counted");
        assert!(text(4).contains("in.10.0.0.1.pass"), "a Pass goes on");
        assert!(
            !text(5).contains("counter") && text(5).contains("meta"),
            "an Allow marks"
        );
        assert!(text(6).contains("in.10.0.0.1.pass"), "no match goes on");
        // the same tiers with only the NetworkPolicies are the old table
        let only_network = BTreeMap::from([(
            pod,
            PodAcl {
                ingress: tiers[&pod].ingress.network.clone(),
                egress: None,
            },
        )]);
        let old = table(&network_tiers(&only_network));
        assert_eq!(old.chains, ["in.10.0.0.1"]);
        assert_eq!(old.rules.len(), 4);
    }

    #[test]
    fn the_kernel_takes_the_tiers_and_verify_reads_them_back() {
        let test = "the_kernel_takes_the_tiers_and_verify_reads_them_back";
        if let Err(e) =
            nephrite_test_services::require_root("creates a network namespace and nftables tables")
        {
            e.skip(test);
            return;
        }
        let pod = Ipv4Addr::new(10, 0, 0, 1);
        let tiers = BTreeMap::from([(
            pod,
            PodTiers {
                ingress: Tiers {
                    admin: vec![
                        entry([10, 0, 0, 2], vec![], AdminAction::Deny),
                        entry([10, 0, 0, 3], vec![], AdminAction::Pass),
                    ],
                    network: None,
                    baseline: vec![entry([10, 0, 0, 5], vec![], BaselineAction::Deny)],
                },
                egress: Tiers::default(),
            },
        )]);
        // a thread in a network namespace of its own: its netlink sockets are there
        std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("unshare(CLONE_NEWNET)");
            render_tiers(&tiers).expect("the kernel takes a Pass to the next tiers");
            assert_eq!(verify_tiers(&tiers), Vec::<String>::new());
            // the lower tiers' chain flushed by hand: named
            let mut batch = Batch::new();
            let mut rules = Attrs::default();
            rules
                .str(NFTA_RULE_TABLE, TABLE)
                .str(NFTA_RULE_CHAIN, "in.10.0.0.1.pass");
            batch.nft(NFPROTO_IPV4, NFT_MSG_DELRULE, 0, &rules);
            send_batch(batch, "flush in.10.0.0.1.pass").expect("flush");
            let drift = verify_tiers(&tiers);
            assert_eq!(
                drift,
                ["policy: chain in.10.0.0.1.pass holds 0 rules, the model 1"],
                "{drift:?}"
            );
            // admin entries alone: an empty `.pass` chain, which is no drift
            let admin_only = BTreeMap::from([(
                pod,
                PodTiers {
                    ingress: Tiers {
                        admin: vec![entry([10, 0, 0, 3], vec![], AdminAction::Pass)],
                        ..Tiers::default()
                    },
                    egress: Tiers::default(),
                },
            )]);
            render_tiers(&admin_only).expect("the kernel takes an empty .pass chain");
            assert_eq!(verify_tiers(&admin_only), Vec::<String>::new());
            render_tiers(&BTreeMap::new()).expect("the table goes");
            assert_eq!(verify_tiers(&BTreeMap::new()), Vec::<String>::new());
        })
        .join()
        .expect("the test's thread");
    }
}
