//! Where a new connection ends, by the northbound's modules alone: the
//! Services' load-balancer modules (a VIP is translated to one of its
//! backends, or refused without one) and the NetworkPolicies' ACL modules
//! (the source's egress and the destination's ingress, after translation).
//! The `sim` data plane's answer for Services and policies, and the
//! oracle the kernel's is compared with.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use crate::policy::{PodAcl, acl_allows};
use crate::service::{LoadBalancer, LoadBalancerKey, Protocol};
use crate::tiers::{PodTiers, tiers_allow};

/// One way a connection can end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Accepted by this address and port (where a server listens).
    Reaches(Ipv4Addr, u16),
    /// Refused at once: a Service port without a ready backend.
    Refused,
    /// Dropped by a policy (the client waits in vain).
    Dropped,
}

/// Every way a connection from `src` to `dst`:`port` over `protocol` can
/// end: one for an address that is no Service's; for a VIP, one per
/// backend the load balancer may pick (it picks one of them).
pub fn connect(
    lbs: &BTreeMap<LoadBalancerKey, LoadBalancer>,
    acls: &BTreeMap<Ipv4Addr, PodAcl>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> BTreeSet<Outcome> {
    connect_with(lbs, dst, protocol, port, |address, port| {
        acl_allows(acls, src, address, protocol, port)
    })
}

/// [`connect`] under every tier of policy ([`crate::translate_tiers`]):
/// the source's egress tiers and the reached pod's ingress tiers
/// ([`crate::tiers_allow`]), after translation.
pub fn connect_tiered(
    lbs: &BTreeMap<LoadBalancerKey, LoadBalancer>,
    tiers: &BTreeMap<Ipv4Addr, PodTiers>,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> BTreeSet<Outcome> {
    connect_with(lbs, dst, protocol, port, |address, port| {
        tiers_allow(tiers, src, address, protocol, port)
    })
}

/// The outcomes of a connection to `dst`:`port`, `allows` judging each
/// address and port it may reach.
fn connect_with(
    lbs: &BTreeMap<LoadBalancerKey, LoadBalancer>,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
    allows: impl Fn(Ipv4Addr, u16) -> bool,
) -> BTreeSet<Outcome> {
    let service = lbs
        .iter()
        .find(|(k, lb)| lb.vip == dst && k.protocol == protocol && k.port == port)
        .map(|(_, lb)| lb);
    let targets: Vec<(Ipv4Addr, u16)> = match service {
        None => vec![(dst, port)],
        Some(lb) => lb
            .backends
            .iter()
            .filter(|b| b.weight > 0)
            .map(|b| (b.address, b.port))
            .collect(),
    };
    if targets.is_empty() {
        return BTreeSet::from([Outcome::Refused]);
    }
    targets
        .into_iter()
        .map(|(address, port)| {
            if allows(address, port) {
                Outcome::Reaches(address, port)
            } else {
                Outcome::Dropped
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::AclEntry;
    use crate::service::{Affinity, Backend};

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    #[test]
    fn a_vip_reaches_its_allowed_backends_and_drops_towards_the_rest() {
        let key = LoadBalancerKey {
            namespace: "default".into(),
            service: "web".into(),
            protocol: Protocol::Tcp,
            port: 80,
        };
        let vip = Ipv4Addr::new(10, 96, 0, 1);
        let backend = |last| Backend {
            address: ip(last),
            port: 8080,
            weight: 1,
        };
        let mut lbs = BTreeMap::from([(
            key.clone(),
            LoadBalancer {
                vip,
                node_port: None,
                affinity: Affinity::None,
                backends: vec![backend(2), backend(3)],
            },
        )]);
        // 3 takes no one
        let acls = BTreeMap::from([(
            ip(3),
            PodAcl {
                ingress: Some(vec![]),
                egress: None,
            },
        )]);
        assert_eq!(
            connect(&lbs, &acls, ip(1), vip, Protocol::Tcp, 80),
            BTreeSet::from([Outcome::Reaches(ip(2), 8080), Outcome::Dropped])
        );
        assert_eq!(
            connect(&lbs, &acls, ip(1), ip(2), Protocol::Tcp, 9090),
            BTreeSet::from([Outcome::Reaches(ip(2), 9090)]),
            "no Service: straight"
        );
        assert_eq!(
            connect(&lbs, &acls, ip(1), vip, Protocol::Udp, 80),
            BTreeSet::from([Outcome::Reaches(vip, 80)]),
            "another protocol is no Service's"
        );
        // 1 may send to 2 on 8080 only
        let acls = BTreeMap::from([(
            ip(1),
            PodAcl {
                ingress: None,
                egress: Some(vec![AclEntry {
                    peer: "10.0.0.2/32".parse().expect("cidr"),
                    except: vec![],
                    ports: vec![crate::policy::PortRange {
                        protocol: Protocol::Tcp,
                        range: Some((8080, 8080)),
                    }],
                }]),
            },
        )]);
        assert_eq!(
            connect(&lbs, &acls, ip(1), vip, Protocol::Tcp, 80),
            BTreeSet::from([Outcome::Reaches(ip(2), 8080), Outcome::Dropped]),
            "egress is judged after translation"
        );
        lbs.get_mut(&key).expect("lb").backends.clear();
        assert_eq!(
            connect(&lbs, &acls, ip(1), vip, Protocol::Tcp, 80),
            BTreeSet::from([Outcome::Refused])
        );
    }

    #[test]
    fn tiered_a_vip_reaches_what_the_tiers_pass_and_a_deny_drops_its_backend() {
        use crate::admin::{AdminAction, BaselineAction};
        use crate::tiers::{PodTiers, TierEntry, Tiers};
        use crate::verdict::{Direction, RuleRef};

        let vip = Ipv4Addr::new(10, 96, 0, 1);
        let lbs = BTreeMap::from([(
            LoadBalancerKey {
                namespace: "default".into(),
                service: "web".into(),
                protocol: Protocol::Tcp,
                port: 80,
            },
            LoadBalancer {
                vip,
                node_port: None,
                affinity: Affinity::None,
                backends: vec![
                    Backend {
                        address: ip(2),
                        port: 8080,
                        weight: 1,
                    },
                    Backend {
                        address: ip(3),
                        port: 8080,
                        weight: 1,
                    },
                ],
            },
        )]);
        let rule = RuleRef::Baseline {
            policy: "default".into(),
            direction: Direction::Ingress,
            index: 0,
            name: None,
            action: BaselineAction::Deny,
        };
        // 3 denies 1 at the admin tier; 2's baseline denies 1, but its
        // NetworkPolicies (isolating, allowing 1) decide before the baseline
        let tiers = BTreeMap::from([
            (
                ip(3),
                PodTiers {
                    ingress: Tiers {
                        admin: vec![TierEntry {
                            peer: ip(1),
                            ports: vec![],
                            action: AdminAction::Deny,
                            rule: rule.clone(),
                        }],
                        network: Some(vec![AclEntry {
                            peer: "10.0.0.0/24".parse().expect("cidr"),
                            except: vec![],
                            ports: vec![],
                        }]),
                        baseline: vec![],
                    },
                    egress: Tiers::default(),
                },
            ),
            (
                ip(2),
                PodTiers {
                    ingress: Tiers {
                        admin: vec![],
                        network: Some(vec![AclEntry {
                            peer: "10.0.0.1/32".parse().expect("cidr"),
                            except: vec![],
                            ports: vec![],
                        }]),
                        baseline: vec![TierEntry {
                            peer: ip(1),
                            ports: vec![],
                            action: BaselineAction::Deny,
                            rule,
                        }],
                    },
                    egress: Tiers::default(),
                },
            ),
        ]);
        assert_eq!(
            connect_tiered(&lbs, &tiers, ip(1), vip, Protocol::Tcp, 80),
            BTreeSet::from([Outcome::Reaches(ip(2), 8080), Outcome::Dropped])
        );
        assert_eq!(
            connect_tiered(&lbs, &tiers, ip(4), ip(3), Protocol::Tcp, 8080),
            BTreeSet::from([Outcome::Reaches(ip(3), 8080)]),
            "the Deny names 1 only; the NetworkPolicy lets 4 in"
        );
        assert_eq!(
            connect_tiered(&lbs, &tiers, ip(4), ip(2), Protocol::Tcp, 8080),
            BTreeSet::from([Outcome::Dropped]),
            "2's NetworkPolicy isolates it from 4"
        );
    }
}
