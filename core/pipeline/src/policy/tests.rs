//! The translation against a reference evaluator written straight from the
//! Kubernetes NetworkPolicy semantics, on the objects themselves.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

pub(crate) fn labels(role: Option<&str>) -> BTreeMap<String, String> {
    role.map(|r| BTreeMap::from([("role".to_string(), r.to_string())]))
        .unwrap_or_default()
}

pub(crate) fn selector() -> impl Strategy<Value = Selector> {
    let role = prop_oneof![Just("client"), Just("server"), Just("other")];
    prop_oneof![
        Just(Selector::default()),
        role.clone().prop_map(|r| Selector {
            match_labels: labels(Some(r)),
            expressions: Vec::new(),
        }),
        (
            prop_oneof![
                Just(SelectorOp::In),
                Just(SelectorOp::NotIn),
                Just(SelectorOp::Exists),
                Just(SelectorOp::DoesNotExist)
            ],
            proptest::collection::vec(role, 0..3)
        )
            .prop_map(|(op, values)| Selector {
                match_labels: BTreeMap::new(),
                expressions: vec![Requirement {
                    key: "role".into(),
                    op,
                    values: values.into_iter().map(str::to_string).collect(),
                }],
            }),
    ]
}

pub(crate) fn ns_selector() -> impl Strategy<Value = Selector> {
    prop_oneof![
        Just(Selector::default()),
        prop_oneof![Just("x"), Just("y")].prop_map(|e| Selector {
            match_labels: BTreeMap::from([("env".to_string(), e.to_string())]),
            expressions: Vec::new(),
        }),
    ]
}

fn peer() -> impl Strategy<Value = Peer> {
    prop_oneof![
        (
            proptest::option::of(ns_selector()),
            proptest::option::of(selector())
        )
            .prop_map(|(namespace_selector, pod_selector)| Peer::Pods {
                namespace_selector,
                pod_selector
            }),
        (
            0u8..8,
            24u8..=32,
            proptest::collection::vec((0u8..8, 29u8..=32), 0..2)
        )
            .prop_map(|(a, prefix, except)| Peer::Block {
                cidr: Ipv4Cidr {
                    addr: Ipv4Addr::new(10, 0, 0, a),
                    prefix
                },
                except: except
                    .into_iter()
                    .map(|(e, p)| Ipv4Cidr {
                        addr: Ipv4Addr::new(10, 0, 0, e),
                        prefix: p
                    })
                    .collect(),
            }),
        // the policy selects its pods all the same
        (0u16..4, 48u8..=64).prop_map(|(n, prefix)| Peer::BlockV6 {
            cidr: crate::Ipv6Cidr {
                addr: std::net::Ipv6Addr::new(0xfd00, n, 0, 0, 0, 0, 0, 0),
                prefix
            },
            except: Vec::new(),
        }),
    ]
}

fn ports() -> impl Strategy<Value = Vec<RulePort>> {
    let protocol = || prop_oneof![Just(Protocol::Tcp), Just(Protocol::Udp)];
    proptest::collection::vec(
        prop_oneof![
            (protocol(), proptest::option::of((79u16..82, 0u16..3))).prop_map(|(protocol, r)| {
                RulePort::Numbers(PortRange {
                    protocol,
                    range: r.map(|(lo, len)| (lo, lo + len)),
                })
            }),
            (
                protocol(),
                prop_oneof![Just("http"), Just("dns"), Just("none")]
            )
                .prop_map(|(protocol, name)| RulePort::Named {
                    protocol,
                    name: name.into()
                }),
        ],
        0..3,
    )
}

/// A pod's named container ports: `http` (TCP) and `dns` (UDP) on numbers
/// that differ from pod to pod, or absent.
fn container_ports() -> impl Strategy<Value = Vec<NamedPort>> {
    (
        proptest::option::of(79u16..84),
        proptest::option::of(79u16..84),
    )
        .prop_map(|(http, dns)| {
            let mut out = Vec::new();
            if let Some(port) = http {
                out.push(NamedPort {
                    name: "http".into(),
                    protocol: Protocol::Tcp,
                    port,
                });
            }
            if let Some(port) = dns {
                out.push(NamedPort {
                    name: "dns".into(),
                    protocol: Protocol::Udp,
                    port,
                });
            }
            out
        })
}

fn rules() -> impl Strategy<Value = Option<Vec<PolicyRule>>> {
    proptest::option::of(proptest::collection::vec(
        (proptest::collection::vec(peer(), 0..3), ports())
            .prop_map(|(peers, ports)| PolicyRule { peers, ports }),
        0..3,
    ))
}

pub(crate) fn world()
-> impl Strategy<Value = (Vec<NetworkPolicy>, Vec<PolicyPod>, Vec<PolicyNamespace>)> {
    let pods = proptest::collection::vec(
        (
            prop_oneof![Just("a"), Just("b")],
            proptest::option::of(prop_oneof![Just("client"), Just("server"), Just("other")]),
            container_ports(),
        ),
        1..6,
    )
    .prop_map(|pods| {
        pods.into_iter()
            .enumerate()
            .map(|(i, (ns, role, ports))| PolicyPod {
                namespace: ns.into(),
                name: format!("p{i}"),
                labels: labels(role),
                address: Ipv4Addr::new(10, 0, 0, i as u8),
                ports,
            })
            .collect::<Vec<_>>()
    });
    let policies = proptest::collection::vec(
        (
            prop_oneof![Just("a"), Just("b")],
            selector(),
            rules(),
            rules(),
        ),
        0..4,
    )
    .prop_map(|ps| {
        ps.into_iter()
            .enumerate()
            .map(|(i, (ns, pod_selector, ingress, egress))| NetworkPolicy {
                namespace: ns.into(),
                name: format!("np{i}"),
                pod_selector,
                ingress,
                egress,
            })
            .collect::<Vec<_>>()
    });
    (
        policies,
        pods,
        prop_oneof![Just("x"), Just("y")],
        prop_oneof![Just("x"), Just("y")],
    )
        .prop_map(|(policies, pods, ea, eb)| {
            let ns = |name: &str, env: &str| PolicyNamespace {
                name: name.into(),
                labels: BTreeMap::from([
                    ("env".to_string(), env.to_string()),
                    ("kubernetes.io/metadata.name".to_string(), name.to_string()),
                ]),
            };
            (policies, pods, vec![ns("a", ea), ns("b", eb)])
        })
}

/// A selector read the way the Kubernetes documentation states it.
pub(crate) fn selects(s: &Selector, labels: &BTreeMap<String, String>) -> bool {
    for (k, v) in &s.match_labels {
        if labels.get(k) != Some(v) {
            return false;
        }
    }
    for r in &s.expressions {
        let ok = match (r.op, labels.get(&r.key)) {
            (SelectorOp::In, Some(v)) => r.values.iter().any(|x| x == v),
            (SelectorOp::In, None) => false,
            (SelectorOp::NotIn, Some(v)) => r.values.iter().all(|x| x != v),
            (SelectorOp::NotIn, None) => true,
            (SelectorOp::Exists, v) => v.is_some(),
            (SelectorOp::DoesNotExist, v) => v.is_none(),
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The reference: Kubernetes' rules read off the objects.
pub(crate) fn reference(
    policies: &[NetworkPolicy],
    pods: &[PolicyPod],
    namespaces: &[PolicyNamespace],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> bool {
    let world = (policies, pods, namespaces, &BTreeMap::new());
    reference_ip(world, src.into(), dst.into(), protocol, port)
}

/// Policies, pods, namespaces, and the pods' IPv6 addresses by their IPv4
/// ones.
type World<'a> = (
    &'a [NetworkPolicy],
    &'a [PolicyPod],
    &'a [PolicyNamespace],
    &'a BTreeMap<Ipv4Addr, Ipv6Addr>,
);

/// The reference in either family: a pod is where its address of the
/// family is (`twins`: its IPv6 address by its IPv4 one), a block holds
/// only addresses of its own family.
fn reference_ip(
    (policies, pods, namespaces, twins): World<'_>,
    src: IpAddr,
    dst: IpAddr,
    protocol: Protocol,
    port: u16,
) -> bool {
    let pod_at = |ip: IpAddr| {
        pods.iter().find(|p| match ip {
            IpAddr::V4(a) => p.address == a,
            IpAddr::V6(a) => twins.get(&p.address) == Some(&a),
        })
    };
    let ns_labels = |name: &str| {
        namespaces
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.labels.clone())
            .unwrap_or_default()
    };
    let peer_matches = |policy: &NetworkPolicy, peer: &Peer, ip: IpAddr| match (peer, ip) {
        (Peer::Block { cidr, except }, IpAddr::V4(ip)) => {
            cidr.contains(ip) && !except.iter().any(|e| e.contains(ip))
        }
        (Peer::BlockV6 { cidr, except }, IpAddr::V6(ip)) => {
            cidr.contains(ip) && !except.iter().any(|e| e.contains(ip))
        }
        // a block of one family holds no address of the other
        (Peer::Block { .. } | Peer::BlockV6 { .. }, _) => false,
        (
            Peer::Pods {
                namespace_selector,
                pod_selector,
            },
            _,
        ) => match pod_at(ip) {
            None => false,
            Some(p) => {
                let in_ns = match namespace_selector {
                    None => p.namespace == policy.namespace,
                    Some(s) => selects(s, &ns_labels(&p.namespace)),
                };
                in_ns && pod_selector.as_ref().is_none_or(|s| selects(s, &p.labels))
            }
        },
    };
    // a rule's port: a number or range, or a name the destination pod
    // gives one of its container ports (with that protocol)
    let port_matches = |rule: &PolicyRule, destination: IpAddr| {
        rule.ports.is_empty()
            || rule.ports.iter().any(|r| match r {
                RulePort::Numbers(r) => {
                    r.protocol == protocol
                        && match r.range {
                            None => true,
                            Some((lo, hi)) => (lo..=hi).contains(&port),
                        }
                }
                RulePort::Named { protocol: p, name } => {
                    *p == protocol
                        && pod_at(destination).is_some_and(|d| {
                            d.ports.iter().any(|c| {
                                c.name == *name && c.protocol == protocol && c.port == port
                            })
                        })
                }
            })
    };
    // one direction: `me` is the pod whose policies decide, `other` the peer
    let side = |me: IpAddr, other: IpAddr, ingress: bool| {
        let Some(pod) = pod_at(me) else { return true };
        let mut isolated = false;
        for policy in policies {
            if policy.namespace != pod.namespace || !selects(&policy.pod_selector, &pod.labels) {
                continue;
            }
            let rules = if ingress {
                &policy.ingress
            } else {
                &policy.egress
            };
            let Some(rules) = rules else { continue };
            isolated = true;
            for rule in rules {
                let peer_ok = rule.peers.is_empty()
                    || rule.peers.iter().any(|p| peer_matches(policy, p, other));
                let destination = if ingress { me } else { other };
                if peer_ok && port_matches(rule, destination) {
                    return true;
                }
            }
        }
        !isolated
    };
    side(src, dst, false) && side(dst, src, true)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The translated ACLs decide every (source, destination, protocol,
    /// port) like the reference evaluator; a pod selected by no policy is
    /// reachable from all.
    #[test]
    fn translated_acls_decide_like_the_reference((policies, pods, namespaces) in world()) {
        let acls = translate_policies(&policies, &pods, &namespaces);
        let addresses: Vec<Ipv4Addr> = (0u8..8).map(|i| Ipv4Addr::new(10, 0, 0, i))
            .chain([Ipv4Addr::new(192, 0, 2, 1)]).collect();
        for &src in &addresses {
            for &dst in &addresses {
                for protocol in [Protocol::Tcp, Protocol::Udp] {
                    for port in 78u16..85 {
                        let want = reference(&policies, &pods, &namespaces, src, dst, protocol, port);
                        let got = acl_allows(&acls, src, dst, protocol, port);
                        prop_assert_eq!(got, want, "{} -> {} {:?}/{}", src, dst, protocol, port);
                    }
                }
            }
        }
        prop_assert_eq!(&translate_policies(&policies, &pods, &namespaces), &acls, "deterministic");
    }

    /// The IPv6 translation decides every connection between IPv6
    /// addresses like the reference does on the pods' IPv6 addresses: pod
    /// peers by their IPv6 address (a pod without one is no peer and not
    /// isolated in IPv6), IPv6 blocks, IPv4 blocks holding nothing.
    #[test]
    fn translated_ipv6_acls_decide_like_the_reference(
        (policies, pods, namespaces) in world(),
        without in proptest::collection::vec(any::<bool>(), 6),
    ) {
        // pod i at fd00:(i % 4)::(i + 1), some pods without an IPv6 address
        let twins: BTreeMap<Ipv4Addr, Ipv6Addr> = pods
            .iter()
            .enumerate()
            .filter(|(i, _)| !without[*i])
            .map(|(i, p)| (p.address, Ipv6Addr::new(0xfd00, (i % 4) as u16, 0, 0, 0, 0, 0, i as u16 + 1)))
            .collect();
        let acls = translate_policies6(&policies, &pods, &namespaces, &twins);
        let addresses: Vec<Ipv6Addr> = twins
            .values()
            .copied()
            .chain(["fd00:1::99".parse().unwrap(), "fd00:7::1".parse().unwrap()])
            .collect();
        let world = (policies.as_slice(), pods.as_slice(), namespaces.as_slice(), &twins);
        for &src in &addresses {
            for &dst in &addresses {
                for protocol in [Protocol::Tcp, Protocol::Udp] {
                    for port in 78u16..85 {
                        let want = reference_ip(world, src.into(), dst.into(), protocol, port);
                        let got = acl_allows6(&acls, src, dst, protocol, port);
                        prop_assert_eq!(got, want, "{} -> {} {:?}/{}", src, dst, protocol, port);
                    }
                }
            }
        }
    }
}

/// A dual-stack pod isolated by a policy with an IPv6 `ipBlock` and
/// `except`: in IPv6 the block admits one client and not the other (in
/// the except); in IPv4 the block holds nobody, so the pod is closed.
#[test]
fn an_ipv6_block_admits_its_peers_in_ipv6_only() {
    let pod = |name: &str, i: u8| PolicyPod {
        namespace: "default".into(),
        name: name.into(),
        labels: labels(Some(name)),
        address: Ipv4Addr::new(10, 0, 0, i),
        ports: Vec::new(),
    };
    let pods = vec![pod("server", 1), pod("client", 2), pod("other", 3)];
    let six = |i: u16| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i);
    let twins: BTreeMap<Ipv4Addr, Ipv6Addr> = (1..=3)
        .map(|i| (Ipv4Addr::new(10, 0, 0, i), six(u16::from(i))))
        .collect();
    let policies = vec![NetworkPolicy {
        namespace: "default".into(),
        name: "v6".into(),
        pod_selector: Selector {
            match_labels: labels(Some("server")),
            expressions: vec![],
        },
        ingress: Some(vec![PolicyRule {
            peers: vec![Peer::BlockV6 {
                cidr: "fd00::/64".parse().unwrap(),
                except: vec!["fd00::3/128".parse().unwrap()],
            }],
            ports: vec![],
        }]),
        egress: None,
    }];
    let acls6 = translate_policies6(&policies, &pods, &[], &twins);
    assert!(acl_allows6(&acls6, six(2), six(1), Protocol::Tcp, 8080));
    assert!(!acl_allows6(&acls6, six(3), six(1), Protocol::Tcp, 8080));
    let acls = translate_policies(&policies, &pods, &[]);
    let v4 = |i| Ipv4Addr::new(10, 0, 0, i);
    assert!(!acl_allows(&acls, v4(2), v4(1), Protocol::Tcp, 8080));
    assert!(acl_allows(&acls, v4(1), v4(2), Protocol::Tcp, 8080), "open");
}

#[test]
fn deny_all_plus_allow_from_a_label() {
    let pod = |name: &str, role: &str, i: u8| PolicyPod {
        namespace: "default".into(),
        name: name.into(),
        labels: labels(Some(role)),
        address: Ipv4Addr::new(10, 0, 0, i),
        ports: Vec::new(),
    };
    let pods = vec![
        pod("server", "server", 1),
        pod("client", "client", 2),
        pod("other", "other", 3),
    ];
    let server_sel = Selector {
        match_labels: labels(Some("server")),
        expressions: vec![],
    };
    let policies = vec![
        NetworkPolicy {
            namespace: "default".into(),
            name: "deny".into(),
            pod_selector: Selector::default(),
            ingress: Some(vec![]),
            egress: None,
        },
        NetworkPolicy {
            namespace: "default".into(),
            name: "allow".into(),
            pod_selector: server_sel,
            ingress: Some(vec![PolicyRule {
                peers: vec![Peer::Pods {
                    namespace_selector: None,
                    pod_selector: Some(Selector {
                        match_labels: labels(Some("client")),
                        expressions: vec![],
                    }),
                }],
                ports: vec![RulePort::Numbers(PortRange {
                    protocol: Protocol::Tcp,
                    range: Some((8080, 8080)),
                })],
            }]),
            egress: None,
        },
    ];
    let acls = translate_policies(&policies, &pods, &[]);
    let (s, c, o) = (
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        Ipv4Addr::new(10, 0, 0, 3),
    );
    assert!(acl_allows(&acls, c, s, Protocol::Tcp, 8080));
    assert!(!acl_allows(&acls, c, s, Protocol::Tcp, 8081));
    assert!(!acl_allows(&acls, o, s, Protocol::Tcp, 8080));
    assert!(
        !acl_allows(&acls, s, c, Protocol::Tcp, 8080),
        "deny-all covers the client too"
    );
}

#[test]
fn a_named_port_resolves_on_each_destination_pod_and_an_unknown_name_matches_nothing() {
    let http = |port| NamedPort {
        name: "http".into(),
        protocol: Protocol::Tcp,
        port,
    };
    let pod = |name: &str, role: &str, i: u8, ports: Vec<NamedPort>| PolicyPod {
        namespace: "default".into(),
        name: name.into(),
        labels: labels(Some(role)),
        address: Ipv4Addr::new(10, 0, 0, i),
        ports,
    };
    // two servers name different numbers "http"; the third has no such port
    let pods = vec![
        pod("s1", "server", 1, vec![http(8080)]),
        pod("s2", "server", 2, vec![http(9090)]),
        pod("s3", "server", 3, vec![]),
        pod("client", "client", 4, vec![http(7070)]),
    ];
    let named = |name: &str| RulePort::Named {
        protocol: Protocol::Tcp,
        name: name.into(),
    };
    let policy = |ingress: Option<Vec<PolicyRule>>, egress: Option<Vec<PolicyRule>>, sel: &str| {
        NetworkPolicy {
            namespace: "default".into(),
            name: "p".into(),
            pod_selector: Selector {
                match_labels: labels(Some(sel)),
                expressions: vec![],
            },
            ingress,
            egress,
        }
    };
    let ip = |i| Ipv4Addr::new(10, 0, 0, i);
    let ingress = policy(
        Some(vec![PolicyRule {
            peers: vec![],
            ports: vec![named("http")],
        }]),
        None,
        "server",
    );
    let acls = translate_policies(&[ingress], &pods, &[]);
    assert!(acl_allows(&acls, ip(4), ip(1), Protocol::Tcp, 8080));
    assert!(!acl_allows(&acls, ip(4), ip(1), Protocol::Tcp, 9090));
    assert!(acl_allows(&acls, ip(4), ip(2), Protocol::Tcp, 9090));
    assert!(!acl_allows(&acls, ip(4), ip(2), Protocol::Tcp, 8080));
    assert!(
        !acl_allows(&acls, ip(4), ip(3), Protocol::Tcp, 8080),
        "a pod without the name takes nothing through the rule"
    );
    assert!(
        !acl_allows(&acls, ip(4), ip(1), Protocol::Udp, 8080),
        "TCP only"
    );
    assert_eq!(
        acls[&ip(3)].ingress,
        Some(vec![]),
        "isolated, nothing allowed"
    );
    // egress from the client to "http": each server's own number
    let egress = policy(
        None,
        Some(vec![PolicyRule {
            peers: vec![Peer::Block {
                cidr: "10.0.0.0/24".parse().expect("cidr"),
                except: vec![],
            }],
            ports: vec![named("http")],
        }]),
        "client",
    );
    let acls = translate_policies(&[egress], &pods, &[]);
    assert!(acl_allows(&acls, ip(4), ip(1), Protocol::Tcp, 8080));
    assert!(acl_allows(&acls, ip(4), ip(2), Protocol::Tcp, 9090));
    assert!(!acl_allows(&acls, ip(4), ip(2), Protocol::Tcp, 8080));
    assert!(
        !acl_allows(&acls, ip(4), ip(9), Protocol::Tcp, 8080),
        "an address that is no pod's has no named port"
    );
    // a name no pod has
    let nobody = policy(
        Some(vec![PolicyRule {
            peers: vec![],
            ports: vec![named("metrics")],
        }]),
        None,
        "server",
    );
    let acls = translate_policies(&[nobody], &pods, &[]);
    for server in 1..=3 {
        assert_eq!(acls[&ip(server)].ingress, Some(vec![]));
    }
}
