//! The nf_tables objects and rule expressions the firewall's netlink
//! renderings share: tables, base chains and rules as message attributes,
//! and the expressions (`payload`, `cmp`, `bitwise`, `meta`, `ct`,
//! `immediate`, …) that make a rule, each written as `nft --debug=netlink`
//! shows it for the matching `nft` statement.

use nephrite_pipeline::Ipv4Cidr;

use super::netlink::Attrs;
use super::nftables::{
    IFNAMSIZ, NF_ACCEPT, NFT_CMP_EQ, NFT_CMP_NEQ, NFT_PAYLOAD_NETWORK_HEADER, NFT_REG_1,
    NFT_REG_VERDICT, NFTA_BITWISE_DREG, NFTA_BITWISE_LEN, NFTA_BITWISE_MASK, NFTA_BITWISE_SREG,
    NFTA_BITWISE_XOR, NFTA_CHAIN_HOOK, NFTA_CHAIN_NAME, NFTA_CHAIN_POLICY, NFTA_CHAIN_TABLE,
    NFTA_CHAIN_TYPE, NFTA_CMP_DATA, NFTA_CMP_OP, NFTA_CMP_SREG, NFTA_CT_DREG, NFTA_CT_KEY,
    NFTA_DATA_VALUE, NFTA_DATA_VERDICT, NFTA_EXPR_DATA, NFTA_EXPR_NAME, NFTA_HOOK_DEV,
    NFTA_HOOK_HOOKNUM, NFTA_HOOK_PRIORITY, NFTA_IMMEDIATE_DATA, NFTA_IMMEDIATE_DREG,
    NFTA_LIST_ELEM, NFTA_META_DREG, NFTA_META_KEY, NFTA_PAYLOAD_BASE, NFTA_PAYLOAD_DREG,
    NFTA_PAYLOAD_LEN, NFTA_PAYLOAD_OFFSET, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS, NFTA_RULE_TABLE,
    NFTA_TABLE_NAME, NFTA_VERDICT_CODE,
};

/// A table's attributes (its name).
pub(super) fn table(name: &str) -> Attrs {
    let mut a = Attrs::default();
    a.str(NFTA_TABLE_NAME, name);
    a
}

/// Where a base chain hooks in.
pub(super) struct Hook<'a> {
    /// The hook number (`NF_INET_FORWARD`, `NF_NETDEV_INGRESS`, …).
    pub number: u32,
    /// The priority among the hook's chains.
    pub priority: i32,
    /// The device of a `netdev` hook.
    pub device: Option<&'a str>,
}

/// A base chain of `table` (type `kind`: `filter`, `nat`) on `hook`,
/// policy accept.
pub(super) fn base_chain(table: &str, name: &str, kind: &str, hook: &Hook<'_>) -> Attrs {
    let mut c = Attrs::default();
    c.str(NFTA_CHAIN_TABLE, table)
        .str(NFTA_CHAIN_NAME, name)
        .str(NFTA_CHAIN_TYPE, kind);
    c.nest(NFTA_CHAIN_HOOK, |h| {
        // the kernel reads the priority as a signed 32-bit number
        h.be32(NFTA_HOOK_HOOKNUM, hook.number)
            .be32(NFTA_HOOK_PRIORITY, hook.priority as u32);
        if let Some(device) = hook.device {
            h.str(NFTA_HOOK_DEV, device);
        }
    });
    c.be32(NFTA_CHAIN_POLICY, NF_ACCEPT);
    c
}

/// A rule of `chain` made of `exprs` (a list of [`expr`]).
pub(super) fn rule(table: &str, chain: &str, exprs: &Attrs) -> Attrs {
    let mut r = Attrs::default();
    r.str(NFTA_RULE_TABLE, table).str(NFTA_RULE_CHAIN, chain);
    r.nest(NFTA_RULE_EXPRESSIONS, |e| e.0.extend_from_slice(&exprs.0));
    r
}

/// One expression `name` of a rule, its attributes written by `data`.
pub(super) fn expr(list: &mut Attrs, name: &str, data: impl FnOnce(&mut Attrs)) {
    list.nest(NFTA_LIST_ELEM, |e| {
        e.str(NFTA_EXPR_NAME, name);
        e.nest(NFTA_EXPR_DATA, data);
    });
}

/// A data value attribute (`NFTA_DATA_VALUE` nested in `kind`).
pub(super) fn value(a: &mut Attrs, kind: u16, bytes: &[u8]) {
    a.nest(kind, |d| {
        d.put(NFTA_DATA_VALUE, bytes);
    });
}

/// Load `len` bytes at `offset` of header `base` into register `dreg`.
pub(super) fn payload(list: &mut Attrs, dreg: u32, base: u32, offset: u32, len: u32) {
    expr(list, "payload", |d| {
        d.be32(NFTA_PAYLOAD_DREG, dreg)
            .be32(NFTA_PAYLOAD_BASE, base)
            .be32(NFTA_PAYLOAD_OFFSET, offset)
            .be32(NFTA_PAYLOAD_LEN, len);
    });
}

/// Compare register 1 with `bytes` (`op`: [`NFT_CMP_EQ`], [`NFT_CMP_NEQ`]);
/// the rule goes on when it holds.
pub(super) fn cmp(list: &mut Attrs, op: u32, bytes: &[u8]) {
    expr(list, "cmp", |d| {
        d.be32(NFTA_CMP_SREG, NFT_REG_1).be32(NFTA_CMP_OP, op);
        value(d, NFTA_CMP_DATA, bytes);
    });
}

/// Register 1 &= `mask` (4 bytes, as the register holds them).
fn and(list: &mut Attrs, mask: &[u8; 4]) {
    expr(list, "bitwise", |d| {
        d.be32(NFTA_BITWISE_SREG, NFT_REG_1)
            .be32(NFTA_BITWISE_DREG, NFT_REG_1)
            .be32(NFTA_BITWISE_LEN, 4);
        value(d, NFTA_BITWISE_MASK, mask);
        value(d, NFTA_BITWISE_XOR, &[0, 0, 0, 0]);
    });
}

/// `ip saddr|daddr <prefix>`: the IPv4 address at `offset` of the network
/// header lies in `prefix`.
pub(super) fn match_prefix(list: &mut Attrs, offset: u32, prefix: Ipv4Cidr) {
    payload(list, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, offset, 4);
    and(list, &prefix.mask().to_be_bytes());
    cmp(
        list,
        NFT_CMP_EQ,
        &(u32::from(prefix.addr) & prefix.mask()).to_be_bytes(),
    );
}

/// Load the packet's meta `key` into register 1.
pub(super) fn meta(list: &mut Attrs, key: u32) {
    expr(list, "meta", |d| {
        d.be32(NFTA_META_KEY, key).be32(NFTA_META_DREG, NFT_REG_1);
    });
}

/// Load the connection's conntrack `key` into register 1.
pub(super) fn ct(list: &mut Attrs, key: u32) {
    expr(list, "ct", |d| {
        d.be32(NFTA_CT_KEY, key).be32(NFTA_CT_DREG, NFT_REG_1);
    });
}

/// Go on when the 32-bit host-order value in register 1 has any bit of
/// `mask` set.
pub(super) fn any_bit(list: &mut Attrs, mask: u32) {
    and(list, &mask.to_ne_bytes());
    cmp(list, NFT_CMP_NEQ, &0u32.to_ne_bytes());
}

/// Count the packets that reach it.
pub(super) fn counter(list: &mut Attrs) {
    expr(list, "counter", |_| {});
}

/// End the rule with the verdict `code` (`NF_ACCEPT`, `NF_DROP`).
pub(super) fn verdict(list: &mut Attrs, code: u32) {
    expr(list, "immediate", |d| {
        d.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT)
            .nest(NFTA_IMMEDIATE_DATA, |data| {
                data.nest(NFTA_DATA_VERDICT, |v| {
                    v.be32(NFTA_VERDICT_CODE, code);
                });
            });
    });
}

/// An interface name as nf_tables compares it whole (NUL-padded).
pub(super) fn ifname(name: &str) -> Vec<u8> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.resize(IFNAMSIZ, 0);
    bytes
}
