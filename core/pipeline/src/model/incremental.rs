//! The incremental path: the render plan of one port's change (added,
//! rendered, re-rendered, removed), computed from the ports alone. A port
//! touches its own pipeline, and one gate plus one FIB entry in every other
//! pipeline of its network — O(n) work on O(n) data for a network of n
//! ports, where re-deriving the network would build its n² FIB entries.
//! The model keeps no derived state at all: [`Model::rendered`] derives the
//! modules on demand (for inspection, printing, the sim driver).
//!
//! Every plan equals [`crate::diff`] of the states before and after (the
//! property tests check it).

use crate::build::{egress_gate, egress_module, facts_of, forwarder_id, port_pipeline};
use crate::module::{Module, ModuleKind, Port, copy_id, egress_id, ingress_id};
use crate::network::MetaPipeline;
use crate::plan::{AclChange, FibEntry, FibKey, ModuleUpdate, RenderPlan};

use super::Network;

/// The FIB key a forwarder of `meta` uses for port `q`.
fn fib_key(meta: &MetaPipeline, q: &Port) -> Option<FibKey> {
    match meta.forwarder().map(|f| &f.function) {
        Some(crate::network::MetaFunction::L2Switch) => q.mac().map(FibKey::Mac),
        Some(crate::network::MetaFunction::L3Router) => Some(FibKey::Ip(q.address.addr)),
        _ => None,
    }
}

/// The FIB entry of `q` in `fwd`, the forwarder of `p`'s pipeline.
fn fib_entry(net: &Network, fwd: &str, p: &Port, key: FibKey, q: &Port) -> FibEntry {
    FibEntry {
        module: fwd.to_string(),
        port: p.id.clone(),
        network: net.spec.name.clone(),
        key,
        gate: egress_gate(q.slot),
        egress_port: q.id.clone(),
    }
}

fn update(net: &Network, id: String, port: &Port) -> ModuleUpdate {
    ModuleUpdate {
        id,
        port: port.id.clone(),
        network: net.spec.name.clone(),
        ..Default::default()
    }
}

/// `p`'s own modules as they are with `others` the other ports of its network.
fn own_modules(net: &Network, p: &Port, others: &[&Port]) -> Vec<Module> {
    let live: Vec<&Port> = others.iter().copied().filter(|q| q.is_live()).collect();
    port_pipeline(&net.spec, &net.meta, p, &live).0
}

/// The FIB entries of `p`'s forwarder.
fn own_fib(net: &Network, p: &Port, others: &[&Port]) -> Vec<FibEntry> {
    let Some(fwd) = forwarder_id(&net.meta, &p.id) else {
        return Vec::new();
    };
    others
        .iter()
        .filter(|q| q.is_live())
        .filter_map(|q| fib_key(&net.meta, q).map(|k| fib_entry(net, &fwd, p, k, q)))
        .collect()
}

/// `p`'s pipeline appeared: its own modules (its forwarder reaching every
/// live port of `others`), fed into the egress of those ports.
pub(super) fn attached(net: &Network, p: &Port, others: &[&Port], plan: &mut RenderPlan) {
    plan.ports_added.push(p.clone());
    let Some(fwd_p) = forwarder_id(&net.meta, &p.id) else {
        return;
    };
    for m in own_modules(net, p, others) {
        if let ModuleKind::Acl { rules } = &m.kind
            && !rules.is_empty()
        {
            plan.acl_changed.push(AclChange {
                module: m.id.clone(),
                port: m.port.clone(),
                rules: rules.clone(),
            });
        }
        plan.modules_created.push(m);
    }
    plan.fib_added.extend(own_fib(net, p, others));
    let gate = egress_gate(p.slot);
    for q in others.iter().filter(|q| q.is_live()) {
        let mut u = update(net, egress_id(&q.id), q);
        u.ingress_added.insert(gate, fwd_p.clone());
        plan.modules_updated.push(u);
    }
}

/// `p`'s pipeline went away (its egress already gone): the mirror of [`attached`].
pub(super) fn detached(net: &Network, p: &Port, others: &[&Port], plan: &mut RenderPlan) {
    plan.ports_removed.push(p.clone());
    let Some(fwd_p) = forwarder_id(&net.meta, &p.id) else {
        return;
    };
    plan.modules_deleted.extend(own_modules(net, p, others));
    plan.fib_removed.extend(own_fib(net, p, others));
    let gate = egress_gate(p.slot);
    for q in others.iter().filter(|q| q.is_live()) {
        let mut u = update(net, egress_id(&q.id), q);
        u.ingress_removed.insert(gate, fwd_p.clone());
        plan.modules_updated.push(u);
    }
}

/// `p` became live: its egress appears, fed by every other pipeline of its
/// network, whose forwarders learn its MAC (or address).
pub(super) fn went_live(net: &Network, p: &Port, others: &[&Port], plan: &mut RenderPlan) {
    egress_in_others(net, p, others, plan, true);
}

/// `p` stopped being live (it is going away): the mirror of [`went_live`].
pub(super) fn went_dead(net: &Network, p: &Port, others: &[&Port], plan: &mut RenderPlan) {
    egress_in_others(net, p, others, plan, false);
}

/// `p`'s egress and its FIB entries appear in (or leave) every other pipeline.
fn egress_in_others(
    net: &Network,
    p: &Port,
    others: &[&Port],
    plan: &mut RenderPlan,
    appear: bool,
) {
    if net.meta.forwarder().is_none() {
        return;
    }
    let egress = egress_module(&net.spec, &net.meta, p, others);
    let gate = egress_gate(p.slot);
    let key = fib_key(&net.meta, p);
    for q in others {
        let Some(fwd) = forwarder_id(&net.meta, &q.id) else {
            continue;
        };
        let entry = key.map(|k| fib_entry(net, &fwd, q, k, p));
        let mut u = update(net, fwd, q);
        u.table_changed = key.is_some();
        if appear {
            plan.fib_added.extend(entry);
            u.egress_added.insert(gate, egress.id.clone());
        } else {
            plan.fib_removed.extend(entry);
            u.egress_removed.insert(gate, egress.id.clone());
        }
        plan.modules_updated.push(u);
    }
    if appear {
        plan.modules_created.push(egress);
    } else {
        plan.modules_deleted.push(egress);
    }
}

/// Live `p` was re-rendered (`was` is the port as it was): every other
/// forwarder re-keys its entry when the key changed, and `p`'s own modules
/// and egress take their new facts.
pub(super) fn rerendered(
    net: &Network,
    was: &Port,
    p: &Port,
    others: &[&Port],
    plan: &mut RenderPlan,
) {
    let (old_key, new_key) = (fib_key(&net.meta, was), fib_key(&net.meta, p));
    if old_key != new_key {
        for q in others {
            let Some(fwd) = forwarder_id(&net.meta, &q.id) else {
                continue;
            };
            plan.fib_removed
                .extend(old_key.map(|k| fib_entry(net, &fwd, q, k, was)));
            plan.fib_added
                .extend(new_key.map(|k| fib_entry(net, &fwd, q, k, p)));
            let mut u = update(net, fwd, q);
            u.table_changed = true;
            plan.modules_updated.push(u);
        }
    }
    facts_changed(net, was, p, plan);
}

/// `p`'s own modules (and its egress, when it was live already) whose facts differ.
pub(super) fn facts_changed(net: &Network, was: &Port, p: &Port, plan: &mut RenderPlan) {
    let mut ids = vec![ingress_id(&p.id)];
    ids.extend(net.meta.modules.iter().map(|m| copy_id(&m.name, &p.id)));
    if was.is_live() {
        ids.push(egress_id(&p.id));
    }
    for id in ids {
        let facts = facts_of(p, &id);
        if facts != facts_of(was, &id) {
            let mut u = update(net, id, p);
            u.facts = Some(facts);
            plan.modules_updated.push(u);
        }
    }
}
