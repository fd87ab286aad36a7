//! The IPv6 egress rule: per dual-stack network its `egress6` says how a
//! pod's IPv6 packet leaves the pod networks (masqueraded behind the
//! host's address, or routed with the pod's own). Towards any pod
//! network's IPv6 subnet nothing is masqueraded (the pod's own network is
//! local, another one isolated as in IPv4); the renderer masquerades each
//! `masquerade` network's subnet towards everything but the pod subnets.

use std::net::Ipv6Addr;

use super::Egress;
use crate::family::Ipv6Cidr;
use crate::network::{Egress6, NetworkSpec};

/// The IPv6 egress of the dual-stack networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress6Policy {
    /// Each dual-stack network's name, IPv6 subnet and egress.
    networks: Vec<(String, Ipv6Cidr, Egress6)>,
}

impl Egress6Policy {
    /// The rule for `networks` (those without an IPv6 subnet take no part).
    pub fn new(networks: &[NetworkSpec]) -> Self {
        Egress6Policy {
            networks: networks
                .iter()
                .filter_map(|n| {
                    let s = n.subnet6?;
                    let subnet = Ipv6Cidr {
                        addr: s.network(),
                        prefix: s.prefix,
                    };
                    Some((n.name.clone(), subnet, n.egress6))
                })
                .collect(),
        }
    }

    /// What happens to an IPv6 packet of a pod of `network` for `dst`:
    /// local, isolated (another pod network), masqueraded or direct
    /// (its network's `egress6`).
    pub fn decide(&self, network: &str, dst: Ipv6Addr) -> Egress {
        let own = self.networks.iter().find(|(name, _, _)| name == network);
        if own.is_some_and(|(_, s, _)| s.contains(dst)) {
            Egress::Local
        } else if self.networks.iter().any(|(_, s, _)| s.contains(dst)) {
            Egress::Isolated
        } else {
            match own.map(|(_, _, e)| *e) {
                Some(Egress6::Masquerade) => Egress::Masqueraded,
                Some(Egress6::Routed) | None => Egress::Direct,
            }
        }
    }

    /// The IPv6 subnets masqueraded on the way out, in network order.
    pub fn masqueraded(&self) -> Vec<Ipv6Cidr> {
        let mut out: Vec<Ipv6Cidr> = self
            .networks
            .iter()
            .filter(|(_, _, e)| *e == Egress6::Masquerade)
            .map(|(_, s, _)| *s)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every pod network's IPv6 subnet: never masqueraded towards.
    pub fn exclusions(&self) -> Vec<Ipv6Cidr> {
        let mut out: Vec<Ipv6Cidr> = self.networks.iter().map(|(_, s, _)| *s).collect();
        out.sort();
        out.dedup();
        out
    }

    /// True when some network masquerades (the renderer needs a NAT chain).
    pub fn masquerades(&self) -> bool {
        !self.masqueraded().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn network(i: u16, egress6: Egress6) -> NetworkSpec {
        let mut n = NetworkSpec::l2(
            &format!("n{i}"),
            format!("10.{i}.0.0/24").parse().expect("v4"),
        )
        .with_v6(format!("fd00:{i}::/64").parse().expect("v6"));
        n.egress6 = egress6;
        n
    }

    proptest! {
        /// What the renderer masquerades (a `masquerade` network's subnet
        /// towards anything outside the exclusions) is exactly what
        /// `decide` calls masqueraded, for every network and destination.
        #[test]
        fn the_rendered_rule_is_the_decision(
            kinds in proptest::collection::vec(any::<bool>(), 1..4),
            dst_net in 0u16..6,
            host in 1u16..4,
        ) {
            let networks: Vec<NetworkSpec> = kinds
                .iter()
                .enumerate()
                .map(|(i, m)| network(i as u16, if *m { Egress6::Masquerade } else { Egress6::Routed }))
                .collect();
            let policy = Egress6Policy::new(&networks);
            let dst = Ipv6Addr::new(0xfd00, dst_net, 0, 0, 0, 0, 0, host);
            for n in &networks {
                let src = n.subnet6.expect("v6");
                let rendered = policy.masqueraded().contains(&src)
                    && !policy.exclusions().iter().any(|e| e.contains(dst));
                let decided = policy.decide(&n.name, dst);
                prop_assert_eq!(rendered, decided == Egress::Masqueraded, "{} -> {}", n.name, dst);
                let on_pod_net = usize::from(dst_net) < networks.len();
                let expected = if src.contains(dst) {
                    Egress::Local
                } else if on_pod_net {
                    Egress::Isolated
                } else if n.egress6 == Egress6::Masquerade {
                    Egress::Masqueraded
                } else {
                    Egress::Direct
                };
                prop_assert_eq!(decided, expected);
            }
        }
    }

    #[test]
    fn an_ipv4_only_network_takes_no_part() {
        let v4 = NetworkSpec::l2("plain", "10.9.0.0/24".parse().expect("v4"));
        let policy = Egress6Policy::new(&[v4, network(1, Egress6::Routed)]);
        assert!(!policy.masquerades());
        assert_eq!(policy.exclusions(), ["fd00:1::/64".parse().expect("v6")]);
    }
}
