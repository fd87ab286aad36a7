use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;

fn cidr(a: u8, b: u8, prefix: u8) -> Ipv4Cidr {
    Ipv4Cidr {
        addr: Ipv4Addr::new(10, a, b, 0),
        prefix,
    }
}

/// Up to four networks with /16../24 subnets in 10.0-3.x (they may overlap
/// each other), a Service CIDR in 10.96/12 or elsewhere, exceptions.
fn setup() -> impl Strategy<Value = (Vec<NetworkSpec>, Ipv4Cidr, Masquerade)> {
    let network = (0u8..4, 0u8..4, 16u8..=24).prop_map(|(a, b, p)| cidr(a, b, p));
    (
        proptest::collection::vec(network, 1..4),
        prop_oneof![Just(DEFAULT_SERVICE_CIDR), Just(cidr(1, 0, 16))],
        any::<bool>(),
        proptest::collection::vec(
            (0u8..=255, 0u8..=255).prop_map(|(a, b)| Ipv4Cidr {
                addr: Ipv4Addr::new(192, 168, a, b),
                prefix: 24,
            }),
            0..3,
        ),
    )
        .prop_map(|(subnets, service, enabled, except)| {
            let networks = subnets
                .into_iter()
                .enumerate()
                .map(|(i, s)| NetworkSpec::l2(&format!("n{i}"), s))
                .collect();
            (networks, service, Masquerade { enabled, except })
        })
}

fn destination() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        (0u8..4, any::<u8>(), any::<u8>()).prop_map(|(a, b, c)| Ipv4Addr::new(10, a, b, c)),
        (96u8..=111, any::<u8>(), any::<u8>()).prop_map(|(a, b, c)| Ipv4Addr::new(10, a, b, c)),
        (any::<u8>(), any::<u8>()).prop_map(|(b, c)| Ipv4Addr::new(192, 168, b, c)),
        any::<u32>().prop_map(Ipv4Addr::from),
    ]
}

proptest! {
    #[test]
    fn a_service_cidr_is_refused_exactly_when_it_overlaps_a_pod_network(
        (networks, service, masquerade) in setup(),
    ) {
        let overlaps = networks.iter().any(|n| {
            n.subnet.contains(service.network()) || service.contains(n.subnet.network())
        });
        match EgressPolicy::new(&networks, service, masquerade) {
            Ok(_) => prop_assert!(!overlaps),
            Err(e) => {
                prop_assert!(overlaps);
                let named = matches!(e, Error::ServiceCidrOverlap { .. });
                prop_assert!(named);
            }
        }
    }

    #[test]
    fn every_destination_gets_the_documented_fate(
        (networks, service, masquerade) in setup(),
        from in 0usize..4,
        dst in destination(),
    ) {
        let Ok(policy) = EgressPolicy::new(&networks, service, masquerade.clone()) else {
            return Ok(());
        };
        let from = &networks[from % networks.len()];
        let egress = policy.decide(&from.name, dst);
        let expected = if from.subnet.contains(dst) {
            Egress::Local
        } else if networks.iter().any(|n| n.subnet.contains(dst)) {
            Egress::Isolated
        } else if service.contains(dst) {
            Egress::Service
        } else if masquerade.enabled && !masquerade.except.iter().any(|e| e.contains(dst)) {
            Egress::Masqueraded
        } else {
            Egress::Direct
        };
        prop_assert_eq!(egress, expected);
        // what the kernel renders: masquerade unless an exclusion holds the destination
        let excluded = policy.masquerade_exclusions().iter().any(|c| c.contains(dst));
        prop_assert_eq!(
            egress == Egress::Masqueraded,
            policy.masquerades() && !excluded,
            "exclusions {:?}", policy.masquerade_exclusions()
        );
        // a pod network is never masqueraded towards
        if networks.iter().any(|n| n.subnet.contains(dst)) {
            prop_assert!(excluded || !policy.masquerades());
        }
    }
}

#[test]
fn the_default_service_cidr_is_kubernetes_own() {
    assert_eq!(DEFAULT_SERVICE_CIDR.to_string(), "10.96.0.0/12");
    let pods = [NetworkSpec::l2(
        "pods",
        "10.244.0.0/24".parse().expect("cidr"),
    )];
    let policy =
        EgressPolicy::new(&pods, DEFAULT_SERVICE_CIDR, Masquerade::default()).expect("policy");
    // 10.x outside the pod networks and the Service CIDR is "outside"
    assert_eq!(
        policy.decide("pods", Ipv4Addr::new(10, 1, 2, 3)),
        Egress::Masqueraded
    );
    assert_eq!(
        policy.decide("pods", Ipv4Addr::new(10, 96, 0, 1)),
        Egress::Service
    );
    assert_eq!(
        policy.decide("pods", Ipv4Addr::new(10, 244, 0, 9)),
        Egress::Local
    );
    let e = EgressPolicy::new(
        &pods,
        "10.244.0.0/16".parse().expect("cidr"),
        Masquerade::default(),
    )
    .expect_err("overlap");
    assert_eq!(
        e.to_string(),
        "service CIDR 10.244.0.0/16 overlaps network pods (10.244.0.0/24): choose a Service CIDR outside every pod network"
    );
}

#[test]
fn masquerade_reads_like_the_cni_setting() {
    let m: Masquerade = serde_json::from_str("{}").expect("defaults");
    assert_eq!(m, Masquerade::default());
    assert!(m.enabled);
    let m: Masquerade =
        serde_json::from_str(r#"{"enabled": false, "except": ["192.168.0.0/16"]}"#).expect("set");
    assert!(!m.enabled);
    assert_eq!(m.except.len(), 1);
}
