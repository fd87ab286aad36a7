//! The NetworkPolicy ACL function: `networking.k8s.io/v1` NetworkPolicies
//! over the cluster's pods and namespaces become, per pod address, the
//! peers and ports it accepts (ingress) and reaches (egress). A pod no
//! policy selects for a direction is not isolated in that direction; once
//! one does, only what some selecting policy's rule allows passes
//! (ipBlock with except, pod and namespace selectors, ports with endPort,
//! named ports resolved per destination pod on its containers' ports).
//! Replies of allowed connections are the data plane's business
//! (conntrack). Pure and deterministic.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::Ipv4Cidr;
use crate::family::Ipv6Cidr;
use crate::service::Protocol;

#[cfg(test)]
pub(crate) mod tests;
mod v6;

pub use v6::{AclEntry6, PodAcl6, acl_allows6, translate_policies6};

/// A label selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorOp {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub op: SelectorOp,
    /// The values (In, NotIn).
    pub values: Vec<String>,
}

/// A label selector; the empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    /// `matchLabels`.
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`.
    pub expressions: Vec<Requirement>,
}

impl Selector {
    /// True when `labels` satisfy every term.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.op {
                    SelectorOp::In => value.is_some_and(|v| r.values.contains(v)),
                    SelectorOp::NotIn => !value.is_some_and(|v| r.values.contains(v)),
                    SelectorOp::Exists => value.is_some(),
                    SelectorOp::DoesNotExist => value.is_none(),
                }
            })
    }
}

/// A pod as policies see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Its address.
    pub address: Ipv4Addr,
    /// Its containers' named ports (what a policy's named port resolves to).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<NamedPort>,
}

/// A container port with a name (`spec.containers[].ports[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NamedPort {
    /// `name`.
    pub name: String,
    /// `protocol`.
    pub protocol: Protocol,
    /// `containerPort`.
    pub port: u16,
}

/// A namespace as policies see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyNamespace {
    /// Name.
    pub name: String,
    /// Labels (with `kubernetes.io/metadata.name`).
    pub labels: BTreeMap<String, String>,
}

/// Who a rule allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Peer {
    /// Pods: `podSelector` alone selects in the policy's namespace,
    /// `namespaceSelector` alone every pod of the selected namespaces, both
    /// the matching pods of the selected namespaces.
    Pods {
        /// `namespaceSelector`.
        namespace_selector: Option<Selector>,
        /// `podSelector`.
        pod_selector: Option<Selector>,
    },
    /// `ipBlock`.
    Block {
        /// The block.
        cidr: Ipv4Cidr,
        /// Parts of it not allowed.
        except: Vec<Ipv4Cidr>,
    },
    /// An IPv6 `ipBlock`: it holds no IPv4 address, so it lets no IPv4
    /// peer in or out; the policy still selects (and isolates) its pods.
    BlockV6 {
        /// The block.
        cidr: Ipv6Cidr,
        /// Parts of it not allowed.
        except: Vec<Ipv6Cidr>,
    },
}

/// Ports a rule allows: one protocol, all its ports or a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortRange {
    /// The protocol.
    pub protocol: Protocol,
    /// First and last port (`None`: every port).
    pub range: Option<(u16, u16)>,
}

impl PortRange {
    /// True for `protocol` and `port`.
    pub fn allows(&self, protocol: Protocol, port: u16) -> bool {
        self.protocol == protocol && self.range.is_none_or(|(lo, hi)| lo <= port && port <= hi)
    }
}

/// One entry of a rule's `ports`: a number or range, or the name of a
/// container port, which each destination pod resolves on its own
/// containers (a pod without a port of that name and protocol is not
/// reached through it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum RulePort {
    /// `port` (with `endPort`) as numbers, or no `port`: all of a protocol.
    Numbers(PortRange),
    /// `port` as a name.
    Named {
        /// The protocol.
        protocol: Protocol,
        /// The container port's name.
        name: String,
    },
}

impl From<PortRange> for RulePort {
    fn from(range: PortRange) -> Self {
        RulePort::Numbers(range)
    }
}

/// A rule: peers (empty: everyone) and ports (empty: every port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    /// `from` / `to`.
    pub peers: Vec<Peer>,
    /// `ports`.
    pub ports: Vec<RulePort>,
}

/// The ports `ports` allow towards the pod `on` (`None`: an address that
/// is no known pod's, where a name resolves to nothing): `None` when the
/// rule names ports and none applies (it allows nothing there), else the
/// ranges (empty: every port).
fn resolve(ports: &[RulePort], on: Option<&PolicyPod>) -> Option<Vec<PortRange>> {
    let mut out = Vec::new();
    for p in ports {
        match p {
            RulePort::Numbers(range) => out.push(*range),
            RulePort::Named { protocol, name } => out.extend(
                on.into_iter()
                    .flat_map(|pod| &pod.ports)
                    .filter(|c| c.name == *name && c.protocol == *protocol)
                    .map(|c| PortRange {
                        protocol: c.protocol,
                        range: Some((c.port, c.port)),
                    }),
            ),
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() && !ports.is_empty() {
        None
    } else {
        Some(out)
    }
}

/// A NetworkPolicy; a direction is `Some` when its `policyTypes` has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkPolicy {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The pods it applies to (in its namespace).
    pub pod_selector: Selector,
    /// Ingress rules (`None`: the policy does not isolate ingress).
    pub ingress: Option<Vec<PolicyRule>>,
    /// Egress rules (`None`: the policy does not isolate egress).
    pub egress: Option<Vec<PolicyRule>>,
}

/// One allowed peer of an isolated pod, with the ports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclEntry {
    /// The peer's addresses.
    pub peer: Ipv4Cidr,
    /// Addresses of `peer` this entry does not allow.
    pub except: Vec<Ipv4Cidr>,
    /// The ports (empty: every port and protocol).
    pub ports: Vec<PortRange>,
}

impl AclEntry {
    /// True when this entry lets `peer` talk on `protocol`/`port`.
    pub fn allows(&self, peer: Ipv4Addr, protocol: Protocol, port: u16) -> bool {
        self.peer.contains(peer)
            && !self.except.iter().any(|e| e.contains(peer))
            && (self.ports.is_empty() || self.ports.iter().any(|p| p.allows(protocol, port)))
    }
}

/// The ACL modules of one pod: per direction, `None` when not isolated,
/// else the entries allowed (none: everything denied).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAcl {
    /// What may reach the pod.
    pub ingress: Option<Vec<AclEntry>>,
    /// What the pod may reach.
    pub egress: Option<Vec<AclEntry>>,
}

/// Whether a `Pods` peer of `policy` selects the pod `p`: `podSelector`
/// alone in the policy's namespace, `namespaceSelector` alone every pod of
/// the selected namespaces, both the matching pods of those.
fn selects(
    policy: &NetworkPolicy,
    namespace_selector: Option<&Selector>,
    pod_selector: Option<&Selector>,
    p: &PolicyPod,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    let ns_ok = match namespace_selector {
        None => p.namespace == policy.namespace,
        Some(sel) => sel.matches(namespaces.get(&p.namespace).unwrap_or(&BTreeMap::new())),
    };
    ns_ok && pod_selector.is_none_or(|s| s.matches(&p.labels))
}

/// An address family as policies see it: how a pod's address of the
/// family, a single host, everyone and an `ipBlock` of the family are
/// written. The entries of one family hold only that family's peers.
pub(crate) trait PeerFamily: Copy + Ord {
    /// A prefix of the family.
    type Cidr: Copy + Ord;
    /// Every address of the family.
    fn everyone() -> Self::Cidr;
    /// This one address.
    fn host(self) -> Self::Cidr;
    /// `peer` as a block of this family (`None`: another family's block,
    /// or no block), normalised to its network address.
    fn block(peer: &Peer) -> Option<(Self::Cidr, Vec<Self::Cidr>)>;
    /// Whether `cidr` holds `self`.
    fn within(self, cidr: &Self::Cidr) -> bool;
}

impl PeerFamily for Ipv4Addr {
    type Cidr = Ipv4Cidr;
    fn everyone() -> Ipv4Cidr {
        Ipv4Cidr {
            addr: Ipv4Addr::UNSPECIFIED,
            prefix: 0,
        }
    }
    fn host(self) -> Ipv4Cidr {
        Ipv4Cidr {
            addr: self,
            prefix: 32,
        }
    }
    fn block(peer: &Peer) -> Option<(Ipv4Cidr, Vec<Ipv4Cidr>)> {
        match peer {
            Peer::Block { cidr, except } => Some((cidr.with_addr(cidr.network()), except.clone())),
            _ => None,
        }
    }
    fn within(self, cidr: &Ipv4Cidr) -> bool {
        cidr.contains(self)
    }
}

/// One allowed peer of an entry, in the family `A`: prefix, exceptions,
/// ports.
pub(crate) type RawEntry<A> = (
    <A as PeerFamily>::Cidr,
    Vec<<A as PeerFamily>::Cidr>,
    Vec<PortRange>,
);

/// The entries `rules` of `policy` give the pod `target` it selects, in
/// the family `A` (`pods`: every pod with its address of the family):
/// ingress (`ingress`), where named ports resolve on `target`, or egress,
/// where they resolve on each destination pod.
pub(crate) fn entries_in<A: PeerFamily>(
    policy: &NetworkPolicy,
    rules: &[PolicyRule],
    pods: &[(&PolicyPod, A)],
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    target: &PolicyPod,
    ingress: bool,
) -> Vec<RawEntry<A>> {
    let mut out = Vec::new();
    for rule in rules {
        let named = rule
            .ports
            .iter()
            .any(|p| matches!(p, RulePort::Named { .. }));
        // what the rule allows towards an address, whoever holds it
        let uniform = if ingress {
            resolve(&rule.ports, Some(target))
        } else if named {
            // towards a non-pod address only the numbers count
            let numbers: Vec<RulePort> = rule
                .ports
                .iter()
                .filter(|p| matches!(p, RulePort::Numbers(_)))
                .cloned()
                .collect();
            if numbers.is_empty() {
                None
            } else {
                resolve(&numbers, None)
            }
        } else {
            resolve(&rule.ports, None)
        };
        // egress with a named port: each destination pod's own ports
        let per_pod = |p: &PolicyPod, address: A, out: &mut Vec<RawEntry<A>>| {
            if !ingress
                && named
                && let Some(ports) = resolve(&rule.ports, Some(p))
            {
                out.push((address.host(), Vec::new(), ports));
            }
        };
        if rule.peers.is_empty() {
            if let Some(ports) = &uniform {
                out.push((A::everyone(), Vec::new(), ports.clone()));
            }
            for (p, address) in pods {
                per_pod(p, *address, &mut out);
            }
        }
        for peer in &rule.peers {
            if let Peer::Pods {
                namespace_selector,
                pod_selector,
            } = peer
            {
                for (p, address) in pods.iter().filter(|(p, _)| {
                    selects(
                        policy,
                        namespace_selector.as_ref(),
                        pod_selector.as_ref(),
                        p,
                        namespaces,
                    )
                }) {
                    if !ingress && named {
                        per_pod(p, *address, &mut out);
                    } else if let Some(ports) = &uniform {
                        out.push((address.host(), Vec::new(), ports.clone()));
                    }
                }
                continue;
            }
            // a block of another family holds no peer of this one
            let Some((cidr, mut except)) = A::block(peer) else {
                continue;
            };
            except.sort();
            except.dedup();
            if let Some(ports) = &uniform {
                out.push((cidr, except.clone(), ports.clone()));
            }
            for (p, address) in pods
                .iter()
                .filter(|(_, a)| a.within(&cidr) && !except.iter().any(|e| a.within(e)))
            {
                per_pod(p, *address, &mut out);
            }
        }
    }
    out
}

/// The IPv4 entries ([`entries_in`] with every pod at its address).
fn entries(
    policy: &NetworkPolicy,
    rules: &[PolicyRule],
    pods: &[PolicyPod],
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    target: &PolicyPod,
    ingress: bool,
) -> Vec<AclEntry> {
    let pods: Vec<(&PolicyPod, Ipv4Addr)> = pods.iter().map(|p| (p, p.address)).collect();
    entries_in(policy, rules, &pods, namespaces, target, ingress)
        .into_iter()
        .map(|(peer, except, ports)| AclEntry {
            peer,
            except,
            ports,
        })
        .collect()
}

/// The ACL modules of every pod some policy selects, by the pod's address.
pub fn translate_policies(
    policies: &[NetworkPolicy],
    pods: &[PolicyPod],
    namespaces: &[PolicyNamespace],
) -> BTreeMap<Ipv4Addr, PodAcl> {
    let ns_labels: BTreeMap<String, BTreeMap<String, String>> = namespaces
        .iter()
        .map(|n| (n.name.clone(), n.labels.clone()))
        .collect();
    let mut out: BTreeMap<Ipv4Addr, PodAcl> = BTreeMap::new();
    for policy in policies {
        for pod in pods
            .iter()
            .filter(|p| p.namespace == policy.namespace && policy.pod_selector.matches(&p.labels))
        {
            let acl = out.entry(pod.address).or_default();
            if let Some(rules) = &policy.ingress {
                acl.ingress
                    .get_or_insert_with(Vec::new)
                    .extend(entries(policy, rules, pods, &ns_labels, pod, true));
            }
            if let Some(rules) = &policy.egress {
                acl.egress
                    .get_or_insert_with(Vec::new)
                    .extend(entries(policy, rules, pods, &ns_labels, pod, false));
            }
        }
    }
    for acl in out.values_mut() {
        for list in [&mut acl.ingress, &mut acl.egress].into_iter().flatten() {
            list.sort();
            list.dedup();
        }
    }
    out
}

/// Whether the translated ACLs let `src` open a connection to `dst` on
/// `protocol`/`port`: `src`'s egress and `dst`'s ingress both allow it.
pub fn acl_allows(
    acls: &BTreeMap<Ipv4Addr, PodAcl>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> bool {
    let egress_ok = acls
        .get(&src)
        .and_then(|a| a.egress.as_ref())
        .is_none_or(|list| list.iter().any(|e| e.allows(dst, protocol, port)));
    let ingress_ok = acls
        .get(&dst)
        .and_then(|a| a.ingress.as_ref())
        .is_none_or(|list| list.iter().any(|e| e.allows(src, protocol, port)));
    egress_ok && ingress_ok
}
