//! Building the port pipelines of a network from its meta pipeline and its ports.
//!
//! This is the seed's "copy the meta pipeline, then rewire every gate to the
//! copies" step, as a pure function of (meta pipeline, network, ports)
//! ([`build_network`], the whole network at once) and as the pieces the
//! model's incremental path uses (one port's pipeline, one egress module,
//! one FIB entry linked or unlinked).

use std::collections::BTreeMap;

use crate::module::{
    Gate, Module, ModuleId, ModuleKind, Pipeline, Port, PortId, copy_id, egress_id, ingress_id,
};
use crate::network::{MetaFunction, MetaPipeline, NetworkSpec};

/// Every module and pipeline the model implies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// All module instances by id.
    pub modules: BTreeMap<ModuleId, Module>,
    /// Port pipelines by port.
    pub pipelines: BTreeMap<PortId, Pipeline>,
}

/// The gate on which a forwarder reaches the egress of the port in `slot`.
pub fn egress_gate(slot: Gate) -> Gate {
    slot
}

/// Derive the pipelines of one network into `out`.
pub(crate) fn build_network(
    spec: &NetworkSpec,
    meta: &MetaPipeline,
    ports: &[&Port],
    out: &mut Rendered,
) {
    if meta.forwarder().is_none() {
        return;
    }
    let live: Vec<&Port> = ports.iter().copied().filter(|p| p.is_live()).collect();
    for q in &live {
        let feeders: Vec<&Port> = ports.iter().copied().filter(|p| p.id != q.id).collect();
        let m = egress_module(spec, meta, q, &feeders);
        out.modules.insert(m.id.clone(), m);
    }
    for p in ports {
        let others: Vec<&Port> = live.iter().copied().filter(|q| q.id != p.id).collect();
        let (modules, pipeline) = port_pipeline(spec, meta, p, &others);
        for m in modules {
            out.modules.insert(m.id.clone(), m);
        }
        out.pipelines.insert(p.id.clone(), pipeline);
    }
}

/// The facts the data plane reported for module `id` of `port`.
pub(crate) fn facts_of(port: &Port, id: &str) -> BTreeMap<String, String> {
    port.facts
        .as_ref()
        .and_then(|f| f.modules.get(id).cloned())
        .unwrap_or_default()
}

/// The id of the forwarder copy in `port`'s pipeline.
pub(crate) fn forwarder_id(meta: &MetaPipeline, port: &str) -> Option<ModuleId> {
    meta.forwarder().map(|f| copy_id(&f.name, port))
}

/// The egress module of live port `q`, fed by the forwarder of every port in
/// `feeders` (the other ports of its network) at the feeder's slot.
pub(crate) fn egress_module(
    spec: &NetworkSpec,
    meta: &MetaPipeline,
    q: &Port,
    feeders: &[&Port],
) -> Module {
    let id = egress_id(&q.id);
    let facts = facts_of(q, &id);
    let ingress = feeders
        .iter()
        .filter_map(|p| forwarder_id(meta, &p.id).map(|f| (egress_gate(p.slot), f)))
        .collect();
    Module {
        id,
        network: spec.name.clone(),
        port: q.id.clone(),
        kind: ModuleKind::EgressPort { port: q.id.clone() },
        ingress,
        egress: BTreeMap::new(),
        facts,
    }
}

/// Insert `q`'s FIB entry (and egress gate) into forwarder `fwd`.
fn link_egress(fwd: &mut Module, q: &Port) {
    let gate = egress_gate(q.slot);
    fwd.egress.insert(gate, egress_id(&q.id));
    match &mut fwd.kind {
        ModuleKind::L2Switch { fib } => {
            if let Some(mac) = q.mac() {
                fib.insert(mac, gate);
            }
        }
        ModuleKind::L3Router { fib } => {
            fib.insert(q.address.addr, gate);
        }
        _ => {}
    }
}

/// The modules of `p`'s own pipeline (its ingress and the copies of the
/// meta modules, the forwarder linked to the egress of every port in
/// `live_others`) and the pipeline listing them.
pub(crate) fn port_pipeline(
    spec: &NetworkSpec,
    meta: &MetaPipeline,
    p: &Port,
    live_others: &[&Port],
) -> (Vec<Module>, Pipeline) {
    let mut members = Vec::new();
    let ingress = ingress_id(&p.id);
    let entry = copy_id(&meta.modules[0].name, &p.id);
    let mut modules = vec![Module {
        id: ingress.clone(),
        network: spec.name.clone(),
        port: p.id.clone(),
        kind: ModuleKind::IngressPort { port: p.id.clone() },
        ingress: BTreeMap::new(),
        egress: BTreeMap::from([(0, entry)]),
        facts: facts_of(p, &ingress),
    }];
    members.push(ingress);

    // Copies of the meta modules, gates rewired to the copies.
    for m in &meta.modules {
        let id = copy_id(&m.name, &p.id);
        let kind = match m.function {
            MetaFunction::Acl => ModuleKind::Acl {
                rules: spec.acl.clone(),
            },
            MetaFunction::L2Switch => ModuleKind::L2Switch {
                fib: BTreeMap::new(),
            },
            MetaFunction::L3Router => ModuleKind::L3Router {
                fib: BTreeMap::new(),
            },
        };
        let egress = m
            .egress
            .iter()
            .map(|(g, next)| (*g, copy_id(next, &p.id)))
            .collect();
        modules.push(Module {
            id: id.clone(),
            network: spec.name.clone(),
            port: p.id.clone(),
            kind,
            ingress: BTreeMap::new(),
            egress,
            facts: facts_of(p, &id),
        });
        members.push(id);
    }

    // The other live ports' egress hang off the forwarder copy, with FIB entries.
    let fwd_id = forwarder_id(meta, &p.id);
    if let Some(fwd) = modules.iter_mut().find(|m| Some(&m.id) == fwd_id.as_ref()) {
        for q in live_others {
            link_egress(fwd, q);
        }
    }
    members.extend(live_others.iter().map(|q| egress_id(&q.id)));

    // Ingress gate maps mirror the egress maps inside the pipeline.
    // (only links between the pipeline's own modules: the egress of other
    // ports keep their own ingress maps)
    let links: Vec<(usize, ModuleId)> = modules
        .iter()
        .flat_map(|m| {
            m.egress
                .values()
                .filter_map(|next| modules.iter().position(|t| &t.id == next))
                .map(move |to| (to, m.id.clone()))
        })
        .collect();
    for (to, from) in links {
        let target = &mut modules[to];
        let gate = target.ingress.len() as Gate;
        target.ingress.insert(gate, from);
    }
    let pipeline = Pipeline {
        port: p.id.clone(),
        network: spec.name.clone(),
        modules: members,
    };
    (modules, pipeline)
}
