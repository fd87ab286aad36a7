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

#[test]
fn an_admin_allow_opens_the_crossing_and_a_deny_closes_even_a_service() {
    use crate::admin::{AdminAction, AdminNetworkPolicy, AdminRule, PodSet};
    use crate::policy::{PolicyNamespace, Selector};
    use crate::tiers::translate_tiers;
    use crate::verdict::PolicySet;

    let egress = networks();
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 5));
    let pod = |address: Ipv4Addr| PolicyPod {
        namespace: "default".into(),
        name: address.to_string(),
        labels: BTreeMap::new(),
        address,
        ports: Vec::new(),
    };
    let pods = [pod(a), pod(b)];
    let namespaces = [PolicyNamespace {
        name: "default".into(),
        labels: BTreeMap::new(),
    }];
    let everyone = || PodSet::Namespaces(Selector::default());
    let anp = |action| AdminNetworkPolicy {
        name: "p".into(),
        priority: 1,
        subject: everyone(),
        ingress: vec![AdminRule {
            name: None,
            action,
            peers: vec![everyone()],
            ports: Vec::new(),
        }],
        egress: Vec::new(),
    };
    let allowed = |action: Option<AdminAction>, path| {
        let policies = PolicySet {
            admin: action.map(anp).into_iter().collect(),
            ..PolicySet::default()
        };
        let tiers = translate_tiers(&policies, &pods, &namespaces);
        tiered_connection_allowed(&egress, &tiers, "left", a, b, Protocol::Tcp, 80, path)
    };
    assert!(!allowed(None, Path::Direct), "no policy: isolated");
    assert!(allowed(None, Path::Service));
    assert!(
        allowed(Some(AdminAction::Allow), Path::Direct),
        "an explicit Allow crosses"
    );
    assert!(
        !allowed(Some(AdminAction::Pass), Path::Direct),
        "a Pass decides nothing"
    );
    assert!(
        !allowed(Some(AdminAction::Deny), Path::Service),
        "a Deny holds for a Service too"
    );
}
