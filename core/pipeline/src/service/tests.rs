use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (0u8..8, any::<bool>(), 8000u16..8003).prop_map(|(host, ready, port)| Endpoint {
        address: Ipv4Addr::new(10, 244, 0, host),
        ready,
        ports: vec![EndpointPort {
            name: Some("http".into()),
            protocol: Protocol::Tcp,
            port,
        }],
    })
}

fn service() -> impl Strategy<Value = Service> {
    (
        proptest::option::of(Just(Ipv4Addr::new(10, 96, 0, 10))),
        prop_oneof![
            (1u16..100).prop_map(TargetPort::Number),
            Just(TargetPort::Name("http".into())),
            Just(TargetPort::Name("grpc".into())),
        ],
        any::<bool>(),
    )
        .prop_map(|(cluster_ip, target_port, affinity)| Service {
            namespace: "shop".into(),
            name: "web".into(),
            cluster_ip,
            ports: vec![ServicePort {
                name: Some("http".into()),
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
        })
}

proptest! {
    /// A load-balancer module only targets ready endpoints, on the port the
    /// Service names, and every ready endpoint with that port is a backend.
    #[test]
    fn backends_are_exactly_the_ready_endpoints(
        svc in service(),
        endpoints in proptest::collection::vec(endpoint(), 0..8),
    ) {
        let (modules, warnings) = load_balancers(&svc, &endpoints);
        if svc.cluster_ip.is_none() {
            prop_assert!(modules.is_empty(), "a headless Service is not load-balanced");
            return Ok(());
        }
        let lb = modules.values().next().expect("one port, one module");
        for b in &lb.backends {
            prop_assert!(endpoints.iter().any(|e| e.ready && e.address == b.address));
        }
        for e in endpoints.iter().filter(|e| e.ready) {
            let want = match &svc.ports[0].target_port {
                TargetPort::Number(n) => Some(*n),
                TargetPort::Name(n) if n == "http" => Some(e.ports[0].port),
                TargetPort::Name(_) => None,
            };
            match want {
                Some(port) => prop_assert!(lb.backends.iter().any(|b| b.address == e.address && b.port == port)),
                None => prop_assert!(!warnings.is_empty()),
            }
        }
        prop_assert!(lb.backends.windows(2).all(|w| w[0] < w[1]), "sorted, each once");
    }

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

#[test]
fn a_named_target_port_follows_each_endpoint_and_a_missing_name_is_named() {
    let svc = Service {
        namespace: "shop".into(),
        name: "web".into(),
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 10)),
        ports: vec![ServicePort {
            name: None,
            protocol: Protocol::Tcp,
            port: 80,
            target_port: TargetPort::Name("http".into()),
            node_port: Some(30080),
        }],
        affinity: Affinity::ClientIp,
    };
    let ep = |host: u8, name: &str, port: u16| Endpoint {
        address: Ipv4Addr::new(10, 244, 0, host),
        ready: true,
        ports: vec![EndpointPort {
            name: Some(name.into()),
            protocol: Protocol::Tcp,
            port,
        }],
    };
    let (modules, warnings) = load_balancers(
        &svc,
        &[
            ep(2, "http", 8080),
            ep(3, "http", 9090),
            ep(4, "metrics", 9100),
        ],
    );
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
        ["service shop/web port 80: targetPort \"http\" is not a port of endpoint 10.244.0.4"]
    );
}
