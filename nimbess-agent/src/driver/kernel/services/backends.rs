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

use super::{TABLE, chain_name, map_name, proto_number, slot_backends};
use crate::driver::DriverError;
use crate::driver::kernel::acl::{
    Attrs, Batch, NFT_REG_1, NLA_F_NESTED, NLM_F_APPEND, NLM_F_CREATE, expr, send_batch,
};

const NFPROTO_IPV4: u8 = 2;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_META_L4PROTO: u32 = 16;
const NFT_REG_2: u32 = 2;
/// The 32-bit register after [`NFT_REG_1`]'s first word (`NFT_REG32_01`).
const NFT_REG32_01: u32 = 9;
const NFT_NG_RANDOM: u32 = 1;
const NFT_HASH_JENKINS: u32 = 0;
const NFT_NAT_DNAT: u32 = 1;
/// The seed of `jhash ip saddr` (the same as the `nft` text's).
pub(super) const JHASH_SEED: u32 = 0x6e69_6d62;

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

fn value(a: &mut Attrs, kind: u16, bytes: &[u8]) {
    a.nest(kind, |d| {
        d.put(1, bytes);
    });
}

/// The map's elements: slot number → backend address and port.
fn elements(lb: &LoadBalancer) -> Attrs {
    let mut list = Attrs::default();
    for (slot, (address, port)) in slot_backends(lb).into_iter().enumerate() {
        list.nest(1, |e| {
            value(e, 1, &(slot as u32).to_ne_bytes());
            let mut data = address.octets().to_vec();
            data.extend_from_slice(&port.to_be_bytes());
            data.extend_from_slice(&[0, 0]);
            value(e, 2, &data);
        });
    }
    list
}

/// The chain's one rule: `meta l4proto P dnat ip to <pick> mod N map @be…`.
fn dnat_rule(key: &LoadBalancerKey, lb: &LoadBalancer, slots: u32) -> Attrs {
    let mut list = Attrs::default();
    expr(&mut list, "meta", |d| {
        d.be32(2, NFT_META_L4PROTO).be32(1, NFT_REG_1);
    });
    expr(&mut list, "cmp", |d| {
        d.be32(1, NFT_REG_1).be32(2, 0);
        value(d, 3, &[proto_number(key.protocol)]);
    });
    match lb.affinity {
        Affinity::None => expr(&mut list, "numgen", |d| {
            d.be32(1, NFT_REG_1)
                .be32(2, slots)
                .be32(3, NFT_NG_RANDOM)
                .be32(4, 0);
        }),
        Affinity::ClientIp => {
            expr(&mut list, "payload", |d| {
                d.be32(1, NFT_REG_2).be32(2, 1).be32(3, 12).be32(4, 4);
            });
            expr(&mut list, "hash", |d| {
                d.be32(1, NFT_REG_2)
                    .be32(2, NFT_REG_1)
                    .be32(3, 4)
                    .be32(4, slots)
                    .be32(5, JHASH_SEED)
                    .be32(6, 0)
                    .be32(7, NFT_HASH_JENKINS);
            });
        }
    }
    expr(&mut list, "lookup", |d| {
        d.str(1, &map_name(key))
            .be32(2, NFT_REG_1)
            .be32(3, NFT_REG_1);
    });
    expr(&mut list, "nat", |d| {
        d.be32(1, NFT_NAT_DNAT)
            .be32(2, u32::from(NFPROTO_IPV4))
            .be32(3, NFT_REG_1)
            .be32(5, NFT_REG32_01);
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
        map.str(1, TABLE).str(2, &map_name(&u.key));
        // no element list: the whole map is flushed
        batch.nft_in(NFPROTO_IPV4, NFT_MSG_DELSETELEM, 0, &map);
        let mut add = Attrs::default();
        add.str(1, TABLE).str(2, &map_name(&u.key));
        add.put(3 | NLA_F_NESTED, &elements(&u.lb).0);
        batch.nft_in(NFPROTO_IPV4, NFT_MSG_NEWSETELEM, NLM_F_CREATE, &add);
        if u.rule {
            let mut chain = Attrs::default();
            chain.str(1, TABLE).str(2, &chain_name(&u.key));
            // no handle: every rule of the chain goes
            batch.nft_in(NFPROTO_IPV4, NFT_MSG_DELRULE, 0, &chain);
            let mut rule = Attrs::default();
            rule.str(1, TABLE).str(2, &chain_name(&u.key));
            rule.put(4 | NLA_F_NESTED, &dnat_rule(&u.key, &u.lb, slots).0);
            batch.nft_in(
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
