//! A Service port's backends: its map of slot → `backend . port`, and its
//! chain's one DNAT rule picking a slot. An endpoint change flushes the map
//! and adds its slots again (and, when the slot count changes, replaces
//! the rule), in the diff's batch.
//!
//! The messages are those `nft --debug=netlink` shows for the same
//! statements: the map's key is the `numgen`/`jhash` result (a host-order
//! `u32`), its data `ip daddr . tcp dport` (4 address bytes — 16 for
//! `ip6 daddr` —, 2 port bytes padded to 4, both network order); the rule
//! loads `meta l4proto`, compares it, picks a slot into register 1, looks
//! the slot up in the map (address into register 1, port into the 32-bit
//! register after the address) and DNATs to them.

use nephrite_pipeline::{Affinity, LoadBalancer, LoadBalancerKey};

use super::super::expr::{self, Element, SetSpec, expr};
use super::super::netlink::{Attrs, Batch};
use super::super::nftables::{
    BYTEORDER_HOST_ENDIAN, JHASH_SEED, NFT_CMP_EQ, NFT_HASH_JENKINS, NFT_META_L4PROTO,
    NFT_MSG_DELSETELEM, NFT_MSG_NEWSETELEM, NFT_NAT_DNAT, NFT_NG_RANDOM,
    NFT_PAYLOAD_NETWORK_HEADER, NFT_REG_1, NFT_REG_2, NFTA_HASH_DREG, NFTA_HASH_LEN,
    NFTA_HASH_MODULUS, NFTA_HASH_OFFSET, NFTA_HASH_SEED, NFTA_HASH_SREG, NFTA_HASH_TYPE,
    NFTA_LOOKUP_DREG, NFTA_LOOKUP_SET, NFTA_LOOKUP_SREG, NFTA_NAT_FAMILY, NFTA_NAT_REG_ADDR_MIN,
    NFTA_NAT_REG_PROTO_MIN, NFTA_NAT_TYPE, NFTA_NG_DREG, NFTA_NG_MODULUS, NFTA_NG_OFFSET,
    NFTA_NG_TYPE, NFTNL_UDATA_SET_KEYBYTEORDER, NLM_F_CREATE, TYPE_BITS, TYPE_INET_SERVICE,
    TYPE_INTEGER,
};
use super::{
    NatFamily, TABLE, add_rule, chain_name, flush_chain, map_name, proto_number, slot_backends,
};

/// The backend map `name` (created with the number `id` in its batch).
pub(super) fn map<A: NatFamily>(name: &str, id: u32) -> Attrs {
    // tells `nft` the slot numbers are host-order integers
    let mut userdata = vec![NFTNL_UDATA_SET_KEYBYTEORDER, 4];
    userdata.extend_from_slice(&BYTEORDER_HOST_ENDIAN.to_ne_bytes());
    let spec = SetSpec {
        name,
        id,
        key_type: TYPE_INTEGER,
        key_len: 4,
        data: Some(((A::TYPE << TYPE_BITS) | TYPE_INET_SERVICE, A::LEN + 4)),
        userdata: &userdata,
    };
    expr::set(TABLE, &spec)
}

/// The map's elements: slot number → backend address and port.
fn elements<A: NatFamily>(lb: &LoadBalancer<A>) -> Vec<Element<'static>> {
    slot_backends(lb)
        .into_iter()
        .enumerate()
        .map(|(slot, (address, port))| {
            let mut data = address.bytes();
            data.extend_from_slice(&port.to_be_bytes());
            data.extend_from_slice(&[0, 0]);
            Element::Value((slot as u32).to_ne_bytes().to_vec(), data)
        })
        .collect()
}

/// The backend `address . port` an element's data holds (`None`: not a
/// backend's data).
pub(super) fn backend_of<A: NatFamily>(data: &[u8]) -> Option<(A, u16)> {
    let address = A::from_bytes(data)?;
    let at = A::LEN as usize;
    let port: [u8; 2] = data.get(at..at + 2)?.try_into().ok()?;
    Some((address, u16::from_be_bytes(port)))
}

/// The chain's one rule: `meta l4proto P dnat ip to <pick> mod N map @be…`.
fn dnat_rule<A: NatFamily>(key: &LoadBalancerKey, lb: &LoadBalancer<A>, slots: u32) -> Attrs {
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
                A::SADDR_OFFSET,
                A::LEN,
            );
            expr(&mut list, "hash", |d| {
                d.be32(NFTA_HASH_SREG, NFT_REG_2)
                    .be32(NFTA_HASH_DREG, NFT_REG_1)
                    .be32(NFTA_HASH_LEN, A::LEN)
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
            .be32(NFTA_NAT_FAMILY, u32::from(A::NFPROTO))
            .be32(NFTA_NAT_REG_ADDR_MIN, NFT_REG_1)
            .be32(NFTA_NAT_REG_PROTO_MIN, A::after_address());
    });
    list
}

/// The map's elements and the chain's rule of a Service port whose map
/// and chain are empty (no backend: neither).
pub(super) fn fill<A: NatFamily>(batch: &mut Batch, key: &LoadBalancerKey, lb: &LoadBalancer<A>) {
    let slots = elements(lb);
    if slots.is_empty() {
        return;
    }
    let add = expr::elements(TABLE, &map_name(key), &slots);
    batch.nft(A::NFPROTO, NFT_MSG_NEWSETELEM, NLM_F_CREATE, &add);
    add_rule::<A>(
        batch,
        &chain_name(key),
        &dnat_rule(key, lb, slots.len() as u32),
    );
}

/// Rewrite the backends of a Service port whose backends alone changed:
/// the map flushed and filled again, and the rule replaced too when `rule`
/// (the slot count changed).
pub(super) fn rewrite<A: NatFamily>(
    batch: &mut Batch,
    key: &LoadBalancerKey,
    lb: &LoadBalancer<A>,
    rule: bool,
) {
    // no element list: the whole map is flushed
    let flush = expr::elements(TABLE, &map_name(key), &[]);
    batch.nft(A::NFPROTO, NFT_MSG_DELSETELEM, 0, &flush);
    if rule {
        flush_chain::<A>(batch, &chain_name(key));
        fill(batch, key, lb);
    } else {
        let add = expr::elements(TABLE, &map_name(key), &elements(lb));
        batch.nft(A::NFPROTO, NFT_MSG_NEWSETELEM, NLM_F_CREATE, &add);
    }
}
