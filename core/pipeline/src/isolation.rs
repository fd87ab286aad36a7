//! Isolation between pod networks, decided purely so the kernel rendering,
//! the README and the tests share one model. A connection's first packet
//! from a pod of one network to a pod of another is dropped unless:
//!
//! - it is addressed to a Service (the destination is the backend the
//!   Service's load balancer picked, the connection is DNATed): every pod
//!   of a host reaches every ClusterIP, so a Service opens the path from
//!   every network to its endpoints, for its own connections only; or
//! - an ingress rule of a NetworkPolicy selecting the destination pod
//!   allows the source on that protocol and port (a pod no policy
//!   isolates for ingress is reachable from its own network only).
//!
//! Either way the NetworkPolicies still apply as everywhere else: the
//! source's egress (when a policy isolates it) and the destination's
//! ingress must allow the connection. Replies and the rest of an allowed
//! connection follow its conntrack entry. Traffic within one network, to
//! the outside and to the host is not about isolation: only the policies
//! decide it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::egress::{Egress, EgressPolicy};
use crate::policy::{PodAcl, acl_allows};
use crate::service::Protocol;
use crate::tiers::{PodTiers, tiers_admit, tiers_allow};

#[cfg(test)]
mod tests;

/// How a connection reaches its destination pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Addressed to the pod itself.
    Direct,
    /// Addressed to a Service and translated to the pod (DNAT).
    Service,
}

/// Whether the destination pod's ingress ACL explicitly lets `src` in on
/// `protocol`/`port` (false when no policy isolates its ingress).
pub fn ingress_admits(
    acls: &BTreeMap<Ipv4Addr, PodAcl>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> bool {
    acls.get(&dst)
        .and_then(|a| a.ingress.as_ref())
        .is_some_and(|list| list.iter().any(|e| e.allows(src, protocol, port)))
}

/// Whether a pod of `network` at `src` may open a connection reaching
/// `dst` on `protocol`/`port` (`dst` as it arrives: the backend for a
/// Service) by `path`, under the networks of `egress` and the policies'
/// ACL modules `acls`.
#[allow(clippy::too_many_arguments)]
pub fn connection_allowed(
    egress: &EgressPolicy,
    acls: &BTreeMap<Ipv4Addr, PodAcl>,
    network: &str,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
    path: Path,
) -> bool {
    let crossing_opened = match egress.decide(network, dst) {
        Egress::Isolated => path == Path::Service || ingress_admits(acls, src, dst, protocol, port),
        Egress::Local | Egress::Service | Egress::Direct | Egress::Masqueraded => true,
    };
    crossing_opened && acl_allows(acls, src, dst, protocol, port)
}

/// [`connection_allowed`] under every tier of policy
/// ([`crate::translate_tiers`]): directly into another pod network only
/// what the destination's ingress tiers explicitly allow (an ANP or BANP
/// `Allow`, a NetworkPolicy rule) crosses.
#[allow(clippy::too_many_arguments)]
pub fn tiered_connection_allowed(
    egress: &EgressPolicy,
    tiers: &BTreeMap<Ipv4Addr, PodTiers>,
    network: &str,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
    path: Path,
) -> bool {
    let crossing_opened = match egress.decide(network, dst) {
        Egress::Isolated => path == Path::Service || tiers_admit(tiers, src, dst, protocol, port),
        Egress::Local | Egress::Service | Egress::Direct | Egress::Masqueraded => true,
    };
    crossing_opened && tiers_allow(tiers, src, dst, protocol, port)
}
