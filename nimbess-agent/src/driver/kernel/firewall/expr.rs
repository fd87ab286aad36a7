//! The nf_tables objects and rule expressions the firewall's netlink
//! renderings share: tables, chains, sets, set elements and rules as
//! message attributes, and the expressions (`payload`, `cmp`, `range`,
//! `bitwise`, `meta`, `ct`, `fib`, `lookup`, `reject`, `immediate`, …)
//! that make a rule, each written as `nft --debug=netlink` shows it for
//! the matching `nft` statement.

use nephrite_pipeline::{Ipv4Cidr, Ipv6Cidr};

use super::netlink::Attrs;
use super::nftables::{
    IFNAMSIZ, NF_ACCEPT, NFT_CMP_EQ, NFT_CMP_NEQ, NFT_META_MARK, NFT_PAYLOAD_NETWORK_HEADER,
    NFT_RANGE_EQ, NFT_REG_1, NFT_REG_VERDICT, NFT_REJECT_ICMP_UNREACH, NFT_REJECT_TCP_RST,
    NFT_SET_MAP, NFTA_BITWISE_DREG, NFTA_BITWISE_LEN, NFTA_BITWISE_MASK, NFTA_BITWISE_SREG,
    NFTA_BITWISE_XOR, NFTA_CHAIN_HOOK, NFTA_CHAIN_NAME as CHAIN_NAME, NFTA_CHAIN_NAME,
    NFTA_CHAIN_POLICY, NFTA_CHAIN_TABLE, NFTA_CHAIN_TYPE, NFTA_CMP_DATA, NFTA_CMP_OP,
    NFTA_CMP_SREG, NFTA_CT_DREG, NFTA_CT_KEY, NFTA_DATA_VALUE, NFTA_DATA_VERDICT, NFTA_EXPR_DATA,
    NFTA_EXPR_NAME, NFTA_FIB_DREG, NFTA_FIB_FLAGS, NFTA_FIB_RESULT, NFTA_HOOK_DEV,
    NFTA_HOOK_HOOKNUM, NFTA_HOOK_PRIORITY, NFTA_IMMEDIATE_DATA, NFTA_IMMEDIATE_DREG,
    NFTA_LIST_ELEM, NFTA_LOOKUP_DREG, NFTA_LOOKUP_SET, NFTA_LOOKUP_SREG, NFTA_META_DREG,
    NFTA_META_KEY, NFTA_META_SREG, NFTA_PAYLOAD_BASE, NFTA_PAYLOAD_DREG, NFTA_PAYLOAD_LEN,
    NFTA_PAYLOAD_OFFSET, NFTA_RANGE_FROM_DATA, NFTA_RANGE_OP, NFTA_RANGE_SREG, NFTA_RANGE_TO_DATA,
    NFTA_REJECT_ICMP_CODE, NFTA_REJECT_TYPE, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS,
    NFTA_RULE_TABLE, NFTA_SET_DATA_LEN, NFTA_SET_DATA_TYPE, NFTA_SET_ELEM_DATA, NFTA_SET_ELEM_KEY,
    NFTA_SET_ELEM_LIST_ELEMENTS, NFTA_SET_ELEM_LIST_SET, NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_FLAGS,
    NFTA_SET_ID, NFTA_SET_KEY_LEN, NFTA_SET_KEY_TYPE, NFTA_SET_NAME, NFTA_SET_TABLE,
    NFTA_SET_USERDATA, NFTA_TABLE_NAME, NFTA_VERDICT_CHAIN, NFTA_VERDICT_CODE,
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

/// A regular chain (no hook: reached by a jump, a goto or a map) of
/// `table`; also what names a chain to delete.
pub(super) fn chain(table: &str, name: &str) -> Attrs {
    let mut c = Attrs::default();
    c.str(NFTA_CHAIN_TABLE, table).str(CHAIN_NAME, name);
    c
}

/// A named set (or map) of a table, as `nft` declares it.
pub(super) struct SetSpec<'a> {
    /// The set's name.
    pub name: &'a str,
    /// Its number in the batch creating it (`NFTA_SET_ID`, unique there).
    pub id: u32,
    /// `nft`'s data type of the key (what it prints the keys as).
    pub key_type: u32,
    /// The key's length in bytes (each field of a concatenation padded
    /// to 4).
    pub key_len: u32,
    /// A map's data: `nft`'s data type and length (`NFT_DATA_VERDICT`
    /// and 0 for a verdict map); `None` for a set.
    pub data: Option<(u32, u32)>,
    /// `nft`'s user data (how to print the keys), or none.
    pub userdata: &'a [u8],
}

/// A set of `table` as `spec` says; also, with only the table and name
/// read, what names a set to delete.
pub(super) fn set(table: &str, spec: &SetSpec<'_>) -> Attrs {
    let mut s = named_set(table, spec.name);
    s.be32(NFTA_SET_KEY_TYPE, spec.key_type)
        .be32(NFTA_SET_KEY_LEN, spec.key_len);
    match spec.data {
        Some((kind, len)) => {
            s.be32(NFTA_SET_FLAGS, NFT_SET_MAP)
                .be32(NFTA_SET_DATA_TYPE, kind);
            if len > 0 {
                s.be32(NFTA_SET_DATA_LEN, len);
            }
        }
        None => {
            s.be32(NFTA_SET_FLAGS, 0);
        }
    }
    s.be32(NFTA_SET_ID, spec.id);
    if !spec.userdata.is_empty() {
        s.put(NFTA_SET_USERDATA, spec.userdata);
    }
    s
}

/// A set of `table` named `name` (what deletes it).
pub(super) fn named_set(table: &str, name: &str) -> Attrs {
    let mut s = Attrs::default();
    s.str(NFTA_SET_TABLE, table).str(NFTA_SET_NAME, name);
    s
}

/// One element of a set: its key and, in a map, its data.
pub(super) enum Element<'a> {
    /// A set's element: the key.
    Key(Vec<u8>),
    /// A map's element: the key and its data value.
    Value(Vec<u8>, Vec<u8>),
    /// A verdict map's element: the key, the verdict code and its chain.
    Verdict(Vec<u8>, u32, &'a str),
}

/// Elements of the set `set` of `table` (for `NFT_MSG_NEWSETELEM` and
/// `NFT_MSG_DELSETELEM`; no elements: every element, to flush the set).
pub(super) fn elements(table: &str, set: &str, elements: &[Element<'_>]) -> Attrs {
    let mut a = Attrs::default();
    a.str(NFTA_SET_ELEM_LIST_TABLE, table)
        .str(NFTA_SET_ELEM_LIST_SET, set);
    if elements.is_empty() {
        return a;
    }
    a.nest(NFTA_SET_ELEM_LIST_ELEMENTS, |list| {
        for element in elements {
            list.nest(NFTA_LIST_ELEM, |e| match element {
                Element::Key(key) => value(e, NFTA_SET_ELEM_KEY, key),
                Element::Value(key, data) => {
                    value(e, NFTA_SET_ELEM_KEY, key);
                    value(e, NFTA_SET_ELEM_DATA, data);
                }
                Element::Verdict(key, code, chain) => {
                    value(e, NFTA_SET_ELEM_KEY, key);
                    e.nest(NFTA_SET_ELEM_DATA, |d| verdict_data(d, *code, Some(chain)));
                }
            });
        }
    });
    a
}

/// A verdict as data (`NFTA_DATA_VERDICT`): `code`, and the chain of a
/// jump or goto.
fn verdict_data(a: &mut Attrs, code: u32, chain: Option<&str>) {
    a.nest(NFTA_DATA_VERDICT, |v| {
        v.be32(NFTA_VERDICT_CODE, code);
        if let Some(chain) = chain {
            v.str(NFTA_VERDICT_CHAIN, chain);
        }
    });
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

/// Go on when register 1 lies between `from` and `to` (inclusive, both
/// in network order as the register holds them).
pub(super) fn range(list: &mut Attrs, from: &[u8], to: &[u8]) {
    expr(list, "range", |d| {
        d.be32(NFTA_RANGE_SREG, NFT_REG_1)
            .be32(NFTA_RANGE_OP, NFT_RANGE_EQ);
        value(d, NFTA_RANGE_FROM_DATA, from);
        value(d, NFTA_RANGE_TO_DATA, to);
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

/// Register 1 = (register 1 & `mask`) ^ `xor` (as long as `mask`, 4 or
/// 16 bytes, as the register holds them).
fn bitwise(list: &mut Attrs, mask: &[u8], xor: &[u8]) {
    expr(list, "bitwise", |d| {
        d.be32(NFTA_BITWISE_SREG, NFT_REG_1)
            .be32(NFTA_BITWISE_DREG, NFT_REG_1)
            .be32(NFTA_BITWISE_LEN, mask.len() as u32);
        value(d, NFTA_BITWISE_MASK, mask);
        value(d, NFTA_BITWISE_XOR, xor);
    });
}

/// Register 1 &= `mask`.
fn and(list: &mut Attrs, mask: &[u8; 4]) {
    bitwise(list, mask, &[0; 4]);
}

/// `ip6 saddr|daddr <prefix>` (`!=` when `outside`): the IPv6 address at
/// `offset` of the network header lies in (or outside) `prefix`.
pub(super) fn prefix6(list: &mut Attrs, offset: u32, prefix: Ipv6Cidr, outside: bool) {
    let mask = prefix.mask();
    payload(list, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, offset, 16);
    bitwise(list, &mask.to_be_bytes(), &[0; 16]);
    let op = if outside { NFT_CMP_NEQ } else { NFT_CMP_EQ };
    cmp(list, op, &(u128::from(prefix.addr) & mask).to_be_bytes());
}

/// `ip saddr|daddr <prefix>`: the IPv4 address at `offset` of the network
/// header lies in `prefix`.
pub(super) fn match_prefix(list: &mut Attrs, offset: u32, prefix: Ipv4Cidr) {
    prefix_cmp(list, offset, prefix, NFT_CMP_EQ);
}

/// `ip saddr|daddr != <prefix>`: the address lies outside `prefix`.
pub(super) fn outside_prefix(list: &mut Attrs, offset: u32, prefix: Ipv4Cidr) {
    prefix_cmp(list, offset, prefix, NFT_CMP_NEQ);
}

fn prefix_cmp(list: &mut Attrs, offset: u32, prefix: Ipv4Cidr, op: u32) {
    payload(list, NFT_REG_1, NFT_PAYLOAD_NETWORK_HEADER, offset, 4);
    and(list, &prefix.mask().to_be_bytes());
    cmp(
        list,
        op,
        &(u32::from(prefix.addr) & prefix.mask()).to_be_bytes(),
    );
}

/// `meta mark set meta mark or <bits>`.
pub(super) fn set_mark_bits(list: &mut Attrs, bits: u32) {
    meta(list, NFT_META_MARK);
    bitwise(list, &(!bits).to_ne_bytes(), &bits.to_ne_bytes());
    expr(list, "meta", |d| {
        d.be32(NFTA_META_KEY, NFT_META_MARK)
            .be32(NFTA_META_SREG, NFT_REG_1);
    });
}

/// Load the packet's meta `key` into register 1.
pub(super) fn meta(list: &mut Attrs, key: u32) {
    meta_into(list, key, NFT_REG_1);
}

/// Load the packet's meta `key` into register `dreg`.
pub(super) fn meta_into(list: &mut Attrs, key: u32, dreg: u32) {
    expr(list, "meta", |d| {
        d.be32(NFTA_META_KEY, key).be32(NFTA_META_DREG, dreg);
    });
}

/// Look the registers from `sreg` on up in the set `set`: go on when the
/// key is there; for a map, its data into `dreg` ([`NFT_REG_VERDICT`]: the
/// verdict an element of a verdict map holds).
pub(super) fn lookup(list: &mut Attrs, set: &str, sreg: u32, dreg: Option<u32>) {
    expr(list, "lookup", |d| {
        d.str(NFTA_LOOKUP_SET, set).be32(NFTA_LOOKUP_SREG, sreg);
        if let Some(dreg) = dreg {
            d.be32(NFTA_LOOKUP_DREG, dreg);
        }
    });
}

/// Load the routing lookup's `result` for the packet (`flags`: which
/// address, which interface) into register 1.
pub(super) fn fib(list: &mut Attrs, result: u32, flags: u32) {
    expr(list, "fib", |d| {
        d.be32(NFTA_FIB_DREG, NFT_REG_1)
            .be32(NFTA_FIB_RESULT, result)
            .be32(NFTA_FIB_FLAGS, flags);
    });
}

/// `reject with tcp reset`: the TCP client hears "refused" (no ICMP error,
/// which the host rate-limits per destination).
pub(super) fn reject_tcp_reset(list: &mut Attrs) {
    expr(list, "reject", |d| {
        d.be32(NFTA_REJECT_TYPE, NFT_REJECT_TCP_RST);
    });
}

/// `reject`: answer an ICMP (in `ip6` tables ICMPv6) destination
/// unreachable of `code` (port unreachable: a client hears "refused").
pub(super) fn reject_with(list: &mut Attrs, code: u8) {
    expr(list, "reject", |d| {
        d.be32(NFTA_REJECT_TYPE, NFT_REJECT_ICMP_UNREACH)
            .put(NFTA_REJECT_ICMP_CODE, &[code]);
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

/// End the rule with the verdict `code` (`NF_ACCEPT`, `NF_DROP`,
/// `NFT_RETURN`).
pub(super) fn verdict(list: &mut Attrs, code: u32) {
    immediate_verdict(list, code, None);
}

/// End the rule with a jump or goto (`code`) to `chain`.
pub(super) fn verdict_to(list: &mut Attrs, code: u32, chain: &str) {
    immediate_verdict(list, code, Some(chain));
}

fn immediate_verdict(list: &mut Attrs, code: u32, chain: Option<&str>) {
    expr(list, "immediate", |d| {
        d.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT)
            .nest(NFTA_IMMEDIATE_DATA, |data| verdict_data(data, code, chain));
    });
}

/// An interface name as nf_tables compares it whole (NUL-padded).
pub(super) fn ifname(name: &str) -> Vec<u8> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.resize(IFNAMSIZ, 0);
    bytes
}
