//! The seed's promises, checked by code: no hairpin, no forwarding loop,
//! consistent gates, every pipeline holds every other live port's egress,
//! FIBs hold exactly the live ports.

use std::collections::{BTreeMap, BTreeSet};

use crate::build::Rendered;
use crate::model::Model;
use crate::module::{ModuleKind, egress_id, ingress_id};

/// A broken promise, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

/// Every violated invariant of the model (empty when it is sound).
pub fn violations(model: &Model) -> Vec<Violation> {
    let r = model.rendered();
    let mut out = Vec::new();
    let mut bad = |s: String| out.push(Violation(s));

    // Gate consistency: A.egress[g] = B ⇔ ∃h B.ingress[h] = A.
    for (id, m) in &r.modules {
        for (g, next) in &m.egress {
            match r.modules.get(next) {
                None => bad(format!("{id}.egress[{g}] names missing module {next}")),
                Some(n) if !n.ingress.values().any(|v| v == id) => bad(format!(
                    "{id}.egress[{g}] = {next} but {next}.ingress lacks {id}"
                )),
                Some(n) => {
                    // a copy's gates stay in its pipeline or point at an egress port
                    let inside = n.port == m.port;
                    let to_egress = matches!(n.kind, ModuleKind::EgressPort { .. });
                    if !inside && !to_egress {
                        bad(format!("{id}.egress[{g}] leaves its pipeline to {next}"));
                    }
                }
            }
        }
        for (h, prev) in &m.ingress {
            match r.modules.get(prev) {
                None => bad(format!("{id}.ingress[{h}] names missing module {prev}")),
                Some(p) if !p.egress.values().any(|v| v == id) => bad(format!(
                    "{id}.ingress[{h}] = {prev} but {prev}.egress lacks {id}"
                )),
                _ => {}
            }
        }
    }

    // Acyclic module graph.
    if let Some(cycle_at) = find_cycle(&r) {
        bad(format!("forwarding loop through {cycle_at}"));
    }

    let live: BTreeMap<&str, _> = model
        .ports()
        .values()
        .filter(|p| p.is_live())
        .map(|p| (p.id.as_str(), p))
        .collect();
    for (port, pipeline) in &r.pipelines {
        // No hairpin.
        let own_egress = egress_id(port);
        if pipeline.modules.contains(&own_egress) {
            bad(format!("pipeline {port} holds its own egress"));
        }
        if reachable(&r, &ingress_id(port)).contains(&own_egress) {
            bad(format!("pipeline {port} reaches its own egress"));
        }
        if pipeline.modules.first() != Some(&ingress_id(port)) {
            bad(format!("pipeline {port} does not start with its ingress"));
        }
        // Every other live port's egress, and nothing else of other networks.
        let expected: BTreeSet<String> = live
            .values()
            .filter(|q| q.network == pipeline.network && q.id != *port)
            .map(|q| egress_id(&q.id))
            .collect();
        let held: BTreeSet<String> = pipeline
            .modules
            .iter()
            .filter(|m| {
                matches!(
                    r.modules.get(*m).map(|m| &m.kind),
                    Some(ModuleKind::EgressPort { .. })
                )
            })
            .cloned()
            .collect();
        if held != expected {
            bad(format!(
                "pipeline {port} holds egress {held:?}, expected {expected:?}"
            ));
        }
    }

    // FIBs hold exactly the live ports of their network (other than their own).
    for m in r.modules.values() {
        let targets: BTreeSet<String> = match &m.kind {
            ModuleKind::L2Switch { fib } => fib
                .values()
                .filter_map(|g| m.egress.get(g).cloned())
                .collect(),
            ModuleKind::L3Router { fib } => fib
                .values()
                .filter_map(|g| m.egress.get(g).cloned())
                .collect(),
            _ => continue,
        };
        let expected: BTreeSet<String> = live
            .values()
            .filter(|q| q.network == m.network && q.id != m.port)
            .map(|q| egress_id(&q.id))
            .collect();
        if targets != expected {
            bad(format!(
                "FIB of {} leads to {targets:?}, expected {expected:?}",
                m.id
            ));
        }
    }
    out
}

/// Module ids reachable from `start` along egress gates.
pub fn reachable(r: &Rendered, start: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start.to_string()];
    while let Some(id) = stack.pop() {
        if let Some(m) = r.modules.get(&id) {
            for next in m.egress.values() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
    }
    seen
}

fn find_cycle(r: &Rendered) -> Option<String> {
    // Kahn's algorithm; whatever keeps a positive in-degree sits on a cycle.
    let mut indegree: BTreeMap<&str, usize> = r.modules.keys().map(|k| (k.as_str(), 0)).collect();
    for m in r.modules.values() {
        for next in m.egress.values() {
            if let Some(d) = indegree.get_mut(next.as_str()) {
                *d += 1;
            }
        }
    }
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(k, _)| *k)
        .collect();
    while let Some(id) = ready.pop() {
        if let Some(m) = r.modules.get(id) {
            for next in m.egress.values() {
                if let Some(d) = indegree.get_mut(next.as_str()) {
                    *d -= 1;
                    if *d == 0 {
                        ready.push(next.as_str());
                    }
                }
            }
        }
    }
    indegree
        .into_iter()
        .find(|(_, d)| *d > 0)
        .map(|(k, _)| k.to_string())
}
