//! Building the port pipelines of a network from its meta pipeline and its ports.
//!
//! This is the seed's "copy the meta pipeline, then rewire every gate to the
//! copies" step, done as a pure function of (meta pipeline, network, ports),
//! so every change of the model re-derives the modules and the render plan
//! is the difference between two derivations.

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
    let Some(forwarder) = meta.forwarder() else {
        return;
    };
    let live: Vec<&Port> = ports.iter().copied().filter(|p| p.is_live()).collect();
    let facts_of = |port: &Port, id: &str| -> BTreeMap<String, String> {
        port.facts
            .as_ref()
            .and_then(|f| f.modules.get(id).cloned())
            .unwrap_or_default()
    };

    // Egress modules of live ports: one each, fed by every other pipeline.
    for q in &live {
        let id = egress_id(&q.id);
        let facts = facts_of(q, &id);
        out.modules.insert(
            id.clone(),
            Module {
                id,
                network: spec.name.clone(),
                port: q.id.clone(),
                kind: ModuleKind::EgressPort { port: q.id.clone() },
                ingress: BTreeMap::new(),
                egress: BTreeMap::new(),
                facts,
            },
        );
    }

    for p in ports {
        let mut members = Vec::new();
        let ingress = ingress_id(&p.id);
        let entry = copy_id(&meta.modules[0].name, &p.id);
        let mut modules = vec![Module {
            id: ingress.clone(),
            network: spec.name.clone(),
            port: p.id.clone(),
            kind: ModuleKind::IngressPort { port: p.id.clone() },
            ingress: BTreeMap::new(),
            egress: BTreeMap::from([(0, entry.clone())]),
            facts: facts_of(p, &ingress),
        }];
        members.push(ingress.clone());

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
        let fwd_id = copy_id(&forwarder.name, &p.id);
        for q in live.iter().filter(|q| q.id != p.id) {
            let gate = egress_gate(q.slot);
            let egress = egress_id(&q.id);
            if let Some(fwd) = modules.iter_mut().find(|m| m.id == fwd_id) {
                fwd.egress.insert(gate, egress.clone());
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
            if let Some(e) = out.modules.get_mut(&egress) {
                e.ingress.insert(egress_gate(p.slot), fwd_id.clone());
            }
            members.push(egress);
        }

        // Ingress gate maps mirror the egress maps inside the pipeline.
        let links: Vec<(ModuleId, Gate, ModuleId)> = modules
            .iter()
            .flat_map(|m| {
                m.egress
                    .values()
                    .map(move |next| (m.id.clone(), 0, next.clone()))
            })
            .collect();
        for (from, _, to) in links {
            if let Some(target) = modules.iter_mut().find(|m| m.id == to) {
                let gate = target.ingress.len() as Gate;
                target.ingress.insert(gate, from);
            }
        }

        for m in modules {
            out.modules.insert(m.id.clone(), m);
        }
        out.pipelines.insert(
            p.id.clone(),
            Pipeline {
                port: p.id.clone(),
                network: spec.name.clone(),
                modules: members,
            },
        );
    }
}
