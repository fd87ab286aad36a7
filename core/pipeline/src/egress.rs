//! Where a pod's packet goes once it leaves its own network, decided
//! purely so the kernel rendering and the tests share one answer: to its own
//! network it is switched; to another pod network it is isolated (dropped
//! unless a Service or a NetworkPolicy opens the path, see
//! [`crate::connection_allowed`]); to the
//! Service CIDR it is left to the Services' rendering; anywhere else it
//! leaves the host, masqueraded behind the host's address unless
//! masquerade is off or the destination is excluded.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::addr::Ipv4Cidr;
use crate::network::NetworkSpec;

#[cfg(test)]
mod tests;
mod v6;

pub use v6::Egress6Policy;

/// The Service CIDR unless configured (Kubernetes' own default).
pub const DEFAULT_SERVICE_CIDR: Ipv4Cidr = Ipv4Cidr {
    addr: Ipv4Addr::new(10, 96, 0, 0),
    prefix: 12,
};

/// Masquerade of traffic leaving the pod networks (the CNI's `ipMasq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Masquerade {
    /// On unless said otherwise.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Destinations reached without masquerade besides the pod networks and
    /// the Service CIDR (a corporate range routed back to the pods).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except: Vec<Ipv4Cidr>,
}

fn enabled() -> bool {
    true
}

impl Default for Masquerade {
    fn default() -> Self {
        Masquerade {
            enabled: true,
            except: Vec::new(),
        }
    }
}

/// What happens to a pod's packet towards a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Egress {
    /// The destination is on the pod's own network: switched or routed there.
    Local,
    /// The destination is on another pod network: dropped unless a Service
    /// or a NetworkPolicy opens the path ([`crate::connection_allowed`]).
    Isolated,
    /// The destination is a Service address: the Services' rendering decides.
    Service,
    /// Leaves the host with the pod's own address.
    Direct,
    /// Leaves the host behind the host's address.
    Masqueraded,
}

/// The pod networks of a host, its Service CIDR and its masquerade setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    networks: Vec<(String, Ipv4Cidr)>,
    service_cidr: Ipv4Cidr,
    masquerade: Masquerade,
}

fn overlap(a: Ipv4Cidr, b: Ipv4Cidr) -> bool {
    a.contains(b.network()) || b.contains(a.network())
}

impl EgressPolicy {
    /// The policy of `networks`.
    ///
    /// # Errors
    /// [`Error::ServiceCidrOverlap`] when the Service CIDR overlaps a pod
    /// network (a Service address would shadow pods, or pods a Service).
    pub fn new(
        networks: &[NetworkSpec],
        service_cidr: Ipv4Cidr,
        masquerade: Masquerade,
    ) -> Result<Self, Error> {
        let service_cidr = service_cidr.with_addr(service_cidr.network());
        if let Some(n) = networks.iter().find(|n| overlap(n.subnet, service_cidr)) {
            return Err(Error::ServiceCidrOverlap {
                service_cidr: service_cidr.to_string(),
                network: n.name.clone(),
                subnet: n.subnet.to_string(),
            });
        }
        Ok(EgressPolicy {
            networks: networks
                .iter()
                .map(|n| (n.name.clone(), n.subnet))
                .collect(),
            service_cidr,
            masquerade,
        })
    }

    /// Where a packet from a pod of `network` to `dst` goes. A destination
    /// on the pod's own subnet is local even when another network shares
    /// that subnet (the pod reaches it on-link, inside its own network).
    pub fn decide(&self, network: &str, dst: Ipv4Addr) -> Egress {
        let own = self
            .networks
            .iter()
            .any(|(name, subnet)| name == network && subnet.contains(dst));
        if own {
            Egress::Local
        } else if self.networks.iter().any(|(_, s)| s.contains(dst)) {
            Egress::Isolated
        } else if self.service_cidr.contains(dst) {
            Egress::Service
        } else if self.masquerade.enabled && !self.masquerade.except.iter().any(|e| e.contains(dst))
        {
            Egress::Masqueraded
        } else {
            Egress::Direct
        }
    }

    /// The destinations a packet leaving the pod networks is never
    /// masqueraded towards: the pod networks, the Service CIDR and the
    /// configured exceptions, in that order, each once. Empty when
    /// masquerade is off (nothing is masqueraded).
    pub fn masquerade_exclusions(&self) -> Vec<Ipv4Cidr> {
        if !self.masquerade.enabled {
            return Vec::new();
        }
        let mut out: Vec<Ipv4Cidr> = Vec::new();
        let all = self
            .networks
            .iter()
            .map(|(_, s)| s.with_addr(s.network()))
            .chain([self.service_cidr])
            .chain(
                self.masquerade
                    .except
                    .iter()
                    .map(|e| e.with_addr(e.network())),
            );
        for cidr in all {
            if !out.contains(&cidr) {
                out.push(cidr);
            }
        }
        out
    }

    /// The first pod network whose subnet holds `address`.
    pub fn network_of(&self, address: Ipv4Addr) -> Option<&str> {
        self.networks
            .iter()
            .find(|(_, s)| s.contains(address))
            .map(|(n, _)| n.as_str())
    }

    /// The subnets of the pod networks (what masquerade applies to as
    /// sources).
    pub fn pod_subnets(&self) -> Vec<Ipv4Cidr> {
        let mut out: Vec<Ipv4Cidr> = Vec::new();
        for (_, s) in &self.networks {
            let s = s.with_addr(s.network());
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// Whether masquerade is on.
    pub fn masquerades(&self) -> bool {
        self.masquerade.enabled
    }

    /// The Service CIDR.
    pub fn service_cidr(&self) -> Ipv4Cidr {
        self.service_cidr
    }
}
