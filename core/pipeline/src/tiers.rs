//! The cluster's policies in the form a data plane renders: per pod
//! address and direction, three tiers evaluated in order.
//!
//! - **admin**: the AdminNetworkPolicies' entries (peer pod address,
//!   ports, action), ANPs by priority then name, rules in order, each
//!   rule's peers resolved to the pods they select. The first entry
//!   matching decides (`Allow`, `Deny`) or jumps to the next tier (`Pass`).
//! - **network**: the NetworkPolicies' ACL ([`crate::translate_policies`]):
//!   `Some` when they isolate the pod, and then they decide (an entry
//!   allows, nothing else passes).
//! - **baseline**: the BANP's entries; the first matching decides.
//!
//! What no tier decides passes. Named ports resolve per destination pod
//! (ingress: the pod itself; egress: each peer pod). Every entry keeps the
//! rule it came from, for a renderer's comments and counters. The same
//! decision as [`crate::decide_connection`], property-tested against one
//! reference evaluator.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::admin::{AdminAction, AdminPort, AdminRule, BaselineAction, PodSet};
use crate::policy::{AclEntry, PolicyNamespace, PolicyPod, PortRange, translate_policies};
use crate::service::Protocol;
use crate::verdict::{Direction, PolicySet, RuleRef, namespace_labels};

/// One entry of the admin or baseline tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierEntry<A> {
    /// The peer pod's address.
    pub peer: Ipv4Addr,
    /// The ports (empty: every port and protocol).
    pub ports: Vec<PortRange>,
    /// What a match does.
    pub action: A,
    /// The rule the entry comes from.
    pub rule: RuleRef,
}

impl<A> TierEntry<A> {
    /// True when the entry matches `peer` on `protocol`/`port`.
    pub fn matches(&self, peer: Ipv4Addr, protocol: Protocol, port: u16) -> bool {
        self.peer == peer
            && (self.ports.is_empty() || self.ports.iter().any(|p| p.allows(protocol, port)))
    }
}

/// One direction of one pod: the three tiers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tiers {
    /// The ANPs' entries, in evaluation order.
    pub admin: Vec<TierEntry<AdminAction>>,
    /// The NetworkPolicies' allowed entries (`None`: not isolated).
    pub network: Option<Vec<AclEntry>>,
    /// The BANP's entries, in evaluation order.
    pub baseline: Vec<TierEntry<BaselineAction>>,
}

/// Which tier let a connection through, or that none stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierOutcome {
    /// An entry of some tier allowed it.
    Allowed,
    /// No tier decided: it passes by default.
    Open,
    /// Dropped.
    Denied,
}

impl Tiers {
    /// True when no tier has anything: the direction is open.
    pub fn is_empty(&self) -> bool {
        self.admin.is_empty() && self.network.is_none() && self.baseline.is_empty()
    }

    /// The decision on `peer` with `protocol`/`port`.
    pub fn decide(&self, peer: Ipv4Addr, protocol: Protocol, port: u16) -> TierOutcome {
        if let Some(e) = self.admin.iter().find(|e| e.matches(peer, protocol, port)) {
            match e.action {
                AdminAction::Allow => return TierOutcome::Allowed,
                AdminAction::Deny => return TierOutcome::Denied,
                AdminAction::Pass => {}
            }
        }
        if let Some(list) = &self.network {
            return if list.iter().any(|e| e.allows(peer, protocol, port)) {
                TierOutcome::Allowed
            } else {
                TierOutcome::Denied
            };
        }
        match self
            .baseline
            .iter()
            .find(|e| e.matches(peer, protocol, port))
        {
            Some(e) if e.action == BaselineAction::Allow => TierOutcome::Allowed,
            Some(_) => TierOutcome::Denied,
            None => TierOutcome::Open,
        }
    }
}

/// Both directions of one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodTiers {
    /// What may reach the pod.
    pub ingress: Tiers,
    /// What the pod may reach.
    pub egress: Tiers,
}

/// The ports `ports` (empty: all) give towards `destination`: `None` when
/// some are named and none applies (the rule matches nothing there).
fn resolve(ports: &[AdminPort], destination: &PolicyPod) -> Option<Vec<PortRange>> {
    if ports.is_empty() {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for p in ports {
        match p {
            AdminPort::Number { protocol, port } => out.push(PortRange {
                protocol: *protocol,
                range: Some((*port, *port)),
            }),
            AdminPort::Range {
                protocol,
                start,
                end,
            } => out.push(PortRange {
                protocol: *protocol,
                range: Some((*start, *end)),
            }),
            AdminPort::Named(name) => out.extend(
                destination
                    .ports
                    .iter()
                    .filter(|c| c.name == *name)
                    .map(|c| PortRange {
                        protocol: c.protocol,
                        range: Some((c.port, c.port)),
                    }),
            ),
        }
    }
    out.sort();
    out.dedup();
    (!out.is_empty()).then_some(out)
}

/// The entries of `rules` for the pod `me` in `direction`, in order.
fn entries<A: Copy>(
    rules: &[AdminRule<A>],
    me: &PolicyPod,
    direction: Direction,
    pods: &[PolicyPod],
    ns: &BTreeMap<String, BTreeMap<String, String>>,
    rule_ref: impl Fn(usize, &AdminRule<A>) -> RuleRef,
) -> Vec<TierEntry<A>> {
    let mut out = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        for peer in pods
            .iter()
            .filter(|p| rule.peers.iter().any(|s: &PodSet| s.contains(p, ns)))
        {
            let destination = match direction {
                Direction::Ingress => me,
                Direction::Egress => peer,
            };
            if let Some(ports) = resolve(&rule.ports, destination) {
                out.push(TierEntry {
                    peer: peer.address,
                    ports,
                    action: rule.action,
                    rule: rule_ref(index, rule),
                });
            }
        }
    }
    out
}

/// The tiers of every pod some policy selects, by the pod's address (a
/// pod absent from the map is open both ways).
pub fn translate_tiers(
    policies: &PolicySet,
    pods: &[PolicyPod],
    namespaces: &[PolicyNamespace],
) -> BTreeMap<Ipv4Addr, PodTiers> {
    let ns = namespace_labels(namespaces);
    let acls = translate_policies(&policies.network, pods, namespaces);
    let admin = policies.admin_in_order();
    let mut out = BTreeMap::new();
    for me in pods {
        let mut tiers = PodTiers::default();
        for (direction, tier) in [
            (Direction::Ingress, &mut tiers.ingress),
            (Direction::Egress, &mut tiers.egress),
        ] {
            for anp in admin.iter().filter(|a| a.subject.contains(me, &ns)) {
                let rules = match direction {
                    Direction::Ingress => &anp.ingress,
                    Direction::Egress => &anp.egress,
                };
                tier.admin
                    .extend(entries(rules, me, direction, pods, &ns, |index, rule| {
                        RuleRef::Admin {
                            policy: anp.name.clone(),
                            priority: anp.priority,
                            direction,
                            index,
                            name: rule.name.clone(),
                            action: rule.action,
                        }
                    }));
            }
            tier.network = acls.get(&me.address).and_then(|a| match direction {
                Direction::Ingress => a.ingress.clone(),
                Direction::Egress => a.egress.clone(),
            });
            if let Some(banp) = policies
                .baseline
                .as_ref()
                .filter(|b| b.subject.contains(me, &ns))
            {
                let rules = match direction {
                    Direction::Ingress => &banp.ingress,
                    Direction::Egress => &banp.egress,
                };
                tier.baseline = entries(rules, me, direction, pods, &ns, |index, rule| {
                    RuleRef::Baseline {
                        policy: banp.name.clone(),
                        direction,
                        index,
                        name: rule.name.clone(),
                        action: rule.action,
                    }
                });
            }
        }
        if !(tiers.ingress.is_empty() && tiers.egress.is_empty()) {
            out.insert(me.address, tiers);
        }
    }
    out
}

/// Whether the tiers let `src` open a connection to `dst` on
/// `protocol`/`port`: `src`'s egress and `dst`'s ingress both pass it.
pub fn tiers_allow(
    tiers: &BTreeMap<Ipv4Addr, PodTiers>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> bool {
    let pass = |t: Option<&Tiers>, peer| {
        t.is_none_or(|t| t.decide(peer, protocol, port) != TierOutcome::Denied)
    };
    pass(tiers.get(&src).map(|t| &t.egress), dst) && pass(tiers.get(&dst).map(|t| &t.ingress), src)
}

/// Whether `dst`'s ingress tiers explicitly allow `src` on
/// `protocol`/`port` (an entry of some tier, not the default): what opens
/// a path into another pod network ([`crate::tiered_connection_allowed`]).
pub fn tiers_admit(
    tiers: &BTreeMap<Ipv4Addr, PodTiers>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> bool {
    tiers
        .get(&dst)
        .is_some_and(|t| t.ingress.decide(src, protocol, port) == TierOutcome::Allowed)
}
