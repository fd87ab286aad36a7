//! AdminNetworkPolicy, NetworkPolicy and BaselineAdminNetworkPolicy
//! together against a reference evaluator written here from the
//! network-policy-api text, on the objects: both the direct evaluation
//! ([`crate::decide_connection`]) and the data plane's tiers
//! ([`crate::translate_tiers`]) must decide every connection like it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;
use crate::policy::tests::{ns_selector, selector, selects, world};
use crate::policy::{NetworkPolicy, Peer, PolicyNamespace, PolicyRule, RulePort};
use crate::tiers::{tiers_allow, translate_tiers};
use crate::verdict::{PolicySet, decide_connection};

fn pod_set() -> impl Strategy<Value = PodSet> {
    prop_oneof![
        ns_selector().prop_map(PodSet::Namespaces),
        (ns_selector(), selector()).prop_map(|(namespace_selector, pod_selector)| PodSet::Pods {
            namespace_selector,
            pod_selector
        }),
    ]
}

fn admin_ports() -> impl Strategy<Value = Vec<AdminPort>> {
    let protocol = || prop_oneof![Just(Protocol::Tcp), Just(Protocol::Udp)];
    proptest::collection::vec(
        prop_oneof![
            (protocol(), 79u16..83)
                .prop_map(|(protocol, port)| AdminPort::Number { protocol, port }),
            (protocol(), 79u16..82, 0u16..3).prop_map(|(protocol, start, len)| AdminPort::Range {
                protocol,
                start,
                end: start + len
            }),
            prop_oneof![Just("http"), Just("dns"), Just("none")]
                .prop_map(|n| AdminPort::Named(n.to_string())),
        ],
        0..3,
    )
}

fn rules<A: Clone + std::fmt::Debug>(
    action: impl Strategy<Value = A> + Clone,
) -> impl Strategy<Value = Vec<AdminRule<A>>> {
    proptest::collection::vec(
        (
            action,
            proptest::collection::vec(pod_set(), 1..3),
            admin_ports(),
            proptest::option::of(Just("r")),
        )
            .prop_map(|(action, peers, ports, name)| AdminRule {
                name: name.map(str::to_string),
                action,
                peers,
                ports,
            }),
        0..3,
    )
}

fn admin_action() -> impl Strategy<Value = AdminAction> + Clone {
    prop_oneof![
        Just(AdminAction::Allow),
        Just(AdminAction::Deny),
        Just(AdminAction::Pass)
    ]
}

fn baseline_action() -> impl Strategy<Value = BaselineAction> + Clone {
    prop_oneof![Just(BaselineAction::Allow), Just(BaselineAction::Deny)]
}

/// The reference world plus ANPs (priorities that tie, to exercise the
/// order by name) and maybe a BANP.
pub(crate) fn full_world()
-> impl Strategy<Value = (PolicySet, Vec<PolicyPod>, Vec<PolicyNamespace>)> {
    let anps = proptest::collection::vec(
        (
            prop_oneof![Just(0u16), Just(10), Just(10), Just(1000)],
            pod_set(),
            rules(admin_action()),
            rules(admin_action()),
        ),
        0..4,
    )
    .prop_map(|anps| {
        anps.into_iter()
            .enumerate()
            // names not in priority order, so ties are broken by name
            .map(
                |(i, (priority, subject, ingress, egress))| AdminNetworkPolicy {
                    name: format!("anp{}", 9 - i),
                    priority,
                    subject,
                    ingress,
                    egress,
                },
            )
            .collect::<Vec<_>>()
    });
    let banp = proptest::option::of(
        (
            pod_set(),
            rules(baseline_action()),
            rules(baseline_action()),
        )
            .prop_map(|(subject, ingress, egress)| BaselineAdminNetworkPolicy {
                name: BASELINE_NAME.into(),
                subject,
                ingress,
                egress,
            }),
    );
    (world(), anps, banp).prop_map(|((network, pods, namespaces), admin, baseline)| {
        (
            PolicySet {
                admin,
                network,
                baseline,
            },
            pods,
            namespaces,
        )
    })
}

/// The reference, read off the objects for one connection.
struct Reference<'a> {
    policies: &'a PolicySet,
    pods: &'a [PolicyPod],
    namespaces: &'a [PolicyNamespace],
}

impl Reference<'_> {
    fn pod_at(&self, ip: Ipv4Addr) -> Option<&PolicyPod> {
        self.pods.iter().find(|p| p.address == ip)
    }

    fn ns_labels(&self, name: &str) -> BTreeMap<String, String> {
        self.namespaces
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.labels.clone())
            .unwrap_or_default()
    }

    fn in_set(&self, set: &PodSet, pod: &PolicyPod) -> bool {
        match set {
            PodSet::Namespaces(s) => selects(s, &self.ns_labels(&pod.namespace)),
            PodSet::Pods {
                namespace_selector,
                pod_selector,
            } => {
                selects(namespace_selector, &self.ns_labels(&pod.namespace))
                    && selects(pod_selector, &pod.labels)
            }
        }
    }

    /// A port the destination pod names `name` with this protocol and number.
    fn named(&self, destination: Ipv4Addr, name: &str, protocol: Protocol, port: u16) -> bool {
        self.pod_at(destination).is_some_and(|d| {
            d.ports
                .iter()
                .any(|c| c.name == name && c.protocol == protocol && c.port == port)
        })
    }

    fn admin_rule_hits<A>(
        &self,
        rule: &AdminRule<A>,
        other: Ipv4Addr,
        destination: Ipv4Addr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        let peer = match self.pod_at(other) {
            Some(p) => rule.peers.iter().any(|s| self.in_set(s, p)),
            None => false,
        };
        let ports = rule.ports.is_empty()
            || rule.ports.iter().any(|p| match p {
                AdminPort::Number {
                    protocol: pr,
                    port: n,
                } => *pr == protocol && *n == port,
                AdminPort::Range {
                    protocol: pr,
                    start,
                    end,
                } => *pr == protocol && *start <= port && port <= *end,
                AdminPort::Named(name) => self.named(destination, name, protocol, port),
            });
        peer && ports
    }

    fn network_rule_hits(
        &self,
        policy: &NetworkPolicy,
        rule: &PolicyRule,
        other: Ipv4Addr,
        destination: Ipv4Addr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        let peer = rule.peers.is_empty()
            || rule.peers.iter().any(|peer| match peer {
                Peer::Block { cidr, except } => {
                    cidr.contains(other) && except.iter().all(|e| !e.contains(other))
                }
                Peer::BlockV6 { .. } => false,
                Peer::Pods {
                    namespace_selector,
                    pod_selector,
                } => self.pod_at(other).is_some_and(|p| {
                    let ns = match namespace_selector {
                        None => p.namespace == policy.namespace,
                        Some(s) => selects(s, &self.ns_labels(&p.namespace)),
                    };
                    ns && pod_selector.as_ref().is_none_or(|s| selects(s, &p.labels))
                }),
            });
        let ports = rule.ports.is_empty()
            || rule.ports.iter().any(|p| match p {
                RulePort::Numbers(r) => {
                    r.protocol == protocol
                        && r.range.is_none_or(|(lo, hi)| lo <= port && port <= hi)
                }
                RulePort::Named { protocol: pr, name } => {
                    *pr == protocol && self.named(destination, name, protocol, port)
                }
            });
        peer && ports
    }

    /// One direction for the pod at `me`, the spec's order.
    fn side(
        &self,
        me: Ipv4Addr,
        other: Ipv4Addr,
        ingress: bool,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        let Some(pod) = self.pod_at(me) else {
            return true;
        };
        let destination = if ingress { me } else { other };
        // ANPs selecting the pod, by priority then name
        let mut anps: Vec<&AdminNetworkPolicy> = self
            .policies
            .admin
            .iter()
            .filter(|a| self.in_set(&a.subject, pod))
            .collect();
        anps.sort_by_key(|a| (a.priority, a.name.clone()));
        'anps: for anp in anps {
            let rules = if ingress { &anp.ingress } else { &anp.egress };
            for rule in rules {
                if self.admin_rule_hits(rule, other, destination, protocol, port) {
                    match rule.action {
                        AdminAction::Allow => return true,
                        AdminAction::Deny => return false,
                        AdminAction::Pass => break 'anps,
                    }
                }
            }
        }
        // NetworkPolicies isolating the pod in this direction decide
        let isolating: Vec<(&NetworkPolicy, &Vec<PolicyRule>)> = self
            .policies
            .network
            .iter()
            .filter(|p| p.namespace == pod.namespace && selects(&p.pod_selector, &pod.labels))
            .filter_map(|p| {
                let rules = if ingress { &p.ingress } else { &p.egress };
                rules.as_ref().map(|r| (p, r))
            })
            .collect();
        if !isolating.is_empty() {
            return isolating.iter().any(|(p, rules)| {
                rules
                    .iter()
                    .any(|r| self.network_rule_hits(p, r, other, destination, protocol, port))
            });
        }
        // the BANP
        if let Some(banp) = &self.policies.baseline
            && self.in_set(&banp.subject, pod)
        {
            let rules = if ingress { &banp.ingress } else { &banp.egress };
            for rule in rules {
                if self.admin_rule_hits(rule, other, destination, protocol, port) {
                    return rule.action == BaselineAction::Allow;
                }
            }
        }
        true
    }

    fn allows(&self, src: Ipv4Addr, dst: Ipv4Addr, protocol: Protocol, port: u16) -> bool {
        self.side(src, dst, false, protocol, port) && self.side(dst, src, true, protocol, port)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The direct evaluation and the data plane's tiers decide every
    /// (source, destination, protocol, port) like the reference.
    #[test]
    fn admin_tiers_decide_like_the_reference((policies, pods, namespaces) in full_world()) {
        let reference = Reference { policies: &policies, pods: &pods, namespaces: &namespaces };
        let tiers = translate_tiers(&policies, &pods, &namespaces);
        let addresses: Vec<Ipv4Addr> = (0u8..7).map(|i| Ipv4Addr::new(10, 0, 0, i))
            .chain([Ipv4Addr::new(192, 0, 2, 1)]).collect();
        for &src in &addresses {
            for &dst in &addresses {
                for protocol in [Protocol::Tcp, Protocol::Udp] {
                    for port in 78u16..85 {
                        let want = reference.allows(src, dst, protocol, port);
                        let direct = decide_connection(&policies, &pods, &namespaces, src, dst, protocol, port);
                        prop_assert_eq!(direct.allowed(), want, "direct {} -> {} {:?}/{}: {:?}", src, dst, protocol, port, direct);
                        prop_assert_eq!(tiers_allow(&tiers, src, dst, protocol, port), want,
                            "tiers {} -> {} {:?}/{}", src, dst, protocol, port);
                    }
                }
            }
        }
    }

    /// Without ANPs and a BANP the tiers are the NetworkPolicies' ACLs.
    #[test]
    fn without_admin_policies_the_tiers_are_the_network_policies((network, pods, namespaces) in world()) {
        let policies = PolicySet { admin: vec![], network: network.clone(), baseline: None };
        let tiers = translate_tiers(&policies, &pods, &namespaces);
        let mut acls = crate::policy::translate_policies(&network, &pods, &namespaces);
        // a policy with no direction leaves an entry that isolates nothing
        acls.retain(|_, a| a.ingress.is_some() || a.egress.is_some());
        prop_assert_eq!(tiers.len(), acls.len());
        for (addr, acl) in &acls {
            prop_assert_eq!(&tiers[addr].ingress.network, &acl.ingress);
            prop_assert_eq!(&tiers[addr].egress.network, &acl.egress);
            prop_assert!(tiers[addr].ingress.admin.is_empty() && tiers[addr].egress.baseline.is_empty());
        }
    }
}
