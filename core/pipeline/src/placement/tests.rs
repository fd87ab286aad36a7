use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;
use crate::service::{Affinity, EndpointPort, ServicePort, TargetPort};

fn cluster() -> impl Strategy<Value = Vec<(Service, Vec<Endpoint>)>> {
    proptest::collection::vec(
        (
            0u8..4,
            0u8..3,
            proptest::collection::vec((0u8..6, any::<bool>()), 0..5),
        ),
        0..6,
    )
    .prop_map(|services| {
        services
            .into_iter()
            .enumerate()
            .map(|(i, (name, vip, eps))| {
                let svc = Service {
                    namespace: "ns".into(),
                    name: format!("s{name}-{i}"),
                    cluster_ip: Some(Ipv4Addr::new(10, 96, 0, vip)),
                    cluster_ip6: None,
                    ports: vec![ServicePort {
                        name: None,
                        protocol: Protocol::Tcp,
                        port: 80,
                        target_port: TargetPort::Number(8080),
                        node_port: None,
                    }],
                    affinity: Affinity::None,
                };
                let eps = eps
                    .into_iter()
                    .map(|(host, ready)| Endpoint {
                        address: Ipv4Addr::new(10, 1, 0, host),
                        ready,
                        ports: vec![EndpointPort {
                            name: None,
                            protocol: Protocol::Tcp,
                            port: 8080,
                        }],
                    })
                    .collect();
                (svc, eps)
            })
            .collect()
    })
}

fn port(id: &str, remote: Option<crate::module::RemoteHost>) -> Port {
    Port {
        id: id.into(),
        network: "blue".into(),
        container_id: id.into(),
        ifname: "eth0".into(),
        netns: "/run/netns/x".into(),
        address: "10.1.0.2/24".parse().expect("cidr"),
        slot: 0,
        facts: None,
        remote,
        pod: None,
        requested_mac: None,
    }
}

proptest! {
    /// The cluster's modules do not depend on the order Services arrive in;
    /// a VIP, protocol and port has one owner, and a Service that lost the
    /// claim is named; only ready endpoints are backends.
    #[test]
    fn cluster_translation_is_deterministic_and_claims_are_exclusive(
        services in cluster(),
        seed in any::<u64>(),
    ) {
        let (lbs, warnings) = cluster_load_balancers(&services);
        let mut shuffled = services.clone();
        let n = shuffled.len().max(1);
        shuffled.rotate_left((seed as usize) % n);
        shuffled.reverse();
        prop_assert_eq!(&cluster_load_balancers(&shuffled), &(lbs.clone(), warnings.clone()));
        let mut vips = std::collections::BTreeSet::new();
        for (key, lb) in &lbs {
            prop_assert!(vips.insert((lb.vip, key.protocol, key.port)), "VIP claimed twice");
        }
        let losers = warnings.iter().filter(|w| matches!(w, ServiceWarning::VipTaken { .. })).count();
        prop_assert_eq!(lbs.len() + losers, services.len());
        for (svc, eps) in &services {
            let key = LoadBalancerKey {
                namespace: svc.namespace.clone(),
                service: svc.name.clone(),
                protocol: Protocol::Tcp,
                port: 80,
            };
            if let Some(lb) = lbs.get(&key) {
                for b in &lb.backends {
                    prop_assert!(eps.iter().any(|e| e.address == b.address && e.ready));
                }
            }
        }
    }

    /// Every local port's pipeline holds one copy of every module, named
    /// after the module and the port; other hosts' ports hold none.
    #[test]
    fn every_local_pipeline_holds_every_load_balancer(services in cluster(), remote in any::<bool>()) {
        let (lbs, _) = cluster_load_balancers(&services);
        let local = port("port_a_eth0", None);
        let other = port(
            "port_b_eth0",
            remote.then(|| crate::module::RemoteHost { host: "h2".into(), underlay: Ipv4Addr::new(192, 0, 2, 2) }),
        );
        let placed = place_load_balancers(&[&local, &other], &lbs);
        let mine = &placed["port_a_eth0"];
        prop_assert_eq!(mine.len(), lbs.len());
        for ((id, key), want) in mine.iter().zip(lbs.keys()) {
            prop_assert_eq!(key, want);
            prop_assert_eq!(id, &copy_id(&load_balancer_name(key), "port_a_eth0"));
        }
        prop_assert_eq!(placed.contains_key("port_b_eth0"), !remote);
    }
}
