//! The NetworkPolicies in IPv6: the same translation as IPv4 over the
//! pods' IPv6 addresses. A dual-stack pod is one pod with an address of
//! each family; a policy selecting it isolates it in both, and each
//! family's entries hold that family's peers only: an IPv6 `ipBlock`, the
//! IPv6 addresses of the pods a selector picks (a pod without one is no
//! IPv6 peer), `::/0` for a rule without peers. An IPv4 `ipBlock` adds
//! nothing here, as an IPv6 one adds nothing to the IPv4 entries.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::{NetworkPolicy, Peer, PeerFamily, PolicyNamespace, PolicyPod, PortRange, entries_in};
use crate::family::Ipv6Cidr;
use crate::service::Protocol;

impl PeerFamily for Ipv6Addr {
    type Cidr = Ipv6Cidr;
    fn everyone() -> Ipv6Cidr {
        Ipv6Cidr {
            addr: Ipv6Addr::UNSPECIFIED,
            prefix: 0,
        }
    }
    fn host(self) -> Ipv6Cidr {
        Ipv6Cidr {
            addr: self,
            prefix: 128,
        }
    }
    fn block(peer: &Peer) -> Option<(Ipv6Cidr, Vec<Ipv6Cidr>)> {
        match peer {
            Peer::BlockV6 { cidr, except } => Some((
                Ipv6Cidr {
                    addr: cidr.network(),
                    prefix: cidr.prefix,
                },
                except.clone(),
            )),
            _ => None,
        }
    }
    fn within(self, cidr: &Ipv6Cidr) -> bool {
        cidr.contains(self)
    }
}

/// One allowed IPv6 peer of an isolated pod, with the ports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclEntry6 {
    /// The peer's addresses.
    pub peer: Ipv6Cidr,
    /// Addresses of `peer` this entry does not allow.
    pub except: Vec<Ipv6Cidr>,
    /// The ports (empty: every port and protocol).
    pub ports: Vec<PortRange>,
}

impl AclEntry6 {
    /// True when this entry lets `peer` talk on `protocol`/`port`.
    pub fn allows(&self, peer: Ipv6Addr, protocol: Protocol, port: u16) -> bool {
        self.peer.contains(peer)
            && !self.except.iter().any(|e| e.contains(peer))
            && (self.ports.is_empty() || self.ports.iter().any(|p| p.allows(protocol, port)))
    }
}

/// The IPv6 ACL modules of one pod: per direction, `None` when not
/// isolated, else the entries allowed (none: everything denied).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAcl6 {
    /// What may reach the pod.
    pub ingress: Option<Vec<AclEntry6>>,
    /// What the pod may reach.
    pub egress: Option<Vec<AclEntry6>>,
}

/// The IPv6 ACL modules of every pod some policy selects that has an IPv6
/// address, by that address. `addresses6` gives a pod's IPv6 address by
/// its IPv4 one (the pods' [`PolicyPod::address`]); a pod absent from it
/// has no IPv6 address.
pub fn translate_policies6(
    policies: &[NetworkPolicy],
    pods: &[PolicyPod],
    namespaces: &[PolicyNamespace],
    addresses6: &BTreeMap<Ipv4Addr, Ipv6Addr>,
) -> BTreeMap<Ipv6Addr, PodAcl6> {
    let ns_labels: BTreeMap<String, BTreeMap<String, String>> = namespaces
        .iter()
        .map(|n| (n.name.clone(), n.labels.clone()))
        .collect();
    let placed: Vec<(&PolicyPod, Ipv6Addr)> = pods
        .iter()
        .filter_map(|p| addresses6.get(&p.address).map(|a| (p, *a)))
        .collect();
    let mut out: BTreeMap<Ipv6Addr, PodAcl6> = BTreeMap::new();
    let entries = |policy, rules, pod, ingress| {
        entries_in(policy, rules, &placed, &ns_labels, pod, ingress)
            .into_iter()
            .map(|(peer, except, ports)| AclEntry6 {
                peer,
                except,
                ports,
            })
            .collect::<Vec<_>>()
    };
    for policy in policies {
        for (pod, address) in placed.iter().filter(|(p, _)| {
            p.namespace == policy.namespace && policy.pod_selector.matches(&p.labels)
        }) {
            let acl = out.entry(*address).or_default();
            if let Some(rules) = &policy.ingress {
                acl.ingress.get_or_insert_with(Vec::new).extend(entries(
                    policy,
                    rules.as_slice(),
                    *pod,
                    true,
                ));
            }
            if let Some(rules) = &policy.egress {
                acl.egress.get_or_insert_with(Vec::new).extend(entries(
                    policy,
                    rules.as_slice(),
                    *pod,
                    false,
                ));
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

/// Whether the translated IPv6 ACLs let `src` open a connection to `dst`
/// on `protocol`/`port`: `src`'s egress and `dst`'s ingress both allow it.
pub fn acl_allows6(
    acls: &BTreeMap<Ipv6Addr, PodAcl6>,
    src: Ipv6Addr,
    dst: Ipv6Addr,
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
