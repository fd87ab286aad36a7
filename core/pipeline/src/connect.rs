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
            if acl_allows(acls, src, address, protocol, port) {
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
}
