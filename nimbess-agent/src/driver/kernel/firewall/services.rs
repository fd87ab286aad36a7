//! Services rendered as nftables DNAT, in one `ip` table (`nimbess-svc`)
//! for the IPv4 modules and its `ip6` twin of the same name for the IPv6
//! ones (the same objects, addresses of the family: [`NatFamily`]):
//!
//! - `services`: a verdict map `VIP . protocol . port → goto <svc chain>`,
//!   looked up from the `prerouting` (pods, other hosts) and `output` (the
//!   host itself) NAT chains; `nodeports`: `protocol . port → goto` for
//!   NodePorts on the host's own addresses (`fib daddr type local`);
//! - per Service port, a map `be.<ns>.<name>.<proto>.<port>` of slot →
//!   `backend . port` (a backend of weight w holds w slots) and a chain
//!   `svc.<ns>.<name>.<proto>.<port>` with one rule, `dnat ip to numgen
//!   random mod N map @be…` (`jhash ip saddr` for `sessionAffinity:
//!   ClientIP`). An endpoint change rewrites that map's elements (and the
//!   one rule when the slot count changes), nothing else (the `backends` module);
//! - `noendpoints`: Service ports without a ready backend, rejected in the
//!   `filter` chains on `prerouting` and `output` (before routing, which
//!   may have no route for the Service CIDR) so a client hears "refused"
//!   instead of waiting: TCP with a reset, other protocols with ICMP port
//!   unreachable (which the host rate-limits per destination; a reset it
//!   does not).
//!
//! Conntrack turns replies back into the VIP. The path chosen is the `ip`
//! and `ip6` families with the bridges' `nf_call_iptables` and
//! `nf_call_ip6tables` on (br_netfilter): a client and its backend on the
//! same L2 bridge exchange frames the bridge switches, and only the IP
//! hooks called for bridged frames see them
//! (the kernel's bridge-family conntrack, `nf_conntrack_bridge`, cannot
//! DNAT and is often not built).
//!
//! Every change is one nf_tables netlink batch, so one transaction: a full
//! render ([`render`]) deletes and re-creates the table, a diff
//! ([`apply_diff`]) touches only the Service ports it names. Drift is read
//! back with netlink dumps ([`verify`]).

use std::collections::BTreeMap;

use nephrite_pipeline::{LoadBalancer, LoadBalancerKey};

pub use family::NatFamily;

use super::expr::{self, Element, Hook, SetSpec};
use super::netlink::{Attrs, Batch, send_batch};
use super::nftables::{
    IPPROTO_TCP, NF_INET_LOCAL_OUT, NF_INET_PRE_ROUTING, NFT_CMP_EQ, NFT_DATA_VERDICT,
    NFT_FIB_RESULT_ADDRTYPE, NFT_GOTO, NFT_META_L4PROTO, NFT_MSG_DELCHAIN, NFT_MSG_DELRULE,
    NFT_MSG_DELSET, NFT_MSG_DELSETELEM, NFT_MSG_DELTABLE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE,
    NFT_MSG_NEWSET, NFT_MSG_NEWSETELEM, NFT_MSG_NEWTABLE, NFT_PAYLOAD_NETWORK_HEADER,
    NFT_PAYLOAD_TRANSPORT_HEADER, NFT_REG_1, NFT_REG_VERDICT, NFT_REG32_01, NFTA_FIB_F_DADDR,
    NFTA_RULE_CHAIN, NFTA_RULE_TABLE, NLM_F_APPEND, NLM_F_CREATE, RTN_LOCAL,
    SERVICES_DNAT_PRIORITY, SERVICES_REFUSE_PRIORITY, SERVICES_TABLE as TABLE,
    TRANSPORT_DPORT_OFFSET, TYPE_BITS, TYPE_INET_PROTOCOL, TYPE_INET_SERVICE,
    protocol_keyword as proto, protocol_number as proto_number,
};
use crate::driver::DriverError;

mod backends;
mod drift;
mod family;

pub use drift::verify;

/// The verdict map dispatching a VIP's port to its Service port's chain.
const SERVICES_MAP: &str = "services";
/// The verdict map dispatching a NodePort to its Service port's chain.
const NODEPORTS_MAP: &str = "nodeports";
/// The Service ports without a ready backend.
const NOENDPOINTS_SET: &str = "noendpoints";

/// The chain of a Service port (names are DNS labels, checked when the
/// Service was read, so they are valid nftables names).
pub fn chain_name(key: &LoadBalancerKey) -> String {
    format!(
        "svc.{}.{}.{}.{}",
        key.namespace,
        key.service,
        proto(key.protocol),
        key.port
    )
}

/// The backend map of a Service port.
pub fn map_name(key: &LoadBalancerKey) -> String {
    format!(
        "be.{}.{}.{}.{}",
        key.namespace,
        key.service,
        proto(key.protocol),
        key.port
    )
}

/// The backend of each slot of the map: each backend as often as its weight.
fn slot_backends<A: NatFamily>(lb: &LoadBalancer<A>) -> Vec<(A, u16)> {
    lb.backends
        .iter()
        .flat_map(|b| std::iter::repeat_n((b.address, b.port), b.weight as usize))
        .collect()
}

/// True when `was` and `lb` differ in their backends only (same VIP,
/// NodePort, affinity and reachability).
fn backends_only<A: NatFamily>(was: &LoadBalancer<A>, lb: &LoadBalancer<A>) -> bool {
    was != lb
        && was.vip == lb.vip
        && was.node_port == lb.node_port
        && was.affinity == lb.affinity
        && slot_backends(was).is_empty() == slot_backends(lb).is_empty()
}

/// `nft`'s data type of a concatenation of `fields`.
fn concat_type(fields: &[u32]) -> u32 {
    fields.iter().fold(0, |t, f| (t << TYPE_BITS) | f)
}

/// A protocol number and a port as a concatenation holds them (each
/// field padded to 4 bytes).
fn proto_port(protocol: nephrite_pipeline::Protocol, port: u16) -> Vec<u8> {
    let mut k = vec![proto_number(protocol), 0, 0, 0];
    k.extend_from_slice(&port.to_be_bytes());
    k.extend_from_slice(&[0, 0]);
    k
}

/// The key of a Service port in `services` and `noendpoints`:
/// `VIP . protocol . port`.
fn service_key<A: NatFamily>(key: &LoadBalancerKey, lb: &LoadBalancer<A>) -> Vec<u8> {
    let mut k = lb.vip.bytes();
    k.extend_from_slice(&proto_port(key.protocol, key.port));
    k
}

/// The key of a Service port, as `nft` writes it (drift messages).
fn service_element<A: NatFamily>(key: &LoadBalancerKey, lb: &LoadBalancer<A>) -> String {
    format!("{} . {} . {}", lb.vip, proto(key.protocol), key.port)
}

fn add<A: NatFamily>(batch: &mut Batch, msg: u16, attrs: &Attrs) {
    batch.nft(A::NFPROTO, msg, NLM_F_CREATE, attrs);
}

fn delete<A: NatFamily>(batch: &mut Batch, msg: u16, attrs: &Attrs) {
    batch.nft(A::NFPROTO, msg, 0, attrs);
}

fn add_rule<A: NatFamily>(batch: &mut Batch, chain: &str, exprs: &Attrs) {
    let rule = expr::rule(TABLE, chain, exprs);
    batch.nft(
        A::NFPROTO,
        NFT_MSG_NEWRULE,
        NLM_F_CREATE | NLM_F_APPEND,
        &rule,
    );
}

/// Every rule of `chain` goes (a delete without a handle).
fn flush_chain<A: NatFamily>(batch: &mut Batch, chain: &str) {
    let mut c = Attrs::default();
    c.str(NFTA_RULE_TABLE, TABLE).str(NFTA_RULE_CHAIN, chain);
    delete::<A>(batch, NFT_MSG_DELRULE, &c);
}

/// `ip daddr . meta l4proto . th dport` (`ip6 daddr` …) into register 1
/// and the 32-bit registers after the address, then looked up in `set`
/// (its verdict taken when `verdict`).
fn lookup_service_port<A: NatFamily>(set: &str, verdict: bool) -> Attrs {
    let mut e = Attrs::default();
    expr::payload(
        &mut e,
        NFT_REG_1,
        NFT_PAYLOAD_NETWORK_HEADER,
        A::DADDR_OFFSET,
        A::LEN,
    );
    expr::meta_into(&mut e, NFT_META_L4PROTO, A::after_address());
    expr::payload(
        &mut e,
        A::after_address() + 1,
        NFT_PAYLOAD_TRANSPORT_HEADER,
        TRANSPORT_DPORT_OFFSET,
        2,
    );
    expr::lookup(&mut e, set, NFT_REG_1, verdict.then_some(NFT_REG_VERDICT));
    e
}

/// The table's skeleton: the dispatch maps, the hooked chains and their
/// rules.
fn skeleton<A: NatFamily>(batch: &mut Batch) {
    let address_port = concat_type(&[A::TYPE, TYPE_INET_PROTOCOL, TYPE_INET_SERVICE]);
    let key_len = A::LEN + 8;
    let sets = [
        (
            SERVICES_MAP,
            address_port,
            key_len,
            Some((NFT_DATA_VERDICT, 0)),
        ),
        (
            NODEPORTS_MAP,
            concat_type(&[TYPE_INET_PROTOCOL, TYPE_INET_SERVICE]),
            8,
            Some((NFT_DATA_VERDICT, 0)),
        ),
        (NOENDPOINTS_SET, address_port, key_len, None),
    ];
    for (name, key_type, key_len, data) in sets {
        let spec = SetSpec {
            name,
            id: batch.next_id(),
            key_type,
            key_len,
            data,
            userdata: &[],
        };
        add::<A>(batch, NFT_MSG_NEWSET, &expr::set(TABLE, &spec));
    }
    for (chain, hook) in [
        ("prerouting", NF_INET_PRE_ROUTING),
        ("output", NF_INET_LOCAL_OUT),
    ] {
        let hook = Hook {
            number: hook,
            priority: SERVICES_DNAT_PRIORITY,
            device: None,
        };
        add::<A>(
            batch,
            NFT_MSG_NEWCHAIN,
            &expr::base_chain(TABLE, chain, "nat", &hook),
        );
        // ip daddr . meta l4proto . th dport vmap @services
        add_rule::<A>(batch, chain, &lookup_service_port::<A>(SERVICES_MAP, true));
        // fib daddr type local meta l4proto . th dport vmap @nodeports
        let mut e = Attrs::default();
        expr::fib(&mut e, NFT_FIB_RESULT_ADDRTYPE, NFTA_FIB_F_DADDR);
        expr::cmp(&mut e, NFT_CMP_EQ, &RTN_LOCAL.to_ne_bytes());
        expr::meta(&mut e, NFT_META_L4PROTO);
        expr::payload(
            &mut e,
            NFT_REG32_01,
            NFT_PAYLOAD_TRANSPORT_HEADER,
            TRANSPORT_DPORT_OFFSET,
            2,
        );
        expr::lookup(&mut e, NODEPORTS_MAP, NFT_REG_1, Some(NFT_REG_VERDICT));
        add_rule::<A>(batch, chain, &e);
    }
    for (chain, hook) in [
        ("refuse", NF_INET_PRE_ROUTING),
        ("local", NF_INET_LOCAL_OUT),
    ] {
        let hook = Hook {
            number: hook,
            priority: SERVICES_REFUSE_PRIORITY,
            device: None,
        };
        add::<A>(
            batch,
            NFT_MSG_NEWCHAIN,
            &expr::base_chain(TABLE, chain, "filter", &hook),
        );
        // ip daddr . meta l4proto . th dport @noendpoints meta l4proto tcp
        //   reject with tcp reset (not rate-limited like ICMP errors)
        let mut e = lookup_service_port::<A>(NOENDPOINTS_SET, false);
        expr::meta(&mut e, NFT_META_L4PROTO);
        expr::cmp(&mut e, NFT_CMP_EQ, &[IPPROTO_TCP]);
        expr::reject_tcp_reset(&mut e);
        add_rule::<A>(batch, chain, &e);
        // ip daddr . meta l4proto . th dport @noendpoints reject
        let mut e = lookup_service_port::<A>(NOENDPOINTS_SET, false);
        expr::reject_with(&mut e, A::PORT_UNREACH);
        add_rule::<A>(batch, chain, &e);
    }
}

/// One Service port's objects (the table exists).
fn add_service<A: NatFamily>(batch: &mut Batch, key: &LoadBalancerKey, lb: &LoadBalancer<A>) {
    let (chain, map) = (chain_name(key), map_name(key));
    let id = batch.next_id();
    add::<A>(batch, NFT_MSG_NEWSET, &backends::map::<A>(&map, id));
    add::<A>(batch, NFT_MSG_NEWCHAIN, &expr::chain(TABLE, &chain));
    backends::fill(batch, key, lb);
    let dispatch = service_key(key, lb);
    if slot_backends(lb).is_empty() {
        let refused = [Element::Key(dispatch)];
        add::<A>(
            batch,
            NFT_MSG_NEWSETELEM,
            &expr::elements(TABLE, NOENDPOINTS_SET, &refused),
        );
        return;
    }
    let to_chain = [Element::Verdict(dispatch, NFT_GOTO, &chain)];
    add::<A>(
        batch,
        NFT_MSG_NEWSETELEM,
        &expr::elements(TABLE, SERVICES_MAP, &to_chain),
    );
    if let Some(node_port) = lb.node_port {
        let to_chain = [Element::Verdict(
            proto_port(key.protocol, node_port),
            NFT_GOTO,
            &chain,
        )];
        add::<A>(
            batch,
            NFT_MSG_NEWSETELEM,
            &expr::elements(TABLE, NODEPORTS_MAP, &to_chain),
        );
    }
}

/// Remove one rendered Service port's objects: its dispatch first (which
/// holds the chain), then the rule (which holds the map).
fn remove_service<A: NatFamily>(batch: &mut Batch, key: &LoadBalancerKey, lb: &LoadBalancer<A>) {
    let dispatch = vec![Element::Key(service_key(key, lb))];
    if slot_backends(lb).is_empty() {
        delete::<A>(
            batch,
            NFT_MSG_DELSETELEM,
            &expr::elements(TABLE, NOENDPOINTS_SET, &dispatch),
        );
    } else {
        delete::<A>(
            batch,
            NFT_MSG_DELSETELEM,
            &expr::elements(TABLE, SERVICES_MAP, &dispatch),
        );
        if let Some(node_port) = lb.node_port {
            let node = [Element::Key(proto_port(key.protocol, node_port))];
            delete::<A>(
                batch,
                NFT_MSG_DELSETELEM,
                &expr::elements(TABLE, NODEPORTS_MAP, &node),
            );
        }
    }
    let chain = chain_name(key);
    flush_chain::<A>(batch, &chain);
    delete::<A>(batch, NFT_MSG_DELCHAIN, &expr::chain(TABLE, &chain));
    delete::<A>(
        batch,
        NFT_MSG_DELSET,
        &expr::named_set(TABLE, &map_name(key)),
    );
}

/// The batch replacing the table with `services` (empty: the table goes
/// away).
fn full_batch<A: NatFamily>(services: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>) -> Batch {
    let mut batch = Batch::new();
    let table = expr::table(TABLE);
    add::<A>(&mut batch, NFT_MSG_NEWTABLE, &table);
    delete::<A>(&mut batch, NFT_MSG_DELTABLE, &table);
    if services.is_empty() {
        return batch;
    }
    add::<A>(&mut batch, NFT_MSG_NEWTABLE, &table);
    skeleton::<A>(&mut batch);
    for (key, lb) in services {
        add_service(&mut batch, key, lb);
    }
    batch
}

/// The batch taking the table from `old` to `new` (both non-empty, or the
/// caller renders in full): only the Service ports that differ; those
/// whose backends alone changed get their map (and rule) rewritten.
fn diff_batch<A: NatFamily>(
    old: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
    new: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> Batch {
    let mut batch = Batch::new();
    for (key, was) in old {
        if !new.contains_key(key) {
            remove_service(&mut batch, key, was);
        }
    }
    for (key, lb) in new {
        match old.get(key) {
            Some(was) if was == lb => {}
            Some(was) if backends_only(was, lb) => {
                let rule = slot_backends(was).len() != slot_backends(lb).len();
                backends::rewrite(&mut batch, key, lb, rule);
            }
            Some(was) => {
                remove_service(&mut batch, key, was);
                add_service(&mut batch, key, lb);
            }
            None => add_service(&mut batch, key, lb),
        }
    }
    batch
}

/// Replace the family's table with `services` in one transaction (none:
/// the table goes away).
///
/// # Errors
/// The kernel refused the batch (the table stays as it was).
pub fn render<A: NatFamily>(
    services: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> Result<(), DriverError> {
    send_batch(
        full_batch(services),
        &format!(
            "the table of {} service ports ({} {TABLE})",
            services.len(),
            A::KEYWORD
        ),
    )
}

/// Take the table from `old` to `new` (both non-empty, or the caller
/// renders in full) in one transaction: only the Service ports that
/// differ.
///
/// # Errors
/// The kernel refused the batch (the table stays as it was).
pub fn apply_diff<A: NatFamily>(
    old: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
    new: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> Result<(), DriverError> {
    let batch = diff_batch(old, new);
    let what = format!(
        "{} messages for {} service ports of table {} {TABLE}",
        batch.len(),
        new.len(),
        A::KEYWORD
    );
    send_batch(batch, &what)
}

#[cfg(test)]
mod tests;
