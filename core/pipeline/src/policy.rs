//! The NetworkPolicy ACL function: `networking.k8s.io/v1` NetworkPolicies
//! over the cluster's pods and namespaces become, per pod address, the
//! peers and ports it accepts (ingress) and reaches (egress). A pod no
//! policy selects for a direction is not isolated in that direction; once
//! one does, only what some selecting policy's rule allows passes
//! (ipBlock with except, pod and namespace selectors, ports with endPort).
//! Replies of allowed connections are the data plane's business
//! (conntrack). Pure and deterministic.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::Ipv4Cidr;
use crate::service::Protocol;

#[cfg(test)]
mod tests;

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

/// A rule: peers (empty: everyone) and ports (empty: every port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    /// `from` / `to`.
    pub peers: Vec<Peer>,
    /// `ports`.
    pub ports: Vec<PortRange>,
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

fn peer_pods<'a>(
    policy: &'a NetworkPolicy,
    namespace_selector: Option<&'a Selector>,
    pod_selector: Option<&'a Selector>,
    pods: &'a [PolicyPod],
    namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
) -> impl Iterator<Item = &'a PolicyPod> + 'a {
    pods.iter().filter(move |p| {
        let ns_ok = match namespace_selector {
            None => p.namespace == policy.namespace,
            Some(sel) => sel.matches(namespaces.get(&p.namespace).unwrap_or(&BTreeMap::new())),
        };
        ns_ok && pod_selector.is_none_or(|s| s.matches(&p.labels))
    })
}

fn entries(
    policy: &NetworkPolicy,
    rules: &[PolicyRule],
    pods: &[PolicyPod],
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<AclEntry> {
    let everyone = Ipv4Cidr {
        addr: Ipv4Addr::UNSPECIFIED,
        prefix: 0,
    };
    let mut out = Vec::new();
    for rule in rules {
        let mut ports = rule.ports.clone();
        ports.sort();
        ports.dedup();
        if rule.peers.is_empty() {
            out.push(AclEntry {
                peer: everyone,
                except: Vec::new(),
                ports: ports.clone(),
            });
        }
        for peer in &rule.peers {
            match peer {
                Peer::Block { cidr, except } => {
                    let mut except = except.clone();
                    except.sort();
                    except.dedup();
                    out.push(AclEntry {
                        peer: cidr.with_addr(cidr.network()),
                        except,
                        ports: ports.clone(),
                    });
                }
                Peer::Pods {
                    namespace_selector,
                    pod_selector,
                } => {
                    for p in peer_pods(
                        policy,
                        namespace_selector.as_ref(),
                        pod_selector.as_ref(),
                        pods,
                        namespaces,
                    ) {
                        out.push(AclEntry {
                            peer: Ipv4Cidr {
                                addr: p.address,
                                prefix: 32,
                            },
                            except: Vec::new(),
                            ports: ports.clone(),
                        });
                    }
                }
            }
        }
    }
    out
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
                    .extend(entries(policy, rules, pods, &ns_labels));
            }
            if let Some(rules) = &policy.egress {
                acl.egress
                    .get_or_insert_with(Vec::new)
                    .extend(entries(policy, rules, pods, &ns_labels));
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
