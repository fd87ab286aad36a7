//! ACL modules rendered as nftables: per port, a `netdev` table named
//! after the host veth with one base chain on the veth's ingress hook (what
//! the pod sends enters the data plane there) and one rule per ACL rule, in
//! order (first match wins), each with a counter; no rule matched → accept.
//!
//! nf_tables is spoken over netlink directly (`NETLINK_NETFILTER`, one
//! batch per change, "add table; delete table; add table …" so a change
//! replaces the old rules atomically); no `nft` process.

use nephrite_pipeline::{AclAction, AclProtocol, AclRule};

use super::expr::{self, Hook};
use super::netlink::{Attrs, Batch, count_rules, send_batch};
use super::nftables::{
    ACL_CHAIN, ETH_P_IP, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, IPV4_DADDR_OFFSET,
    IPV4_PROTOCOL_OFFSET, IPV4_SADDR_OFFSET, NF_ACCEPT, NF_DROP, NF_NETDEV_INGRESS, NFPROTO_NETDEV,
    NFT_CMP_EQ, NFT_META_PROTOCOL, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE,
    NFT_MSG_NEWTABLE, NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER, NFT_REG_1,
    NLM_F_APPEND, NLM_F_CREATE, TRANSPORT_DPORT_OFFSET,
};
use crate::driver::DriverError;

pub mod tables;

/// The expressions of one ACL rule.
fn rule_expressions(rule: &AclRule) -> Attrs {
    let mut list = Attrs::default();
    // meta protocol == ip
    expr::meta(&mut list, NFT_META_PROTOCOL);
    expr::cmp(&mut list, NFT_CMP_EQ, &ETH_P_IP.to_be_bytes());
    if let Some(src) = rule.src {
        expr::match_prefix(&mut list, IPV4_SADDR_OFFSET, src);
    }
    if let Some(dst) = rule.dst {
        expr::match_prefix(&mut list, IPV4_DADDR_OFFSET, dst);
    }
    if let Some(p) = rule.protocol {
        let number = match p {
            AclProtocol::Icmp => IPPROTO_ICMP,
            AclProtocol::Tcp => IPPROTO_TCP,
            AclProtocol::Udp => IPPROTO_UDP,
        };
        expr::payload(
            &mut list,
            NFT_REG_1,
            NFT_PAYLOAD_NETWORK_HEADER,
            IPV4_PROTOCOL_OFFSET,
            1,
        );
        expr::cmp(&mut list, NFT_CMP_EQ, &[number]);
    }
    if let Some(port) = rule.port {
        expr::payload(
            &mut list,
            NFT_REG_1,
            NFT_PAYLOAD_TRANSPORT_HEADER,
            TRANSPORT_DPORT_OFFSET,
            2,
        );
        expr::cmp(&mut list, NFT_CMP_EQ, &port.to_be_bytes());
    }
    expr::counter(&mut list);
    let verdict = match rule.action {
        AclAction::Allow => NF_ACCEPT,
        AclAction::Deny => NF_DROP,
    };
    expr::verdict(&mut list, verdict);
    list
}

/// Replace the ACL of the port whose host veth is `device` with `rules`
/// (no rules: the table goes away).
///
/// # Errors
/// The kernel refused the batch.
pub fn render(device: &str, rules: &[AclRule]) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    let table = expr::table(device);
    batch.nft(NFPROTO_NETDEV, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
    batch.nft(NFPROTO_NETDEV, NFT_MSG_DELTABLE, 0, &table);
    if !rules.is_empty() {
        batch.nft(NFPROTO_NETDEV, NFT_MSG_NEWTABLE, NLM_F_CREATE, &table);
        let hook = Hook {
            number: NF_NETDEV_INGRESS,
            priority: 0,
            device: Some(device),
        };
        let chain = expr::base_chain(device, ACL_CHAIN, "filter", &hook);
        batch.nft(NFPROTO_NETDEV, NFT_MSG_NEWCHAIN, NLM_F_CREATE, &chain);
        for rule in rules {
            let r = expr::rule(device, ACL_CHAIN, &rule_expressions(rule));
            batch.nft(
                NFPROTO_NETDEV,
                NFT_MSG_NEWRULE,
                NLM_F_CREATE | NLM_F_APPEND,
                &r,
            );
        }
    }
    send_batch(batch, &format!("ACL of {device} ({} rules)", rules.len()))
}

/// Remove the ACL table of `device` if it exists.
///
/// # Errors
/// The kernel refused.
pub fn remove(device: &str) -> Result<(), DriverError> {
    render(device, &[])
}

/// How many ACL rules the kernel holds for `device`.
///
/// # Errors
/// The dump failed (a missing table counts as zero rules).
pub fn rendered_rules(device: &str) -> Result<usize, DriverError> {
    count_rules(NFPROTO_NETDEV, device)
}
