//! The NetworkPolicies' IPv6 ACLs in the `ip6` twin of the policy table:
//! the same `forward` chain (established flows accepted, then `jump
//! out.<pod>` on `ip6 saddr` and `jump in.<pod>` on `ip6 daddr` of each
//! isolated pod's IPv6 address), the same per-pod chains (an allowed peer
//! and port returns, marked on ingress; the rest is dropped, counted).
//! Admin policies are not rendered in IPv6.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use nephrite_pipeline::{AclEntry6, PodAcl6, PortRange};

use super::super::expr;
use super::super::netlink::Attrs;
use super::super::nftables::{
    CROSSING_MARK, CT_ESTABLISHED_RELATED, IPV6_DADDR_OFFSET, IPV6_SADDR_OFFSET, NF_ACCEPT,
    NF_DROP, NFPROTO_IPV6, NFT_CMP_EQ, NFT_CT_STATE, NFT_JUMP, NFT_META_L4PROTO,
    NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER, NFT_REG_1, NFT_RETURN,
    TRANSPORT_DPORT_OFFSET, protocol_number,
};
use super::{FORWARD, Table, chain_name6, send_table, table_drift};
use crate::driver::DriverError;

/// One rule of an entry: the peer (source on ingress, destination on
/// egress) in its prefix and outside its exceptions, on `port` (`None`:
/// any), returning (marked on ingress).
fn entry_rule(e: &AclEntry6, ingress: bool, port: Option<&PortRange>) -> Attrs {
    let offset = if ingress {
        IPV6_SADDR_OFFSET
    } else {
        IPV6_DADDR_OFFSET
    };
    let mut list = Attrs::default();
    expr::prefix6(&mut list, offset, e.peer, false);
    for x in &e.except {
        expr::prefix6(&mut list, offset, *x, true);
    }
    if let Some(p) = port {
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
    }
    if ingress {
        expr::set_mark_bits(&mut list, CROSSING_MARK);
    }
    expr::verdict(&mut list, NFT_RETURN);
    list
}

/// What the `ip6` table holds for `acls` (not empty).
fn table6(acls: &BTreeMap<Ipv6Addr, PodAcl6>) -> Table {
    let mut t = Table::default();
    // ct state established,related accept
    let mut list = Attrs::default();
    expr::ct(&mut list, NFT_CT_STATE);
    expr::any_bit(&mut list, CT_ESTABLISHED_RELATED);
    expr::verdict(&mut list, NF_ACCEPT);
    t.rules.push((FORWARD.to_string(), list));
    for (pod, acl) in acls {
        for (direction, ingress, jump_on, entries) in [
            ("out", false, IPV6_SADDR_OFFSET, &acl.egress),
            ("in", true, IPV6_DADDR_OFFSET, &acl.ingress),
        ] {
            let Some(entries) = entries else { continue };
            let chain = chain_name6(direction, *pod);
            t.chains.push(chain.clone());
            for e in entries {
                if e.ports.is_empty() {
                    t.rules.push((chain.clone(), entry_rule(e, ingress, None)));
                }
                for p in &e.ports {
                    t.rules
                        .push((chain.clone(), entry_rule(e, ingress, Some(p))));
                }
            }
            // counter drop
            let mut drop = Attrs::default();
            expr::counter(&mut drop);
            expr::verdict(&mut drop, NF_DROP);
            t.rules.push((chain.clone(), drop));
            // ip6 saddr|daddr <pod> jump <chain>
            let mut jump = Attrs::default();
            expr::payload(
                &mut jump,
                NFT_REG_1,
                NFT_PAYLOAD_NETWORK_HEADER,
                jump_on,
                16,
            );
            expr::cmp(&mut jump, NFT_CMP_EQ, &pod.octets());
            expr::verdict_to(&mut jump, NFT_JUMP, &chain);
            t.rules.push((FORWARD.to_string(), jump));
        }
    }
    t
}

/// Replace the `ip6` table with the pods' IPv6 `acls` in one transaction
/// (none: the table goes).
///
/// # Errors
/// The kernel refused the batch (the previous table stays).
pub fn render6(acls: &BTreeMap<Ipv6Addr, PodAcl6>) -> Result<(), DriverError> {
    let t = (!acls.is_empty()).then(|| table6(acls));
    send_table(
        NFPROTO_IPV6,
        t,
        &format!("IPv6 policies of {} pods", acls.len()),
    )
}

/// Differences between the pods' IPv6 `acls` and the `ip6` table, one line
/// each (as [`super::verify_tiers`] names them).
pub fn verify6(acls: &BTreeMap<Ipv6Addr, PodAcl6>) -> Vec<String> {
    let t = (!acls.is_empty()).then(|| table6(acls));
    table_drift(NFPROTO_IPV6, "ip6", t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nephrite_pipeline::Protocol;

    #[test]
    fn an_isolated_pod_gets_its_ipv6_peers_then_a_drop_and_the_forward_chain_jumps() {
        let pod: Ipv6Addr = "fd00::1".parse().expect("v6");
        let acls = BTreeMap::from([(
            pod,
            PodAcl6 {
                ingress: Some(vec![AclEntry6 {
                    peer: "fd00::/64".parse().expect("cidr"),
                    except: vec!["fd00::8/125".parse().expect("cidr")],
                    ports: vec![PortRange {
                        protocol: Protocol::Tcp,
                        range: Some((8080, 8090)),
                    }],
                }]),
                egress: None,
            },
        )]);
        let t = table6(&acls);
        assert_eq!(t.chains, ["in.fd00--1"]);
        let chains: Vec<&str> = t.rules.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(chains, ["forward", "in.fd00--1", "in.fd00--1", "forward"]);
        let text = String::from_utf8_lossy(&t.rules[1].1.0).into_owned();
        for e in ["payload", "bitwise", "cmp", "range", "meta", "immediate"] {
            assert!(text.contains(e), "{e} in the entry's rule");
        }
    }

    #[test]
    fn the_kernel_takes_the_ipv6_table_and_verify_reads_it_back() {
        let test = "the_kernel_takes_the_ipv6_table_and_verify_reads_it_back";
        if let Err(e) =
            nephrite_test_services::require_root("creates a network namespace and nftables tables")
        {
            e.skip(test);
            return;
        }
        let pod: Ipv6Addr = "fd00::1".parse().expect("v6");
        let acls = BTreeMap::from([(
            pod,
            PodAcl6 {
                ingress: Some(vec![AclEntry6 {
                    peer: "fd00::/64".parse().expect("cidr"),
                    except: vec!["fd00::3/128".parse().expect("cidr")],
                    ports: vec![],
                }]),
                egress: Some(vec![]),
            },
        )]);
        std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .expect("unshare(CLONE_NEWNET)");
            assert_eq!(
                verify6(&acls),
                ["policy: table ip6 nimbess-policy is missing"]
            );
            render6(&acls).expect("the kernel takes the table");
            assert_eq!(verify6(&acls), Vec::<String>::new());
            render6(&BTreeMap::new()).expect("the table goes");
            assert_eq!(verify6(&BTreeMap::new()), Vec::<String>::new());
        })
        .join()
        .expect("the test's thread");
    }
}
