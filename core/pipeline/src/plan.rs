//! Render plans: the difference between two states of the model, in the
//! terms a driver applies (ports, modules, FIB entries, ACL rules).

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::Mac;
use crate::family::Ipv6Cidr;
use crate::model::Model;
use crate::module::{Gate, Module, ModuleId, ModuleKind, Port, PortId};
use crate::network::{AclRule, NetworkSpec};

/// The key of a FIB entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FibKey {
    /// L2: a destination MAC.
    Mac(Mac),
    /// L3: a destination host address.
    Ip(Ipv4Addr),
}

impl fmt::Display for FibKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FibKey::Mac(m) => write!(f, "{m}"),
            FibKey::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// One FIB entry of one forwarder module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FibEntry {
    /// The forwarder module holding it.
    pub module: ModuleId,
    /// The pipeline's port (where the traffic comes from).
    pub port: PortId,
    /// Meta key.
    pub network: String,
    /// Destination.
    pub key: FibKey,
    /// Egress gate.
    pub gate: Gate,
    /// The port the gate leads to.
    pub egress_port: PortId,
}

/// A module whose gates, tables or facts changed, as the change itself: a
/// forwarder of a network of n ports holds n gates and n FIB entries, so
/// carrying whole modules would make every port change cost n².
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleUpdate {
    /// The module.
    pub id: ModuleId,
    /// The port whose pipeline holds it (for an egress port: its own port).
    pub port: PortId,
    /// Meta key.
    pub network: String,
    /// Egress gates that now lead somewhere new (gate → module).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub egress_added: BTreeMap<Gate, ModuleId>,
    /// Egress gates that no longer lead where they did (gate → old module).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub egress_removed: BTreeMap<Gate, ModuleId>,
    /// Ingress gates that are now fed by a new module.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ingress_added: BTreeMap<Gate, ModuleId>,
    /// Ingress gates no longer fed by the module they were.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ingress_removed: BTreeMap<Gate, ModuleId>,
    /// The module's table changed (FIB entries: see the plan's `fib_added`
    /// and `fib_removed`; ACL rules: see `acl_changed`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub table_changed: bool,
    /// The module's new facts, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<BTreeMap<String, String>>,
}

/// What changed in a gate map: (added or re-pointed, removed or re-pointed away).
type GateDelta = (BTreeMap<Gate, ModuleId>, BTreeMap<Gate, ModuleId>);

fn gate_delta(before: &BTreeMap<Gate, ModuleId>, after: &BTreeMap<Gate, ModuleId>) -> GateDelta {
    let added = after
        .iter()
        .filter(|(g, m)| before.get(g) != Some(m))
        .map(|(g, m)| (*g, m.clone()))
        .collect();
    let removed = before
        .iter()
        .filter(|(g, m)| after.get(g) != Some(m))
        .map(|(g, m)| (*g, m.clone()))
        .collect();
    (added, removed)
}

impl ModuleUpdate {
    /// An update of `m` that changes nothing yet.
    pub fn of(m: &Module) -> Self {
        ModuleUpdate {
            id: m.id.clone(),
            port: m.port.clone(),
            network: m.network.clone(),
            ..Default::default()
        }
    }

    /// The update that turns `before` into `after`; `None` when they are equal.
    pub fn between(before: &Module, after: &Module) -> Option<Self> {
        if before == after {
            return None;
        }
        let (egress_added, egress_removed) = gate_delta(&before.egress, &after.egress);
        let (ingress_added, ingress_removed) = gate_delta(&before.ingress, &after.ingress);
        Some(ModuleUpdate {
            egress_added,
            egress_removed,
            ingress_added,
            ingress_removed,
            table_changed: before.kind != after.kind,
            facts: (before.facts != after.facts).then(|| after.facts.clone()),
            ..ModuleUpdate::of(after)
        })
    }
}

/// New ACL rules of an ACL module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclChange {
    /// The ACL module.
    pub module: ModuleId,
    /// Its port.
    pub port: PortId,
    /// The rules now in force.
    pub rules: Vec<AclRule>,
}

/// What a driver must do to bring the data plane from one model state to
/// the next. Apply in field order: networks, ports added, modules created,
/// updated, FIB and ACL changes, modules deleted, ports removed, networks
/// removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderPlan {
    /// Networks that appeared.
    pub networks_added: Vec<NetworkSpec>,
    /// Networks whose declaration changed (new declaration).
    pub networks_changed: Vec<NetworkSpec>,
    /// Ports that appeared.
    pub ports_added: Vec<Port>,
    /// The IPv6 addresses of the ports that appeared on dual-stack networks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub addresses6: BTreeMap<PortId, Ipv6Cidr>,
    /// Module instances that appeared.
    pub modules_created: Vec<Module>,
    /// Module instances that changed.
    pub modules_updated: Vec<ModuleUpdate>,
    /// FIB entries to install.
    pub fib_added: Vec<FibEntry>,
    /// FIB entries to withdraw.
    pub fib_removed: Vec<FibEntry>,
    /// ACL modules whose rules changed (also for new ACL modules with rules).
    pub acl_changed: Vec<AclChange>,
    /// Module instances that went away.
    pub modules_deleted: Vec<Module>,
    /// Ports that went away.
    pub ports_removed: Vec<Port>,
    /// Networks that went away.
    pub networks_removed: Vec<NetworkSpec>,
}

impl RenderPlan {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        *self == RenderPlan::default()
    }

    /// Put every list in its canonical order (by id), so two plans of the
    /// same change compare equal however they were computed.
    pub fn normalize(&mut self) {
        self.ports_added.sort_by(|a, b| a.id.cmp(&b.id));
        self.ports_removed.sort_by(|a, b| a.id.cmp(&b.id));
        self.modules_created.sort_by(|a, b| a.id.cmp(&b.id));
        self.modules_updated.sort_by(|a, b| a.id.cmp(&b.id));
        self.modules_deleted.sort_by(|a, b| a.id.cmp(&b.id));
        self.acl_changed.sort_by(|a, b| a.module.cmp(&b.module));
        self.fib_added.sort();
        self.fib_removed.sort();
    }

    /// One line per step, for logs and `--dry-run` style output.
    pub fn summary(&self) -> String {
        let mut lines = Vec::new();
        lines.extend(
            self.networks_added
                .iter()
                .map(|n| format!("+network {}", n.name)),
        );
        lines.extend(
            self.networks_changed
                .iter()
                .map(|n| format!("~network {}", n.name)),
        );
        lines.extend(self.ports_added.iter().map(|p| format!("+port {}", p.id)));
        lines.extend(
            self.modules_created
                .iter()
                .map(|m| format!("+module {}", m.id)),
        );
        lines.extend(
            self.modules_updated
                .iter()
                .map(|m| format!("~module {}", m.id)),
        );
        lines.extend(
            self.fib_added
                .iter()
                .map(|f| format!("+fib {} {} -> {}", f.module, f.key, f.egress_port)),
        );
        lines.extend(
            self.fib_removed
                .iter()
                .map(|f| format!("-fib {} {} -> {}", f.module, f.key, f.egress_port)),
        );
        lines.extend(
            self.acl_changed
                .iter()
                .map(|a| format!("~acl {} ({} rules)", a.module, a.rules.len())),
        );
        lines.extend(
            self.modules_deleted
                .iter()
                .map(|m| format!("-module {}", m.id)),
        );
        lines.extend(self.ports_removed.iter().map(|p| format!("-port {}", p.id)));
        lines.extend(
            self.networks_removed
                .iter()
                .map(|n| format!("-network {}", n.name)),
        );
        lines.join("\n")
    }
}

/// Every FIB entry of a set of modules.
pub fn fib_entries(modules: &BTreeMap<ModuleId, Module>) -> Vec<FibEntry> {
    let mut out = Vec::new();
    for m in modules.values() {
        let keys: Vec<(FibKey, Gate)> = match &m.kind {
            ModuleKind::L2Switch { fib } => {
                fib.iter().map(|(k, g)| (FibKey::Mac(*k), *g)).collect()
            }
            ModuleKind::L3Router { fib } => fib.iter().map(|(k, g)| (FibKey::Ip(*k), *g)).collect(),
            _ => continue,
        };
        for (key, gate) in keys {
            let egress_port = m
                .egress
                .get(&gate)
                .and_then(|e| modules.get(e))
                .map(|e| e.port.clone())
                .unwrap_or_default();
            out.push(FibEntry {
                module: m.id.clone(),
                port: m.port.clone(),
                network: m.network.clone(),
                key,
                gate,
                egress_port,
            });
        }
    }
    out.sort();
    out
}

fn acl_rules(m: &Module) -> Option<&Vec<AclRule>> {
    match &m.kind {
        ModuleKind::Acl { rules } => Some(rules),
        _ => None,
    }
}

/// The plan that takes the data plane from `before` to `after`.
pub fn diff(before: &Model, after: &Model) -> RenderPlan {
    let mut plan = RenderPlan::default();
    for (key, net) in after.networks() {
        match before.networks().get(key) {
            None => plan.networks_added.push(net.spec.clone()),
            Some(old) if old.spec != net.spec => plan.networks_changed.push(net.spec.clone()),
            _ => {}
        }
    }
    for (key, net) in before.networks() {
        if !after.networks().contains_key(key) {
            plan.networks_removed.push(net.spec.clone());
        }
    }
    for (id, port) in after.ports() {
        if !before.ports().contains_key(id) {
            plan.ports_added.push(port.clone());
            plan.addresses6
                .extend(after.address6(id).map(|a| (id.clone(), a)));
        }
    }
    for (id, port) in before.ports() {
        if !after.ports().contains_key(id) {
            plan.ports_removed.push(port.clone());
        }
    }

    let old = &before.rendered().modules;
    let new = &after.rendered().modules;
    for (id, m) in new {
        match old.get(id) {
            None => {
                plan.modules_created.push(m.clone());
                if let Some(rules) = acl_rules(m).filter(|r| !r.is_empty()) {
                    plan.acl_changed.push(AclChange {
                        module: id.clone(),
                        port: m.port.clone(),
                        rules: rules.clone(),
                    });
                }
            }
            Some(o) if o != m => {
                if let Some(rules) = acl_rules(m).filter(|r| Some(*r) != acl_rules(o)) {
                    plan.acl_changed.push(AclChange {
                        module: id.clone(),
                        port: m.port.clone(),
                        rules: rules.clone(),
                    });
                }
                plan.modules_updated.extend(ModuleUpdate::between(o, m));
            }
            _ => {}
        }
    }
    for (id, m) in old {
        if !new.contains_key(id) {
            plan.modules_deleted.push(m.clone());
        }
    }
    // FIB differences module by module: only the entries that changed are
    // materialized (a network of n ports holds n² entries).
    for (id, m) in new {
        let before = old.get(id);
        plan.fib_added.extend(fib_difference(m, new, before));
    }
    for (id, m) in old {
        let after = new.get(id);
        plan.fib_removed.extend(fib_difference(m, old, after));
    }
    plan.normalize();
    plan
}

type Fib = Vec<(FibKey, Gate)>;

fn fib_lookup(m: &Module, key: &FibKey) -> Option<Gate> {
    match (&m.kind, key) {
        (ModuleKind::L2Switch { fib }, FibKey::Mac(mac)) => fib.get(mac).copied(),
        (ModuleKind::L3Router { fib }, FibKey::Ip(ip)) => fib.get(ip).copied(),
        _ => None,
    }
}

fn fib_of(m: &Module) -> Option<Fib> {
    match &m.kind {
        ModuleKind::L2Switch { fib } => {
            Some(fib.iter().map(|(k, g)| (FibKey::Mac(*k), *g)).collect())
        }
        ModuleKind::L3Router { fib } => {
            Some(fib.iter().map(|(k, g)| (FibKey::Ip(*k), *g)).collect())
        }
        _ => None,
    }
}

fn egress_port_of(m: &Module, gate: Gate, modules: &BTreeMap<ModuleId, Module>) -> PortId {
    m.egress
        .get(&gate)
        .and_then(|e| modules.get(e))
        .map(|e| e.port.clone())
        .unwrap_or_default()
}

/// Entries of `m` (in `modules`) that `other` does not hold with the same
/// gate leading to the same egress module.
pub(crate) fn fib_difference(
    m: &Module,
    modules: &BTreeMap<ModuleId, Module>,
    other: Option<&Module>,
) -> Vec<FibEntry> {
    let Some(entries) = fib_of(m) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, gate) in entries {
        // the egress module's id names its port, so comparing ids is enough
        let same = other.is_some_and(|o| {
            fib_lookup(o, &key)
                .is_some_and(|g| g == gate && o.egress.get(&g) == m.egress.get(&gate))
        });
        if !same {
            let egress_port = egress_port_of(m, gate, modules);
            out.push(FibEntry {
                module: m.id.clone(),
                port: m.port.clone(),
                network: m.network.clone(),
                key,
                gate,
                egress_port,
            });
        }
    }
    out
}
