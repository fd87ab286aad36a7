//! The isolation decision against the policy reference evaluator, with the
//! crossing rule read off the NetworkPolicy objects themselves.

use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;
use crate::addr::Ipv4Cidr;
use crate::egress::{DEFAULT_SERVICE_CIDR, Masquerade};
use crate::network::NetworkSpec;
use crate::policy::tests::{reference, selects, world};
use crate::policy::{NetworkPolicy, PolicyPod, translate_policies};

/// Two networks splitting the reference world's addresses: 10.0.0.0-3 on
/// `left`, 10.0.0.4-7 on `right`.
fn networks() -> EgressPolicy {
    let net = |name: &str, last: u8| {
        NetworkSpec::l2(
            name,
            Ipv4Cidr {
                addr: Ipv4Addr::new(10, 0, 0, last),
                prefix: 30,
            },
        )
    };
    EgressPolicy::new(
        &[net("left", 0), net("right", 4)],
        DEFAULT_SERVICE_CIDR,
        Masquerade::default(),
    )
    .expect("no overlap")
}

fn network_of(a: Ipv4Addr) -> &'static str {
    if a.octets()[3] < 4 { "left" } else { "right" }
}

/// Some policy selecting the pod at `dst` isolates its ingress.
fn ingress_isolated(policies: &[NetworkPolicy], pods: &[PolicyPod], dst: Ipv4Addr) -> bool {
    pods.iter().filter(|p| p.address == dst).any(|pod| {
        policies.iter().any(|policy| {
            policy.namespace == pod.namespace
                && selects(&policy.pod_selector, &pod.labels)
                && policy.ingress.is_some()
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Within a network, to the outside and through a Service the policies
    /// alone decide; directly into another network only what an ingress
    /// rule of a policy selecting the destination allows gets through (and
    /// the source's egress still applies).
    #[test]
    fn crossing_networks_follows_the_model((policies, pods, namespaces) in world()) {
        let egress = networks();
        let acls = translate_policies(&policies, &pods, &namespaces);
        let destinations: Vec<Ipv4Addr> = (0u8..8).map(|i| Ipv4Addr::new(10, 0, 0, i))
            .chain([Ipv4Addr::new(192, 0, 2, 1)]).collect();
        for src in (0u8..8).map(|i| Ipv4Addr::new(10, 0, 0, i)) {
            for &dst in &destinations {
                let crossing = dst.octets()[0] == 10 && network_of(src) != network_of(dst);
                for protocol in [Protocol::Tcp, Protocol::Udp] {
                    for port in 78u16..85 {
                        let allowed = reference(&policies, &pods, &namespaces, src, dst, protocol, port);
                        let direct = allowed && (!crossing || ingress_isolated(&policies, &pods, dst));
                        prop_assert_eq!(
                            connection_allowed(&egress, &acls, network_of(src), src, dst, protocol, port, Path::Direct),
                            direct, "{} -> {} {:?}/{}", src, dst, protocol, port
                        );
                        prop_assert_eq!(
                            connection_allowed(&egress, &acls, network_of(src), src, dst, protocol, port, Path::Service),
                            allowed, "via a Service: {} -> {} {:?}/{}", src, dst, protocol, port
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn without_a_policy_only_a_service_crosses() {
    let egress = networks();
    let acls = BTreeMap::new();
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 5));
    for (src, dst) in [(a, b), (b, a)] {
        let net = network_of(src);
        assert!(!connection_allowed(
            &egress,
            &acls,
            net,
            src,
            dst,
            Protocol::Tcp,
            8080,
            Path::Direct
        ));
        assert!(connection_allowed(
            &egress,
            &acls,
            net,
            src,
            dst,
            Protocol::Tcp,
            8080,
            Path::Service
        ));
    }
    let same = Ipv4Addr::new(10, 0, 0, 2);
    assert!(connection_allowed(
        &egress,
        &acls,
        "left",
        a,
        same,
        Protocol::Tcp,
        8080,
        Path::Direct
    ));
}
