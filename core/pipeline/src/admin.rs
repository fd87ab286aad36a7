//! Cluster operators' policies, `policy.networking.k8s.io/v1alpha1`:
//! AdminNetworkPolicy (ANP) and BaselineAdminNetworkPolicy (BANP), as the
//! network-policy-api project defines them, beside the namespaces'
//! NetworkPolicies ([`crate::NetworkPolicy`]).
//!
//! An ANP selects its subject pods cluster-wide (by namespaces, or by
//! namespaces and pods) and carries ordered ingress and egress rules, each
//! with an action: `Allow` and `Deny` decide a connection whatever the
//! NetworkPolicies say, `Pass` skips the remaining ANP rules and hands the
//! decision to the NetworkPolicies. The BANP (one per cluster, named
//! `default`) has the same shape with `Allow`/`Deny` only, and decides what
//! neither an ANP nor an isolating NetworkPolicy did.
//!
//! This module holds the objects, their validation and the matching of
//! subjects, peers and ports; [`crate::decide_side`] evaluates them in the
//! spec's order and [`crate::translate_tiers`] turns them into what a data
//! plane renders.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::policy::{PolicyPod, Selector};
use crate::service::Protocol;

#[cfg(test)]
pub(crate) mod tests;

/// The highest (least important) ANP priority the API accepts.
pub const MAX_ADMIN_PRIORITY: u16 = 1000;

/// The most rules one direction of one (B)ANP may carry.
pub const MAX_ADMIN_RULES: usize = 100;

/// A set of pods chosen cluster-wide: an ANP's or BANP's subject, or a
/// rule's peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodSet {
    /// `namespaces`: every pod of the namespaces the selector picks.
    Namespaces(Selector),
    /// `pods`: the pods the pod selector picks in the namespaces the
    /// namespace selector picks (empty selectors pick all).
    Pods {
        /// `namespaceSelector`.
        namespace_selector: Selector,
        /// `podSelector`.
        pod_selector: Selector,
    },
}

impl PodSet {
    /// True when `pod` belongs to the set; `namespaces` gives each
    /// namespace's labels (an unknown namespace has none).
    pub fn contains(
        &self,
        pod: &PolicyPod,
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> bool {
        let empty = BTreeMap::new();
        let ns_labels = namespaces.get(&pod.namespace).unwrap_or(&empty);
        match self {
            PodSet::Namespaces(sel) => sel.matches(ns_labels),
            PodSet::Pods {
                namespace_selector,
                pod_selector,
            } => namespace_selector.matches(ns_labels) && pod_selector.matches(&pod.labels),
        }
    }
}

/// One entry of a rule's `ports`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminPort {
    /// `portNumber`: one protocol and port.
    Number {
        /// The protocol.
        protocol: Protocol,
        /// The port (1..=65535).
        port: u16,
    },
    /// `namedPort`: the destination pod's container port of that name,
    /// with the protocol that container port has.
    Named(String),
    /// `portRange`: one protocol, `start..=end`.
    Range {
        /// The protocol.
        protocol: Protocol,
        /// First port.
        start: u16,
        /// Last port.
        end: u16,
    },
}

impl AdminPort {
    /// True when this entry covers `protocol`/`port` towards the pod
    /// `destination` (`None`: an address that is no pod's, which has no
    /// named ports).
    pub fn covers(&self, protocol: Protocol, port: u16, destination: Option<&PolicyPod>) -> bool {
        match self {
            AdminPort::Number {
                protocol: p,
                port: n,
            } => *p == protocol && *n == port,
            AdminPort::Range {
                protocol: p,
                start,
                end,
            } => *p == protocol && (*start..=*end).contains(&port),
            AdminPort::Named(name) => destination.is_some_and(|d| {
                d.ports
                    .iter()
                    .any(|c| c.name == *name && c.protocol == protocol && c.port == port)
            }),
        }
    }
}

/// True when `ports` (empty: every port and protocol) cover
/// `protocol`/`port` towards `destination`.
pub fn ports_cover(
    ports: &[AdminPort],
    protocol: Protocol,
    port: u16,
    destination: Option<&PolicyPod>,
) -> bool {
    ports.is_empty() || ports.iter().any(|p| p.covers(protocol, port, destination))
}

/// What an ANP rule does with the traffic it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AdminAction {
    /// Let it through, whatever the NetworkPolicies say.
    Allow,
    /// Drop it, whatever the NetworkPolicies say.
    Deny,
    /// Skip the remaining ANP rules: the NetworkPolicies decide (or, where
    /// none isolates the pod, the BANP).
    Pass,
}

/// What a BANP rule does with the traffic it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BaselineAction {
    /// Let it through.
    Allow,
    /// Drop it.
    Deny,
}

impl fmt::Display for AdminAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdminAction::Allow => "Allow",
            AdminAction::Deny => "Deny",
            AdminAction::Pass => "Pass",
        })
    }
}

impl fmt::Display for BaselineAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BaselineAction::Allow => "Allow",
            BaselineAction::Deny => "Deny",
        })
    }
}

/// One ingress (`from`) or egress (`to`) rule of an ANP (`A` =
/// [`AdminAction`]) or a BANP (`A` = [`BaselineAction`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminRule<A> {
    /// `name` (optional in the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `action`.
    pub action: A,
    /// `from` / `to`: at least one set of pods; the rule matches a peer in
    /// any of them.
    pub peers: Vec<PodSet>,
    /// `ports` (empty: the rule does not look at ports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<AdminPort>,
}

impl<A> AdminRule<A> {
    /// True when the rule matches `peer` (a pod, or `None` for an address
    /// that is no pod's: no set of pods holds it) on `protocol`/`port`,
    /// named ports resolving on `destination`.
    pub fn matches(
        &self,
        peer: Option<&PolicyPod>,
        destination: Option<&PolicyPod>,
        protocol: Protocol,
        port: u16,
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> bool {
        peer.is_some_and(|p| self.peers.iter().any(|s| s.contains(p, namespaces)))
            && ports_cover(&self.ports, protocol, port, destination)
    }
}

/// An AdminNetworkPolicy (cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminNetworkPolicy {
    /// `metadata.name`.
    pub name: String,
    /// `spec.priority`, 0..=1000: lower numbers are evaluated first.
    pub priority: u16,
    /// `spec.subject`: the pods the rules apply to.
    pub subject: PodSet,
    /// `spec.ingress`, in evaluation order.
    #[serde(default)]
    pub ingress: Vec<AdminRule<AdminAction>>,
    /// `spec.egress`, in evaluation order.
    #[serde(default)]
    pub egress: Vec<AdminRule<AdminAction>>,
}

/// The BaselineAdminNetworkPolicy (one per cluster, named `default`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineAdminNetworkPolicy {
    /// `metadata.name`.
    pub name: String,
    /// `spec.subject`.
    pub subject: PodSet,
    /// `spec.ingress`, in evaluation order.
    #[serde(default)]
    pub ingress: Vec<AdminRule<BaselineAction>>,
    /// `spec.egress`, in evaluation order.
    #[serde(default)]
    pub egress: Vec<AdminRule<BaselineAction>>,
}

/// The name the API gives the one BANP of a cluster.
pub const BASELINE_NAME: &str = "default";

fn check_rules<A>(
    kind: &str,
    policy: &str,
    rules: &[AdminRule<A>],
    dir: &str,
) -> Result<(), Error> {
    let bad = |why: String| Error::InvalidAdminPolicy {
        kind: kind.to_string(),
        policy: policy.to_string(),
        why,
    };
    if rules.len() > MAX_ADMIN_RULES {
        return Err(bad(format!(
            "{} {dir} rules, at most {MAX_ADMIN_RULES} allowed",
            rules.len()
        )));
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = match &rule.name {
            Some(name) => format!("{dir}[{i}] ({name})"),
            None => format!("{dir}[{i}]"),
        };
        if rule.peers.is_empty() {
            return Err(bad(format!("{at}: no peer (at least one is required)")));
        }
        for port in &rule.ports {
            match port {
                AdminPort::Number { port: 0, .. } => {
                    return Err(bad(format!("{at}: port 0 (ports are 1..=65535)")));
                }
                AdminPort::Range { start, end, .. } if *start == 0 || start > end => {
                    return Err(bad(format!(
                        "{at}: port range {start}-{end} (need 1 ≤ start ≤ end)"
                    )));
                }
                AdminPort::Named(name) if name.is_empty() => {
                    return Err(bad(format!("{at}: empty port name")));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

impl AdminNetworkPolicy {
    /// Checks what the API server's schema would refuse.
    ///
    /// # Errors
    /// [`Error::InvalidAdminPolicy`] naming the policy and the field: a
    /// priority above [`MAX_ADMIN_PRIORITY`], more than
    /// [`MAX_ADMIN_RULES`] rules in a direction, a rule without a peer, port
    /// 0, an empty or reversed port range, an empty port name.
    pub fn validate(&self) -> Result<(), Error> {
        if self.priority > MAX_ADMIN_PRIORITY {
            return Err(Error::InvalidAdminPolicy {
                kind: "AdminNetworkPolicy".into(),
                policy: self.name.clone(),
                why: format!("priority {} (0..={MAX_ADMIN_PRIORITY})", self.priority),
            });
        }
        check_rules("AdminNetworkPolicy", &self.name, &self.ingress, "ingress")?;
        check_rules("AdminNetworkPolicy", &self.name, &self.egress, "egress")
    }
}

impl BaselineAdminNetworkPolicy {
    /// Checks what the API server's schema would refuse.
    ///
    /// # Errors
    /// [`Error::InvalidAdminPolicy`]: a name other than
    /// [`BASELINE_NAME`], or a rule as [`AdminNetworkPolicy::validate`]
    /// refuses it.
    pub fn validate(&self) -> Result<(), Error> {
        if self.name != BASELINE_NAME {
            return Err(Error::InvalidAdminPolicy {
                kind: "BaselineAdminNetworkPolicy".into(),
                policy: self.name.clone(),
                why: format!("the one BANP of a cluster must be named {BASELINE_NAME:?}"),
            });
        }
        check_rules(
            "BaselineAdminNetworkPolicy",
            &self.name,
            &self.ingress,
            "ingress",
        )?;
        check_rules(
            "BaselineAdminNetworkPolicy",
            &self.name,
            &self.egress,
            "egress",
        )
    }
}
