use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

/// A Service port name as the Service and its EndpointSlices carry it.
fn port_name() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        Just(Some("http".to_string())),
        Just(Some("grpc".to_string())),
    ]
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (
        0u8..8,
        any::<bool>(),
        8000u16..8003,
        port_name(),
        any::<bool>(),
    )
        .prop_map(|(host, ready, port, name, has_port)| Endpoint {
            address: Ipv4Addr::new(10, 244, 0, host),
            ready,
            // a pod the targetPort does not resolve on: a slice without the port
            ports: if has_port {
                vec![EndpointPort {
                    name,
                    protocol: Protocol::Tcp,
                    port,
                }]
            } else {
                Vec::new()
            },
        })
}

/// The IPv6 twin of an IPv4 endpoint (`fd00:244::<host>`), the same
/// readiness and ports: what an IPv6 EndpointSlice of the same pods holds.
fn twin6(e: &Endpoint) -> Endpoint<Ipv6Addr> {
    Endpoint {
        address: Ipv6Addr::new(
            0xfd00,
            0x244,
            0,
            0,
            0,
            0,
            0,
            u16::from(e.address.octets()[3]),
        ),
        ready: e.ready,
        ports: e.ports.clone(),
    }
}

fn service() -> impl Strategy<Value = Service> {
    (
        proptest::option::of(Just(Ipv4Addr::new(10, 96, 0, 10))),
        proptest::option::of(Just(Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 0x10))),
        prop_oneof![
            (1u16..100).prop_map(TargetPort::Number),
            Just(TargetPort::Name("http".into())),
            Just(TargetPort::Name("grpc".into())),
        ],
        any::<bool>(),
        port_name(),
    )
        .prop_map(
            |(cluster_ip, cluster_ip6, target_port, affinity, name)| Service {
                namespace: "shop".into(),
                name: "web".into(),
                cluster_ip,
                cluster_ip6,
                ports: vec![ServicePort {
                    name,
                    protocol: Protocol::Tcp,
                    port: 80,
                    target_port,
                    node_port: None,
                }],
                affinity: if affinity {
                    Affinity::ClientIp
                } else {
                    Affinity::None
                },
            },
        )
}

/// The modules of one family only target ready endpoints, on the number
/// their slice gives the port named like the Service port, and every ready
/// endpoint with that port is a backend; the VIP is the family's ClusterIP.
fn backends_are_ready_endpoints<A: ServiceFamily>(
    svc: &Service,
    endpoints: &[Endpoint<A>],
) -> Result<(), TestCaseError> {
    let (modules, warnings) = load_balancers(svc, endpoints);
    let Some(vip) = A::cluster_ip(svc) else {
        prop_assert!(
            modules.is_empty(),
            "no ClusterIP of the family: not load-balanced in it"
        );
        return Ok(());
    };
    let lb = modules.values().next().expect("one port, one module");
    prop_assert_eq!(lb.vip, vip);
    for b in &lb.backends {
        prop_assert!(endpoints.iter().any(|e| e.ready && e.address == b.address));
    }
    for e in endpoints.iter().filter(|e| e.ready) {
        let want = e
            .ports
            .iter()
            .find(|p| p.name == svc.ports[0].name)
            .map(|p| p.port);
        match want {
            Some(port) => prop_assert!(
                lb.backends
                    .iter()
                    .any(|b| b.address == e.address && b.port == port)
            ),
            None => {
                let warned = warnings.iter().any(|w| {
                    matches!(
                        w,
                        ServiceWarning::UnknownTargetPort { endpoint, .. } if *endpoint == e.address.into()
                    )
                });
                prop_assert!(warned, "{} is not named: {:?}", e.address, warnings);
            }
        }
    }
    prop_assert!(
        lb.backends.windows(2).all(|w| w[0] < w[1]),
        "sorted, each once"
    );
    Ok(())
}

proptest! {
    /// A load-balancer module only targets ready endpoints, on the number
    /// their slice gives the port named like the Service port (whatever the
    /// targetPort says), and every ready endpoint with that port is a
    /// backend: in each family, on that family's ClusterIP and endpoints.
    #[test]
    fn backends_are_exactly_the_ready_endpoints(
        svc in service(),
        endpoints in proptest::collection::vec(endpoint(), 0..8),
    ) {
        backends_are_ready_endpoints(&svc, &endpoints)?;
        let endpoints6: Vec<Endpoint<Ipv6Addr>> = endpoints.iter().map(twin6).collect();
        backends_are_ready_endpoints(&svc, &endpoints6)?;
    }

    /// The two families' modules of a Service are twins: the same keys,
    /// NodePorts, affinity and backend ports, each on its own VIP.
    #[test]
    fn the_families_translate_alike(
        svc in service(),
        endpoints in proptest::collection::vec(endpoint(), 0..8),
    ) {
        let endpoints6: Vec<Endpoint<Ipv6Addr>> = endpoints.iter().map(twin6).collect();
        let (v4, w4) = load_balancers(&svc, &endpoints);
        let (v6, w6) = load_balancers(&svc, &endpoints6);
        if svc.cluster_ip.is_some() && svc.cluster_ip6.is_some() {
            prop_assert_eq!(v4.keys().collect::<Vec<_>>(), v6.keys().collect::<Vec<_>>());
            prop_assert_eq!(w4.len(), w6.len());
            for (k, lb) in &v4 {
                let lb6 = &v6[k];
                prop_assert_eq!((lb.node_port, lb.affinity), (lb6.node_port, lb6.affinity));
                let ports = |b: &[Backend<_>]| b.iter().map(|b| b.port).collect::<Vec<_>>();
                let ports6 = |b: &[Backend<Ipv6Addr>]| b.iter().map(|b| b.port).collect::<Vec<_>>();
                prop_assert_eq!(ports(&lb.backends), ports6(&lb6.backends));
            }
        }
    }
}

proptest! {
    /// Translation does not depend on the order of the endpoints.
    #[test]
    fn translation_is_deterministic(
        svc in service(),
        endpoints in proptest::collection::vec(endpoint(), 0..8),
    ) {
        let mut reversed = endpoints.clone();
        reversed.reverse();
        prop_assert_eq!(load_balancers(&svc, &endpoints), load_balancers(&svc, &reversed));
    }

    /// An update is the difference: applied to the old modules it gives the
    /// new ones, and it names only what changed.
    #[test]
    fn updates_are_diffs(
        svc in service(),
        before in proptest::collection::vec(endpoint(), 0..8),
        after in proptest::collection::vec(endpoint(), 0..8),
    ) {
        let (old, _) = load_balancers(&svc, &before);
        let (new, _) = load_balancers(&svc, &after);
        let d = diff_load_balancers(&old, &new);
        let mut applied = old.clone();
        d.apply(&mut applied);
        prop_assert_eq!(&applied, &new);
        prop_assert_eq!(d.is_empty(), old == new);
        for (k, lb) in &d.put {
            prop_assert_ne!(old.get(k), Some(lb));
        }
        prop_assert!(diff_load_balancers(&new, &new).is_empty());
    }
}

/// What the EndpointSlice controller writes for a Service port `web`
/// (targetPort `http`): slice ports named `web`, each slice with the number
/// `http` has on its pods; a pod without `http` sits in a slice without the
/// port.
#[test]
fn the_slice_port_named_like_the_service_port_gives_each_endpoint_its_number() {
    let svc = Service {
        namespace: "shop".into(),
        name: "web".into(),
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 10)),
        cluster_ip6: None,
        ports: vec![ServicePort {
            name: Some("web".into()),
            protocol: Protocol::Tcp,
            port: 80,
            target_port: TargetPort::Name("http".into()),
            node_port: Some(30080),
        }],
        affinity: Affinity::ClientIp,
    };
    let ep = |host: u8, port: Option<u16>| Endpoint {
        address: Ipv4Addr::new(10, 244, 0, host),
        ready: true,
        ports: port
            .map(|port| EndpointPort {
                name: Some("web".into()),
                protocol: Protocol::Tcp,
                port,
            })
            .into_iter()
            .collect(),
    };
    let (modules, warnings) =
        load_balancers(&svc, &[ep(2, Some(8080)), ep(3, Some(9090)), ep(4, None)]);
    let key = LoadBalancerKey {
        namespace: "shop".into(),
        service: "web".into(),
        protocol: Protocol::Tcp,
        port: 80,
    };
    let lb = &modules[&key];
    assert_eq!(lb.node_port, Some(30080));
    assert_eq!(lb.affinity, Affinity::ClientIp);
    assert_eq!(
        lb.backends,
        [
            Backend {
                address: Ipv4Addr::new(10, 244, 0, 2),
                port: 8080,
                weight: 1
            },
            Backend {
                address: Ipv4Addr::new(10, 244, 0, 3),
                port: 9090,
                weight: 1
            },
        ]
    );
    assert_eq!(
        warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "service shop/web port 80: endpoint 10.244.0.4 has no port named \"web\" in its EndpointSlice (targetPort \"http\" does not resolve on it)"
        ]
    );
}

/// A slice port named like the targetPort but not like the Service port
/// serves another Service port: it is not this one's.
#[test]
fn an_unnamed_service_port_takes_the_unnamed_slice_port_not_the_target_name() {
    let svc = Service {
        namespace: "shop".into(),
        name: "web".into(),
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 10)),
        cluster_ip6: None,
        ports: vec![ServicePort {
            name: None,
            protocol: Protocol::Tcp,
            port: 80,
            target_port: TargetPort::Name("http".into()),
            node_port: None,
        }],
        affinity: Affinity::None,
    };
    let ep = |name: Option<&str>| Endpoint {
        address: Ipv4Addr::new(10, 244, 0, 2),
        ready: true,
        ports: vec![EndpointPort {
            name: name.map(Into::into),
            protocol: Protocol::Tcp,
            port: 8080,
        }],
    };
    let (modules, warnings) = load_balancers(&svc, &[ep(None)]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(modules.values().next().map(|lb| lb.backends.len()), Some(1));
    let (modules, warnings) = load_balancers(&svc, &[ep(Some("http"))]);
    assert!(
        modules
            .values()
            .next()
            .is_some_and(|lb| lb.backends.is_empty())
    );
    assert_eq!(
        warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "service shop/web port 80: endpoint 10.244.0.2 has no port for the unnamed Service port in its EndpointSlice (targetPort \"http\" does not resolve on it)"
        ]
    );
}

/// A dual-stack Service is load-balanced in each family on that family's
/// ClusterIP and endpoints; a single-stack IPv6 one in IPv6 only.
#[test]
fn each_family_balances_its_own_cluster_ip_over_its_own_endpoints() {
    let mut svc = Service {
        namespace: "shop".into(),
        name: "web".into(),
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 10)),
        cluster_ip6: Some("fd00:96::10".parse().unwrap()),
        ports: vec![ServicePort {
            name: None,
            protocol: Protocol::Tcp,
            port: 80,
            target_port: TargetPort::Number(8080),
            node_port: None,
        }],
        affinity: Affinity::None,
    };
    let port = vec![EndpointPort {
        name: None,
        protocol: Protocol::Tcp,
        port: 8080,
    }];
    let v4 = [Endpoint {
        address: Ipv4Addr::new(10, 244, 0, 2),
        ready: true,
        ports: port.clone(),
    }];
    let v6 = [Endpoint {
        address: "fd00:244::2".parse::<Ipv6Addr>().unwrap(),
        ready: true,
        ports: port,
    }];
    let (m4, _) = load_balancers(&svc, &v4);
    let (m6, _) = load_balancers(&svc, &v6);
    let lb6 = m6.values().next().expect("an IPv6 module");
    assert_eq!(lb6.vip, "fd00:96::10".parse::<Ipv6Addr>().unwrap());
    assert_eq!(lb6.backends[0].address, v6[0].address);
    assert_eq!(m4.values().next().map(|lb| lb.vip), svc.cluster_ip);
    svc.cluster_ip = None;
    assert!(load_balancers(&svc, &v4).0.is_empty(), "IPv6 single-stack");
    assert_eq!(load_balancers(&svc, &v6).0.len(), 1);
}
