//! A connection judged by every policy of the cluster on the objects
//! themselves, in the order the network-policy-api project gives, naming
//! the rule that decides: for each direction (the source's egress, the
//! destination's ingress),
//!
//! 1. the AdminNetworkPolicies selecting the pod, lowest priority number
//!    first (equal priorities by name, so the order is deterministic where
//!    the API leaves it open), each one's rules in order: the first rule
//!    matching the peer and port decides with `Allow` or `Deny`; `Pass`
//!    skips the remaining ANP rules;
//! 2. the NetworkPolicies: when one isolates the pod in that direction,
//!    the connection passes exactly when one of their rules allows it;
//! 3. the BaselineAdminNetworkPolicy's rules in order, the first match
//!    deciding;
//! 4. otherwise the connection passes.
//!
//! A connection is allowed when both directions allow it; an address that
//! is no pod's has no policies of its own. [`crate::translate_tiers`] is
//! the same decision in the form a data plane renders; both are
//! property-tested against a reference evaluator.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::admin::{AdminAction, AdminNetworkPolicy, BaselineAction, BaselineAdminNetworkPolicy};
use crate::policy::{NetworkPolicy, Peer, PolicyNamespace, PolicyPod, PolicyRule, RulePort};
use crate::service::Protocol;

#[cfg(test)]
mod tests;

/// Every policy of a cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySet {
    /// The AdminNetworkPolicies.
    #[serde(default)]
    pub admin: Vec<AdminNetworkPolicy>,
    /// The NetworkPolicies.
    #[serde(default)]
    pub network: Vec<NetworkPolicy>,
    /// The BaselineAdminNetworkPolicy, if any.
    #[serde(default)]
    pub baseline: Option<BaselineAdminNetworkPolicy>,
}

impl PolicySet {
    /// Checks every ANP and the BANP ([`AdminNetworkPolicy::validate`]) and
    /// that no two ANPs share a name.
    ///
    /// # Errors
    /// The first [`Error::InvalidAdminPolicy`] found.
    pub fn validate(&self) -> Result<(), Error> {
        let mut names = std::collections::BTreeSet::new();
        for anp in &self.admin {
            anp.validate()?;
            if !names.insert(anp.name.as_str()) {
                return Err(Error::InvalidAdminPolicy {
                    kind: "AdminNetworkPolicy".into(),
                    policy: anp.name.clone(),
                    why: "two policies have this name".into(),
                });
            }
        }
        if let Some(banp) = &self.baseline {
            banp.validate()?;
        }
        Ok(())
    }

    /// The ANPs in evaluation order: priority, then name.
    pub fn admin_in_order(&self) -> Vec<&AdminNetworkPolicy> {
        let mut out: Vec<&AdminNetworkPolicy> = self.admin.iter().collect();
        out.sort_by(|a, b| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
        out
    }
}

/// A direction of a connection as one pod's policies see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// What reaches the pod.
    Ingress,
    /// What the pod sends.
    Egress,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        })
    }
}

/// One rule of one policy.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "tier", rename_all = "snake_case")]
pub enum RuleRef {
    /// A rule of an AdminNetworkPolicy.
    Admin {
        /// The policy.
        policy: String,
        /// Its priority.
        priority: u16,
        /// The direction of the rule list.
        direction: Direction,
        /// The rule's index in that list.
        index: usize,
        /// The rule's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The rule's action.
        action: AdminAction,
    },
    /// A rule of a NetworkPolicy (which only allows).
    Network {
        /// The policy's namespace.
        namespace: String,
        /// The policy.
        policy: String,
        /// The direction of the rule list.
        direction: Direction,
        /// The rule's index in that list.
        index: usize,
    },
    /// A rule of the BaselineAdminNetworkPolicy.
    Baseline {
        /// The policy.
        policy: String,
        /// The direction of the rule list.
        direction: Direction,
        /// The rule's index in that list.
        index: usize,
        /// The rule's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The rule's action.
        action: BaselineAction,
    },
}

fn rule_name(f: &mut fmt::Formatter<'_>, name: &Option<String>) -> fmt::Result {
    match name {
        Some(n) => write!(f, " {n:?}"),
        None => Ok(()),
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleRef::Admin {
                policy,
                priority,
                direction,
                index,
                name,
                action,
            } => {
                write!(
                    f,
                    "AdminNetworkPolicy {policy} (priority {priority}) {direction}[{index}]"
                )?;
                rule_name(f, name)?;
                write!(f, ": {action}")
            }
            RuleRef::Network {
                namespace,
                policy,
                direction,
                index,
            } => write!(
                f,
                "NetworkPolicy {namespace}/{policy} {direction}[{index}]: Allow"
            ),
            RuleRef::Baseline {
                policy,
                direction,
                index,
                name,
                action,
            } => {
                write!(
                    f,
                    "BaselineAdminNetworkPolicy {policy} {direction}[{index}]"
                )?;
                rule_name(f, name)?;
                write!(f, ": {action}")
            }
        }
    }
}

/// What decided one direction of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decider {
    /// A rule matched (ANP Allow/Deny, a NetworkPolicy rule, BANP Allow/Deny).
    Rule {
        /// The rule.
        rule: RuleRef,
    },
    /// NetworkPolicies isolate the pod in this direction and none of their
    /// rules allows the connection.
    Isolation {
        /// The isolating policies, `namespace/name`.
        policies: Vec<String>,
    },
    /// No policy decided: allowed.
    NoPolicy,
    /// The address is no pod's: nothing of this direction applies.
    NotAPod,
}

impl fmt::Display for Decider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decider::Rule { rule } => write!(f, "{rule}"),
            Decider::Isolation { policies } => write!(
                f,
                "isolated by NetworkPolicy {} and no rule of theirs matches",
                policies.join(", ")
            ),
            Decider::NoPolicy => f.write_str("no policy decides (allowed)"),
            Decider::NotAPod => f.write_str("no pod at that address (no policy)"),
        }
    }
}

/// One direction of a connection judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideVerdict {
    /// The direction.
    pub direction: Direction,
    /// Whether this direction lets the connection through.
    pub allowed: bool,
    /// What decided.
    pub decided_by: Decider,
    /// The ANP `Pass` rule that handed the decision on, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_by: Option<RuleRef>,
}

impl SideVerdict {
    /// True when a rule explicitly allowed (not by default): what opens a
    /// path between two pod networks on the ingress side.
    pub fn explicitly_allowed(&self) -> bool {
        self.allowed && matches!(self.decided_by, Decider::Rule { .. })
    }
}

/// A connection judged in both directions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionVerdict {
    /// The source's egress.
    pub egress: SideVerdict,
    /// The destination's ingress.
    pub ingress: SideVerdict,
}

impl ConnectionVerdict {
    /// Both directions allow it.
    pub fn allowed(&self) -> bool {
        self.egress.allowed && self.ingress.allowed
    }
}

/// Each namespace's labels by name.
pub(crate) fn namespace_labels(
    namespaces: &[PolicyNamespace],
) -> BTreeMap<String, BTreeMap<String, String>> {
    namespaces
        .iter()
        .map(|n| (n.name.clone(), n.labels.clone()))
        .collect()
}

/// A NetworkPolicy rule's peer list and ports matching `other` (a pod or a
/// bare address), named ports resolving on `destination`.
#[allow(clippy::too_many_arguments)]
fn network_rule_matches(
    policy: &NetworkPolicy,
    rule: &PolicyRule,
    other: Ipv4Addr,
    other_pod: Option<&PolicyPod>,
    destination: Option<&PolicyPod>,
    protocol: Protocol,
    port: u16,
    ns: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let peer_ok = rule.peers.is_empty()
        || rule.peers.iter().any(|peer| match peer {
            Peer::Block { cidr, except } => {
                cidr.contains(other) && !except.iter().any(|e| e.contains(other))
            }
            // an IPv6 block holds no IPv4 peer
            Peer::BlockV6 { .. } => false,
            Peer::Pods {
                namespace_selector,
                pod_selector,
            } => other_pod.is_some_and(|p| {
                let ns_ok = match namespace_selector {
                    None => p.namespace == policy.namespace,
                    Some(s) => s.matches(ns.get(&p.namespace).unwrap_or(&empty)),
                };
                ns_ok && pod_selector.as_ref().is_none_or(|s| s.matches(&p.labels))
            }),
        });
    let port_ok = rule.ports.is_empty()
        || rule.ports.iter().any(|p| match p {
            RulePort::Numbers(range) => range.allows(protocol, port),
            RulePort::Named { protocol: pr, name } => {
                *pr == protocol
                    && destination.is_some_and(|d| {
                        d.ports
                            .iter()
                            .any(|c| c.name == *name && c.protocol == protocol && c.port == port)
                    })
            }
        });
    peer_ok && port_ok
}

/// One direction of a connection for the pod `me`: its `direction` rules
/// judge the peer `other` (the pod there, if any) on `protocol`/`port`.
#[allow(clippy::too_many_arguments)]
pub fn decide_side(
    policies: &PolicySet,
    pods: &[PolicyPod],
    namespaces: &[PolicyNamespace],
    me: &PolicyPod,
    other: Ipv4Addr,
    direction: Direction,
    protocol: Protocol,
    port: u16,
) -> SideVerdict {
    let ns = namespace_labels(namespaces);
    side(policies, pods, &ns, me, other, direction, protocol, port)
}

#[allow(clippy::too_many_arguments)]
fn side(
    policies: &PolicySet,
    pods: &[PolicyPod],
    ns: &BTreeMap<String, BTreeMap<String, String>>,
    me: &PolicyPod,
    other: Ipv4Addr,
    direction: Direction,
    protocol: Protocol,
    port: u16,
) -> SideVerdict {
    let other_pod = pods.iter().find(|p| p.address == other);
    let destination = match direction {
        Direction::Ingress => Some(me),
        Direction::Egress => other_pod,
    };
    let verdict = |allowed, decided_by, passed_by| SideVerdict {
        direction,
        allowed,
        decided_by,
        passed_by,
    };
    // 1. ANPs by priority, rules in order
    let mut passed_by = None;
    'admin: for anp in policies.admin_in_order() {
        if !anp.subject.contains(me, ns) {
            continue;
        }
        let rules = match direction {
            Direction::Ingress => &anp.ingress,
            Direction::Egress => &anp.egress,
        };
        for (index, rule) in rules.iter().enumerate() {
            if !rule.matches(other_pod, destination, protocol, port, ns) {
                continue;
            }
            let at = RuleRef::Admin {
                policy: anp.name.clone(),
                priority: anp.priority,
                direction,
                index,
                name: rule.name.clone(),
                action: rule.action,
            };
            match rule.action {
                AdminAction::Allow => return verdict(true, Decider::Rule { rule: at }, None),
                AdminAction::Deny => return verdict(false, Decider::Rule { rule: at }, None),
                AdminAction::Pass => {
                    passed_by = Some(at);
                    break 'admin;
                }
            }
        }
    }
    // 2. NetworkPolicies
    let mut isolating = Vec::new();
    for policy in &policies.network {
        if policy.namespace != me.namespace || !policy.pod_selector.matches(&me.labels) {
            continue;
        }
        let rules = match direction {
            Direction::Ingress => &policy.ingress,
            Direction::Egress => &policy.egress,
        };
        let Some(rules) = rules else { continue };
        isolating.push(format!("{}/{}", policy.namespace, policy.name));
        for (index, rule) in rules.iter().enumerate() {
            if network_rule_matches(
                policy,
                rule,
                other,
                other_pod,
                destination,
                protocol,
                port,
                ns,
            ) {
                let at = RuleRef::Network {
                    namespace: policy.namespace.clone(),
                    policy: policy.name.clone(),
                    direction,
                    index,
                };
                return verdict(true, Decider::Rule { rule: at }, passed_by);
            }
        }
    }
    if !isolating.is_empty() {
        isolating.sort();
        isolating.dedup();
        return verdict(
            false,
            Decider::Isolation {
                policies: isolating,
            },
            passed_by,
        );
    }
    // 3. the BANP
    if let Some(banp) = policies
        .baseline
        .as_ref()
        .filter(|b| b.subject.contains(me, ns))
    {
        let rules = match direction {
            Direction::Ingress => &banp.ingress,
            Direction::Egress => &banp.egress,
        };
        for (index, rule) in rules.iter().enumerate() {
            if rule.matches(other_pod, destination, protocol, port, ns) {
                let at = RuleRef::Baseline {
                    policy: banp.name.clone(),
                    direction,
                    index,
                    name: rule.name.clone(),
                    action: rule.action,
                };
                let allowed = rule.action == BaselineAction::Allow;
                return verdict(allowed, Decider::Rule { rule: at }, passed_by);
            }
        }
    }
    // 4. nothing decided
    verdict(true, Decider::NoPolicy, passed_by)
}

/// A connection from `src` to `dst` on `protocol`/`port` (`dst` as it
/// arrives: the backend for a Service), judged in both directions.
pub fn decide_connection(
    policies: &PolicySet,
    pods: &[PolicyPod],
    namespaces: &[PolicyNamespace],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> ConnectionVerdict {
    let ns = namespace_labels(namespaces);
    let not_a_pod = |direction| SideVerdict {
        direction,
        allowed: true,
        decided_by: Decider::NotAPod,
        passed_by: None,
    };
    let egress = match pods.iter().find(|p| p.address == src) {
        Some(me) => side(
            policies,
            pods,
            &ns,
            me,
            dst,
            Direction::Egress,
            protocol,
            port,
        ),
        None => not_a_pod(Direction::Egress),
    };
    let ingress = match pods.iter().find(|p| p.address == dst) {
        Some(me) => side(
            policies,
            pods,
            &ns,
            me,
            src,
            Direction::Ingress,
            protocol,
            port,
        ),
        None => not_a_pod(Direction::Ingress),
    };
    ConnectionVerdict { egress, ingress }
}
