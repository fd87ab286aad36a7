//! Services rendered as nftables DNAT, in one `ip` table (`nimbess-svc`):
//!
//! - `services`: a verdict map `VIP . protocol . port → goto <svc chain>`,
//!   looked up from the `prerouting` (pods, other hosts) and `output` (the
//!   host itself) NAT chains; `nodeports`: `protocol . port → goto` for
//!   NodePorts on the host's own addresses;
//! - per Service port, a map `be.<ns>.<name>.<proto>.<port>` of slot →
//!   `backend . port` (a backend of weight w holds w slots) and a chain
//!   `svc.<ns>.<name>.<proto>.<port>` with one rule, `dnat ip to numgen
//!   random mod N map @be…` (`jhash ip saddr` for `sessionAffinity:
//!   ClientIP`). An endpoint change rewrites that map's elements (and the
//!   one rule when the slot count changes), nothing else;
//! - `noendpoints`: Service ports without a ready backend, rejected in the
//!   `filter` chains on `prerouting` and `output` (before routing, which
//!   may have no route for the Service CIDR) so a client hears "refused"
//!   instead of waiting.
//!
//! Conntrack turns replies back into the VIP. The path chosen is the `ip`
//! family with the bridges' `nf_call_iptables` on (br_netfilter): a client
//! and its backend on the same L2 bridge exchange frames the bridge
//! switches, and only the IPv4 hooks called for bridged frames see them
//! (the kernel's bridge-family conntrack, `nf_conntrack_bridge`, cannot
//! DNAT and is often not built).
//!
//! The rules are written as `nft` input and loaded by `nft -f -`
//! ([`load`], one
//! transaction each: a full render replaces the table atomically, a diff
//! touches only the Services it names). A change of backends alone (the
//! common endpoint change) skips `nft`: [`backends`] rewrites the map (and
//! the rule when the slot count moves) over netlink in one batch.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use nephrite_pipeline::{Affinity, LoadBalancer, LoadBalancerKey};

use super::nft_program::list_table;
pub use super::nft_program::load;
use super::nftables::{
    JHASH_SEED, SERVICES_DNAT_PRIORITY, SERVICES_REFUSE_PRIORITY, SERVICES_TABLE as TABLE,
    protocol_keyword as proto, protocol_number as proto_number,
};
use crate::driver::DriverError;

pub mod backends;

/// The chain of a Service port (names are DNS labels, checked when the
/// Service was read, so they are valid nft identifiers).
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
fn slot_backends(lb: &LoadBalancer) -> Vec<(std::net::Ipv4Addr, u16)> {
    lb.backends
        .iter()
        .flat_map(|b| std::iter::repeat_n((b.address, b.port), b.weight as usize))
        .collect()
}

/// The slots of the backend map as `nft` writes them.
fn slots(lb: &LoadBalancer) -> Vec<String> {
    slot_backends(lb)
        .into_iter()
        .map(|(address, port)| format!("{address} . {port}"))
        .collect()
}

/// True when `was` and `lb` differ in their backends only (same VIP,
/// NodePort, affinity and reachability).
fn backends_only(was: &LoadBalancer, lb: &LoadBalancer) -> bool {
    was != lb
        && was.vip == lb.vip
        && was.node_port == lb.node_port
        && was.affinity == lb.affinity
        && was.backends.is_empty() == lb.backends.is_empty()
}

fn service_element(key: &LoadBalancerKey, lb: &LoadBalancer) -> String {
    format!("{} . {} . {}", lb.vip, proto(key.protocol), key.port)
}

/// The one rule of a Service port's chain (`None`: no backend).
fn dnat_rule(key: &LoadBalancerKey, lb: &LoadBalancer) -> Option<String> {
    let n = slots(lb).len();
    if n == 0 {
        return None;
    }
    let pick = match lb.affinity {
        Affinity::None => format!("numgen random mod {n}"),
        Affinity::ClientIp => format!("jhash ip saddr mod {n} seed {:#x}", JHASH_SEED),
    };
    Some(format!(
        "meta l4proto {p} dnat ip to {pick} map @{map}",
        p = proto(key.protocol),
        map = map_name(key)
    ))
}

/// Statements creating one Service port's objects (the table exists).
fn add_service(out: &mut String, key: &LoadBalancerKey, lb: &LoadBalancer) {
    let (chain, map, p) = (chain_name(key), map_name(key), proto(key.protocol));
    let _ = writeln!(
        out,
        "add map ip {TABLE} {map} {{ typeof numgen random mod 1 : ip daddr . {p} dport ; }}"
    );
    let _ = writeln!(out, "add chain ip {TABLE} {chain}");
    fill_service(out, key, lb);
    match dnat_rule(key, lb) {
        Some(_) => {
            let _ = writeln!(
                out,
                "add element ip {TABLE} services {{ {} : goto {chain} }}",
                service_element(key, lb)
            );
            if let Some(node_port) = lb.node_port {
                let _ = writeln!(
                    out,
                    "add element ip {TABLE} nodeports {{ {p} . {node_port} : goto {chain} }}"
                );
            }
        }
        None => {
            let _ = writeln!(
                out,
                "add element ip {TABLE} noendpoints {{ {} }}",
                service_element(key, lb)
            );
        }
    }
}

/// The backend map's elements and the chain's rule (both empty before).
fn fill_service(out: &mut String, key: &LoadBalancerKey, lb: &LoadBalancer) {
    let slots = slots(lb);
    if !slots.is_empty() {
        let elements: Vec<String> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{i} : {s}"))
            .collect();
        let _ = writeln!(
            out,
            "add element ip {TABLE} {} {{ {} }}",
            map_name(key),
            elements.join(", ")
        );
    }
    if let Some(rule) = dnat_rule(key, lb) {
        let _ = writeln!(out, "add rule ip {TABLE} {} {rule}", chain_name(key));
    }
}

/// Statements removing one rendered Service port's objects.
fn remove_service(out: &mut String, key: &LoadBalancerKey, lb: &LoadBalancer) {
    let p = proto(key.protocol);
    if dnat_rule(key, lb).is_some() {
        let _ = writeln!(
            out,
            "delete element ip {TABLE} services {{ {} }}",
            service_element(key, lb)
        );
        if let Some(node_port) = lb.node_port {
            let _ = writeln!(
                out,
                "delete element ip {TABLE} nodeports {{ {p} . {node_port} }}"
            );
        }
    } else {
        let _ = writeln!(
            out,
            "delete element ip {TABLE} noendpoints {{ {} }}",
            service_element(key, lb)
        );
    }
    let _ = writeln!(out, "delete chain ip {TABLE} {}", chain_name(key));
    let _ = writeln!(out, "delete map ip {TABLE} {}", map_name(key));
}

/// The table's skeleton: the dispatch maps and the hooked chains.
fn skeleton(out: &mut String) {
    let dispatch = "ip daddr . meta l4proto . th dport vmap @services";
    let nodeports = "fib daddr type local meta l4proto . th dport vmap @nodeports";
    let reject = "ip daddr . meta l4proto . th dport @noendpoints reject";
    let _ = writeln!(out, "table ip {TABLE} {{");
    out.push_str(concat!(
        "  map services {\n    type ipv4_addr . inet_proto . inet_service : verdict\n  }\n",
        "  map nodeports {\n    type inet_proto . inet_service : verdict\n  }\n",
        "  set noendpoints {\n    type ipv4_addr . inet_proto . inet_service\n  }\n",
    ));
    for (chain, hook) in [("prerouting", "prerouting"), ("output", "output")] {
        let _ = writeln!(
            out,
            "  chain {chain} {{\n    type nat hook {hook} priority {SERVICES_DNAT_PRIORITY}; policy accept;\n    {dispatch}\n    {nodeports}\n  }}"
        );
    }
    for (chain, hook) in [("refuse", "prerouting"), ("local", "output")] {
        let _ = writeln!(
            out,
            "  chain {chain} {{\n    type filter hook {hook} priority {SERVICES_REFUSE_PRIORITY}; policy accept;\n    {reject}\n  }}"
        );
    }
    out.push_str("}\n");
}

/// The `nft` input replacing the table with `services` (empty: the table
/// goes away).
pub fn full_script(services: &BTreeMap<LoadBalancerKey, LoadBalancer>) -> String {
    let mut out = format!("add table ip {TABLE}\ndelete table ip {TABLE}\n");
    if services.is_empty() {
        return out;
    }
    skeleton(&mut out);
    for (key, lb) in services {
        add_service(&mut out, key, lb);
    }
    out
}

/// The `nft` input taking the table from `old` to `new` (both non-empty
/// or the caller renders in full): only the Service ports that differ.
pub fn diff_script(
    old: &BTreeMap<LoadBalancerKey, LoadBalancer>,
    new: &BTreeMap<LoadBalancerKey, LoadBalancer>,
) -> String {
    let mut out = String::new();
    for (key, was) in old {
        if !new.contains_key(key) {
            remove_service(&mut out, key, was);
        }
    }
    for (key, lb) in new {
        match old.get(key) {
            Some(was) if was == lb => {}
            // same VIP, NodePort and reachability: only the backends change
            Some(was) if backends_only(was, lb) => {
                let _ = writeln!(out, "flush map ip {TABLE} {}", map_name(key));
                if slots(was).len() != slots(lb).len() {
                    let _ = writeln!(out, "flush chain ip {TABLE} {}", chain_name(key));
                    fill_service(&mut out, key, lb);
                } else {
                    // the rule stays: only the map's elements are rewritten
                    let elements: Vec<String> = slots(lb)
                        .iter()
                        .enumerate()
                        .map(|(i, s)| format!("{i} : {s}"))
                        .collect();
                    let _ = writeln!(
                        out,
                        "add element ip {TABLE} {} {{ {} }}",
                        map_name(key),
                        elements.join(", ")
                    );
                }
            }
            Some(was) => {
                remove_service(&mut out, key, was);
                add_service(&mut out, key, lb);
            }
            None => add_service(&mut out, key, lb),
        }
    }
    out
}

/// Take the table from `old` to `new` (both non-empty, or the caller
/// renders in full): Service ports whose backends alone changed over
/// netlink ([`backends`]), the rest with `nft -f -` ([`diff_script`] of
/// them). Two transactions at most, the `nft` one first.
///
/// # Errors
/// `nft` or the kernel refused (what was applied before stays).
pub fn apply_diff(
    old: &BTreeMap<LoadBalancerKey, LoadBalancer>,
    new: &BTreeMap<LoadBalancerKey, LoadBalancer>,
) -> Result<(), DriverError> {
    let mut updates = Vec::new();
    let (mut old_rest, mut new_rest) = (old.clone(), new.clone());
    for (key, lb) in new {
        if let Some(was) = old.get(key)
            && backends_only(was, lb)
        {
            updates.push(backends::BackendUpdate {
                key: key.clone(),
                lb: lb.clone(),
                rule: slots(was).len() != slots(lb).len(),
            });
            old_rest.remove(key);
            new_rest.remove(key);
        }
    }
    load(
        &diff_script(&old_rest, &new_rest),
        &format!("{} service ports", new.len()),
    )?;
    backends::apply(&updates)
}

/// Differences between `services` and the kernel's table, one line each
/// (a missing chain or map, a backend map whose elements differ).
pub fn verify(services: &BTreeMap<LoadBalancerKey, LoadBalancer>) -> Vec<String> {
    let listed = list_table(TABLE);
    if services.is_empty() {
        return match listed {
            Some(_) => vec![format!("services: table ip {TABLE} exists with no Service")],
            None => Vec::new(),
        };
    }
    let items = listed.unwrap_or_default();
    let mut chains = std::collections::BTreeSet::new();
    let mut maps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut dispatch: Vec<String> = Vec::new();
    for item in &items {
        if let Some(name) = item["chain"]["name"].as_str() {
            chains.insert(name.to_string());
        }
        if let Some(name) = item["map"]["name"].as_str() {
            let elems = item["map"]["elem"].as_array().cloned().unwrap_or_default();
            let rendered: Vec<String> = elems
                .iter()
                .map(|e| match &e[1]["concat"] {
                    serde_json::Value::Array(parts) => {
                        let s: Vec<String> = parts
                            .iter()
                            .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                            .collect();
                        s.join(" . ")
                    }
                    other => other.to_string(),
                })
                .collect();
            if name == "services" {
                dispatch = rendered_keys(&elems);
            }
            maps.insert(name.to_string(), rendered);
        }
    }
    let mut drift = Vec::new();
    for (key, lb) in services {
        let (chain, map) = (chain_name(key), map_name(key));
        if !chains.contains(&chain) {
            drift.push(format!("service {chain}: chain is missing"));
        }
        let mut want = slots(lb);
        want.sort();
        match maps.get(&map) {
            None => drift.push(format!("service {map}: backend map is missing")),
            Some(have) => {
                let mut have = have.clone();
                have.sort();
                if have != want {
                    drift.push(format!(
                        "service {map}: backends are [{}], the model has [{}]",
                        have.join(", "),
                        want.join(", ")
                    ));
                }
            }
        }
        if !want.is_empty() && !dispatch.contains(&service_element(key, lb)) {
            drift.push(format!(
                "service {chain}: {} is not dispatched",
                service_element(key, lb)
            ));
        }
    }
    drift
}

/// The keys of the `services` map's elements as `VIP . proto . port`.
fn rendered_keys(elems: &[serde_json::Value]) -> Vec<String> {
    elems
        .iter()
        .filter_map(|e| e[0]["concat"].as_array())
        .map(|parts| {
            parts
                .iter()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(" . ")
        })
        .collect()
}

#[cfg(test)]
mod tests;
