//! `explain` on a small cluster: two networks, a Service, policies of
//! every tier; allowed, denied by policy, isolated, unrouted and refused
//! connections, in the value, the text and the JSON.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::*;
use crate::admin::{AdminAction, AdminNetworkPolicy, AdminRule, PodSet};
use crate::egress::{DEFAULT_SERVICE_CIDR, Masquerade};
use crate::isolation::{Path, tiered_connection_allowed};
use crate::network::NetworkSpec;
use crate::policy::{NetworkPolicy, PolicyRule, PortRange, RulePort, Selector};
use crate::service::{Affinity, Backend};
use crate::tiers::translate_tiers;
use crate::verdict::RuleRef;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 3);
const DB: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 2);
const WEB_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
const EMPTY_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 11);

struct World {
    egress: EgressPolicy,
    pods: Vec<PolicyPod>,
    pod_networks: BTreeMap<Ipv4Addr, String>,
    namespaces: Vec<PolicyNamespace>,
    policies: PolicySet,
    load_balancers: BTreeMap<LoadBalancerKey, LoadBalancer>,
}

impl World {
    fn view(&self) -> ClusterView<'_> {
        ClusterView {
            egress: &self.egress,
            pods: &self.pods,
            pod_networks: &self.pod_networks,
            namespaces: &self.namespaces,
            policies: &self.policies,
            load_balancers: &self.load_balancers,
        }
    }

    fn explain(&self, src: &str, dst: &str, port: u16) -> Explanation {
        explain(
            &self.view(),
            &ExplainQuery {
                source: src.parse().expect("source"),
                destination: dst.parse().expect("destination"),
                protocol: Protocol::Tcp,
                port,
            },
        )
        .expect("explain")
    }
}

fn team(name: &str) -> Selector {
    Selector {
        match_labels: BTreeMap::from([("team".to_string(), name.to_string())]),
        expressions: Vec::new(),
    }
}

/// `left` 10.1.0.0/24 holds shop/server and guest/client, `right`
/// 10.2.0.0/24 holds shop/db; Service shop/web 10.96.0.10:80 → server
/// :8080, shop/empty 10.96.0.11:80 has no endpoint.
fn world() -> World {
    let net = |name: &str, subnet: &str| NetworkSpec::l2(name, subnet.parse().expect("cidr"));
    let egress = EgressPolicy::new(
        &[net("left", "10.1.0.0/24"), net("right", "10.2.0.0/24")],
        DEFAULT_SERVICE_CIDR,
        Masquerade::default(),
    )
    .expect("networks");
    let pod = |ns: &str, name: &str, address| PolicyPod {
        namespace: ns.into(),
        name: name.into(),
        labels: BTreeMap::from([("app".to_string(), name.to_string())]),
        address,
        ports: Vec::new(),
    };
    let ns = |name: &str| PolicyNamespace {
        name: name.into(),
        labels: BTreeMap::from([("team".to_string(), name.to_string())]),
    };
    let lb = |service: &str, vip, backends: Vec<Backend>| {
        (
            LoadBalancerKey {
                namespace: "shop".into(),
                service: service.into(),
                protocol: Protocol::Tcp,
                port: 80,
            },
            LoadBalancer {
                vip,
                node_port: None,
                affinity: Affinity::None,
                backends,
            },
        )
    };
    World {
        egress,
        pods: vec![
            pod("shop", "server", SERVER),
            pod("guest", "client", CLIENT),
            pod("shop", "db", DB),
        ],
        pod_networks: BTreeMap::from([
            (SERVER, "left".to_string()),
            (CLIENT, "left".to_string()),
            (DB, "right".to_string()),
        ]),
        namespaces: vec![ns("shop"), ns("guest")],
        policies: PolicySet::default(),
        load_balancers: BTreeMap::from([
            lb(
                "web",
                WEB_VIP,
                vec![Backend {
                    address: SERVER,
                    port: 8080,
                    weight: 1,
                }],
            ),
            lb("empty", EMPTY_VIP, Vec::new()),
        ]),
    }
}

fn server_takes_8080() -> NetworkPolicy {
    NetworkPolicy {
        namespace: "shop".into(),
        name: "web".into(),
        pod_selector: Selector {
            match_labels: BTreeMap::from([("app".to_string(), "server".to_string())]),
            expressions: Vec::new(),
        },
        ingress: Some(vec![PolicyRule {
            peers: Vec::new(),
            ports: vec![RulePort::Numbers(PortRange {
                protocol: Protocol::Tcp,
                range: Some((8080, 8080)),
            })],
        }]),
        egress: None,
    }
}

#[test]
fn an_allowed_connection_names_the_rule_that_admits_it() {
    let mut w = world();
    let e = w.explain("guest/client", "shop/server", 8080);
    assert_eq!(e.verdict(), Verdict::Allowed);
    assert_eq!(e.paths[0].decided_by, Reason::Open, "no policy at all");
    assert_eq!(e.paths[0].route, Some(Route::Local));
    w.policies.network.push(server_takes_8080());
    let e = w.explain("guest/client", "10.1.0.2", 8080);
    assert_eq!(e.verdict(), Verdict::Allowed);
    assert_eq!(
        e.paths[0].decided_by,
        Reason::Policy {
            direction: Direction::Ingress,
            decider: Decider::Rule {
                rule: RuleRef::Network {
                    namespace: "shop".into(),
                    policy: "web".into(),
                    direction: Direction::Ingress,
                    index: 0,
                }
            }
        }
    );
    let text = e.to_string();
    assert!(
        text.starts_with("guest/client (10.1.0.3 on left) -> 10.1.0.2 TCP/8080: allowed"),
        "{text}"
    );
    assert!(
        text.contains("by ingress: NetworkPolicy shop/web ingress[0]: Allow"),
        "{text}"
    );
}

#[test]
fn a_denied_connection_names_the_denying_rule_or_the_isolation() {
    let mut w = world();
    w.policies.network.push(server_takes_8080());
    let e = w.explain("guest/client", "shop/server", 22);
    assert_eq!(e.verdict(), Verdict::Denied);
    assert_eq!(
        e.paths[0].decided_by,
        Reason::Policy {
            direction: Direction::Ingress,
            decider: Decider::Isolation {
                policies: vec!["shop/web".into()]
            }
        }
    );
    // an ANP Deny at 10 beats the NetworkPolicy's allow, on the Service path too
    w.policies.admin.push(AdminNetworkPolicy {
        name: "no-guests".into(),
        priority: 10,
        subject: PodSet::Namespaces(team("shop")),
        ingress: vec![AdminRule {
            name: Some("deny-guests".into()),
            action: AdminAction::Deny,
            peers: vec![PodSet::Namespaces(team("guest"))],
            ports: Vec::new(),
        }],
        egress: Vec::new(),
    });
    let e = w.explain("guest/client", &WEB_VIP.to_string(), 80);
    assert_eq!(e.verdict(), Verdict::Denied);
    let service = e.service.as_ref().expect("the Service on the way");
    assert_eq!(service.backends, vec![(SERVER, 8080)]);
    let text = e.to_string();
    assert!(
        text.contains("Service shop/web DNAT 10.96.0.10:80 -> 10.1.0.2:8080"),
        "{text}"
    );
    assert!(
        text.contains(
            "denied by ingress: AdminNetworkPolicy no-guests (priority 10) ingress[0] \"deny-guests\": Deny"
        ),
        "{text}"
    );
}

#[test]
fn an_isolated_connection_names_the_networks_and_a_service_or_a_rule_opens_it() {
    let mut w = world();
    let e = w.explain("shop/server", "shop/db", 5432);
    assert_eq!(e.verdict(), Verdict::Denied);
    assert_eq!(
        e.paths[0].decided_by,
        Reason::NetworkIsolation {
            from: "left".into(),
            to: "right".into()
        }
    );
    assert_eq!(
        e.paths[0].route,
        Some(Route::OtherNetwork {
            network: "right".into()
        })
    );
    assert!(
        e.to_string()
            .contains("isolation between networks left and right")
    );
    // a Service opens the crossing for its own connections
    let db_vip = Ipv4Addr::new(10, 96, 0, 12);
    w.load_balancers.insert(
        LoadBalancerKey {
            namespace: "shop".into(),
            service: "db".into(),
            protocol: Protocol::Tcp,
            port: 5432,
        },
        LoadBalancer {
            vip: db_vip,
            node_port: None,
            affinity: Affinity::None,
            backends: vec![Backend {
                address: DB,
                port: 5432,
                weight: 1,
            }],
        },
    );
    let e = w.explain("shop/server", &db_vip.to_string(), 5432);
    assert_eq!(e.verdict(), Verdict::Allowed);
    assert_eq!(e.paths[0].decided_by, Reason::Open);
    // an ANP Allow on the destination's ingress opens the crossing
    w.policies.admin.push(AdminNetworkPolicy {
        name: "db-from-shop".into(),
        priority: 50,
        subject: PodSet::Namespaces(team("shop")),
        ingress: vec![AdminRule {
            name: None,
            action: AdminAction::Allow,
            peers: vec![PodSet::Namespaces(team("shop"))],
            ports: Vec::new(),
        }],
        egress: Vec::new(),
    });
    let e = w.explain("shop/server", "shop/db", 5432);
    assert_eq!(e.verdict(), Verdict::Allowed);
    assert!(matches!(
        &e.paths[0].decided_by,
        Reason::Policy { decider: Decider::Rule { rule: RuleRef::Admin { policy, .. } }, .. }
            if policy == "db-from-shop"
    ));
}

#[test]
fn unrouted_and_refused_connections_say_what_is_missing() {
    let w = world();
    let e = w.explain("guest/client", "10.1.0.99", 80);
    assert_eq!(e.verdict(), Verdict::Unrouted);
    assert_eq!(
        e.paths[0].decided_by,
        Reason::NoPod {
            network: "left".into()
        }
    );
    assert!(
        e.paths[0].egress.is_none(),
        "no policy is judged without a route"
    );
    let e = w.explain("guest/client", "10.2.0.77", 80);
    assert_eq!(
        e.paths[0].decided_by,
        Reason::NoPod {
            network: "right".into()
        }
    );
    let e = w.explain("guest/client", &WEB_VIP.to_string(), 443);
    assert_eq!(e.verdict(), Verdict::Unrouted, "no Service on 443");
    assert_eq!(e.paths[0].decided_by, Reason::NoService);
    let e = w.explain("guest/client", &EMPTY_VIP.to_string(), 80);
    assert_eq!(e.verdict(), Verdict::Refused);
    assert!(
        e.to_string()
            .contains("Service shop/empty has no ready endpoint")
    );
    // outside: masqueraded and open
    let e = w.explain("guest/client", "192.0.2.1", 443);
    assert_eq!(e.verdict(), Verdict::Allowed);
    assert_eq!(e.paths[0].route, Some(Route::Outside { masqueraded: true }));
    assert_eq!(
        e.paths[0].ingress.as_ref().map(|s| &s.decided_by),
        Some(&Decider::NotAPod)
    );
}

#[test]
fn the_json_form_round_trips_and_names_the_rule() {
    let mut w = world();
    w.policies.network.push(server_takes_8080());
    let e = w.explain("guest/client", "shop/server", 22);
    let json = serde_json::to_value(&e).expect("json");
    assert_eq!(json["paths"][0]["verdict"], "denied");
    assert_eq!(json["paths"][0]["decided_by"]["kind"], "policy");
    assert_eq!(
        json["paths"][0]["decided_by"]["decider"]["kind"],
        "isolation"
    );
    assert_eq!(json["source"]["pod"]["name"], "client");
    let back: Explanation = serde_json::from_value(json).expect("round trip");
    assert_eq!(back, e);
}

#[test]
fn endpoints_parse_and_unknown_pods_are_named() {
    assert_eq!(
        "10.1.0.2".parse::<ConnectionEnd>().expect("ip"),
        ConnectionEnd::Address(SERVER)
    );
    assert_eq!(
        "web".parse::<ConnectionEnd>().expect("name"),
        ConnectionEnd::Pod(PodName {
            namespace: "default".into(),
            name: "web".into()
        })
    );
    assert!(matches!(
        "a/b/c".parse::<ConnectionEnd>(),
        Err(Error::InvalidEndpoint(_))
    ));
    let w = world();
    let q = |src: &str, dst: &str| ExplainQuery {
        source: src.parse().expect("src"),
        destination: dst.parse().expect("dst"),
        protocol: Protocol::Tcp,
        port: 80,
    };
    assert_eq!(
        explain(&w.view(), &q("shop/nope", "shop/server")).expect_err("src"),
        Error::UnknownPod("shop/nope".into())
    );
    assert_eq!(
        explain(&w.view(), &q("192.0.2.1", "shop/server")).expect_err("src is no pod"),
        Error::UnknownPod("192.0.2.1".into())
    );
    assert_eq!(
        explain(&w.view(), &q("shop/server", "shop/gone")).expect_err("dst"),
        Error::UnknownPod("shop/gone".into())
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(100))]

    /// Between pods, `explain` allows exactly what the tiers and the
    /// isolation between networks let through, and a denial always names a
    /// policy side or the isolation.
    #[test]
    fn explain_agrees_with_the_rendered_decision(
        (policies, pods, namespaces) in crate::admin::tests::full_world()
    ) {
        // 10.0.0.0-3 on `left`, 10.0.0.4-7 on `right`
        let net = |name: &str, subnet: &str| NetworkSpec::l2(name, subnet.parse().expect("cidr"));
        let egress = EgressPolicy::new(
            &[net("left", "10.0.0.0/30"), net("right", "10.0.0.4/30")],
            DEFAULT_SERVICE_CIDR,
            Masquerade::default(),
        ).expect("networks");
        let network_of = |a: Ipv4Addr| if a.octets()[3] < 4 { "left" } else { "right" };
        let pod_networks: BTreeMap<Ipv4Addr, String> =
            pods.iter().map(|p| (p.address, network_of(p.address).to_string())).collect();
        let load_balancers = BTreeMap::new();
        let view = ClusterView {
            egress: &egress, pods: &pods, pod_networks: &pod_networks,
            namespaces: &namespaces, policies: &policies, load_balancers: &load_balancers,
        };
        let tiers = translate_tiers(&policies, &pods, &namespaces);
        for src in &pods {
            for dst in &pods {
                for port in [79u16, 80, 81] {
                    let e = explain(&view, &ExplainQuery {
                        source: ConnectionEnd::Address(src.address),
                        destination: ConnectionEnd::Address(dst.address),
                        protocol: Protocol::Tcp,
                        port,
                    }).expect("explain");
                    let want = tiered_connection_allowed(
                        &egress, &tiers, network_of(src.address), src.address, dst.address,
                        Protocol::Tcp, port, Path::Direct);
                    proptest::prop_assert_eq!(e.verdict() == Verdict::Allowed, want, "{}", e);
                    if e.verdict() == Verdict::Denied {
                        let named = match &e.paths[0].decided_by {
                            Reason::Policy { direction: Direction::Egress, .. } =>
                                e.paths[0].egress.as_ref().is_some_and(|s| !s.allowed),
                            Reason::Policy { direction: Direction::Ingress, .. } =>
                                e.paths[0].ingress.as_ref().is_some_and(|s| !s.allowed),
                            Reason::NetworkIsolation { from, to } => from != to,
                            _ => false,
                        };
                        proptest::prop_assert!(named, "{}", e);
                    }
                }
            }
        }
    }
}
