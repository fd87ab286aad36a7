//! A Service port's backends rewritten over nf_tables netlink, without
//! `nft`: one batch flushes the port's backend map and adds its slots (and,
//! when the slot count changes, replaces the chain's one DNAT rule). `nft
//! -f` would first read the whole ruleset back (every map's elements) to
//! build its cache, which with a thousand Services costs far more than
//! the change itself.
//!
//! The messages are those `nft --debug=netlink` shows for the same
//! statements: the map's key is the `numgen`/`jhash` result (a host-order
//! `u32`), its data `ip daddr . tcp dport` (4 address bytes, 2 port bytes
//! padded to 4, both network order); the rule loads `meta l4proto`,
//! compares it, picks a slot into register 1, looks the slot up in the map
//! (address into register 1, port into 32-bit register 1) and DNATs to them.

use nephrite_pipeline::{Affinity, LoadBalancer, LoadBalancerKey};

use super::super::expr::{self, expr, value};
use super::super::netlink::{Attrs, Batch, send_batch};
use super::super::nftables::{
    IPV4_SADDR_OFFSET, JHASH_SEED, NFPROTO_IPV4, NFT_CMP_EQ, NFT_HASH_JENKINS, NFT_META_L4PROTO,
    NFT_MSG_DELRULE, NFT_MSG_DELSETELEM, NFT_MSG_NEWRULE, NFT_MSG_NEWSETELEM, NFT_NAT_DNAT,
    NFT_NG_RANDOM, NFT_PAYLOAD_NETWORK_HEADER, NFT_REG_1, NFT_REG_2, NFT_REG32_01, NFTA_HASH_DREG,
    NFTA_HASH_LEN, NFTA_HASH_MODULUS, NFTA_HASH_OFFSET, NFTA_HASH_SEED, NFTA_HASH_SREG,
    NFTA_HASH_TYPE, NFTA_LIST_ELEM, NFTA_LOOKUP_DREG, NFTA_LOOKUP_SET, NFTA_LOOKUP_SREG,
    NFTA_NAT_FAMILY, NFTA_NAT_REG_ADDR_MIN, NFTA_NAT_REG_PROTO_MIN, NFTA_NAT_TYPE, NFTA_NG_DREG,
    NFTA_NG_MODULUS, NFTA_NG_OFFSET, NFTA_NG_TYPE, NFTA_RULE_CHAIN, NFTA_RULE_TABLE,
    NFTA_SET_ELEM_DATA, NFTA_SET_ELEM_KEY, NFTA_SET_ELEM_LIST_ELEMENTS, NFTA_SET_ELEM_LIST_SET,
    NFTA_SET_ELEM_LIST_TABLE, NLM_F_APPEND, NLM_F_CREATE,
};
use super::{TABLE, chain_name, map_name, proto_number, slot_backends};
use crate::driver::DriverError;

/// One Service port whose backends change and nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendUpdate {
    /// The Service port.
    pub key: LoadBalancerKey,
    /// Its module as it is now.
    pub lb: LoadBalancer,
    /// True when the slot count changes (the DNAT rule is replaced too).
    pub rule: bool,
}

/// The map's elements: slot number → backend address and port.
fn elements(lb: &LoadBalancer) -> Attrs {
    let mut list = Attrs::default();
    for (slot, (address, port)) in slot_backends(lb).into_iter().enumerate() {
        list.nest(NFTA_LIST_ELEM, |e| {
            value(e, NFTA_SET_ELEM_KEY, &(slot as u32).to_ne_bytes());
            let mut data = address.octets().to_vec();
            data.extend_from_slice(&port.to_be_bytes());
            data.extend_from_slice(&[0, 0]);
            value(e, NFTA_SET_ELEM_DATA, &data);
        });
    }
    list
}

/// The chain's one rule: `meta l4proto P dnat ip to <pick> mod N map @be…`.
fn dnat_rule(key: &LoadBalancerKey, lb: &LoadBalancer, slots: u32) -> Attrs {
    let mut list = Attrs::default();
    expr::meta(&mut list, NFT_META_L4PROTO);
    expr::cmp(&mut list, NFT_CMP_EQ, &[proto_number(key.protocol)]);
    match lb.affinity {
        Affinity::None => expr(&mut list, "numgen", |d| {
            d.be32(NFTA_NG_DREG, NFT_REG_1)
                .be32(NFTA_NG_MODULUS, slots)
                .be32(NFTA_NG_TYPE, NFT_NG_RANDOM)
                .be32(NFTA_NG_OFFSET, 0);
        }),
        Affinity::ClientIp => {
            expr::payload(
                &mut list,
                NFT_REG_2,
                NFT_PAYLOAD_NETWORK_HEADER,
                IPV4_SADDR_OFFSET,
                4,
            );
            expr(&mut list, "hash", |d| {
                d.be32(NFTA_HASH_SREG, NFT_REG_2)
                    .be32(NFTA_HASH_DREG, NFT_REG_1)
                    .be32(NFTA_HASH_LEN, 4)
                    .be32(NFTA_HASH_MODULUS, slots)
                    .be32(NFTA_HASH_SEED, JHASH_SEED)
                    .be32(NFTA_HASH_OFFSET, 0)
                    .be32(NFTA_HASH_TYPE, NFT_HASH_JENKINS);
            });
        }
    }
    expr(&mut list, "lookup", |d| {
        d.str(NFTA_LOOKUP_SET, &map_name(key))
            .be32(NFTA_LOOKUP_SREG, NFT_REG_1)
            .be32(NFTA_LOOKUP_DREG, NFT_REG_1);
    });
    expr(&mut list, "nat", |d| {
        d.be32(NFTA_NAT_TYPE, NFT_NAT_DNAT)
            .be32(NFTA_NAT_FAMILY, u32::from(NFPROTO_IPV4))
            .be32(NFTA_NAT_REG_ADDR_MIN, NFT_REG_1)
            .be32(NFTA_NAT_REG_PROTO_MIN, NFT_REG32_01);
    });
    list
}

/// Rewrite the backends of `updates` in one nf_tables transaction.
///
/// # Errors
/// The kernel refused the batch (nothing of it applied).
pub fn apply(updates: &[BackendUpdate]) -> Result<(), DriverError> {
    if updates.is_empty() {
        return Ok(());
    }
    let mut batch = Batch::new();
    for u in updates {
        let slots = slot_backends(&u.lb).len() as u32;
        let mut map = Attrs::default();
        map.str(NFTA_SET_ELEM_LIST_TABLE, TABLE)
            .str(NFTA_SET_ELEM_LIST_SET, &map_name(&u.key));
        // no element list: the whole map is flushed
        batch.nft(NFPROTO_IPV4, NFT_MSG_DELSETELEM, 0, &map);
        let mut add = Attrs::default();
        add.str(NFTA_SET_ELEM_LIST_TABLE, TABLE)
            .str(NFTA_SET_ELEM_LIST_SET, &map_name(&u.key))
            .nest(NFTA_SET_ELEM_LIST_ELEMENTS, |e| {
                e.0.extend_from_slice(&elements(&u.lb).0);
            });
        batch.nft(NFPROTO_IPV4, NFT_MSG_NEWSETELEM, NLM_F_CREATE, &add);
        if u.rule {
            let mut chain = Attrs::default();
            chain
                .str(NFTA_RULE_TABLE, TABLE)
                .str(NFTA_RULE_CHAIN, &chain_name(&u.key));
            // no handle: every rule of the chain goes
            batch.nft(NFPROTO_IPV4, NFT_MSG_DELRULE, 0, &chain);
            let rule = expr::rule(TABLE, &chain_name(&u.key), &dnat_rule(&u.key, &u.lb, slots));
            batch.nft(
                NFPROTO_IPV4,
                NFT_MSG_NEWRULE,
                NLM_F_CREATE | NLM_F_APPEND,
                &rule,
            );
        }
    }
    send_batch(
        batch,
        &format!("backends of {} service ports", updates.len()),
    )
}
