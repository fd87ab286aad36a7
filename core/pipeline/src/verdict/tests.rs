//! The spec's order on hand-written clusters: an ANP Deny beats an
//! allowing NetworkPolicy, Pass hands over to the NetworkPolicies, the
//! BANP decides only what nothing else did; each checked on the direct
//! evaluation (with the rule it names) and on the data plane's tiers.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::*;
use crate::admin::{AdminPort, AdminRule, BASELINE_NAME, PodSet};
use crate::policy::{PortRange, Selector};
use crate::tiers::{tiers_allow, translate_tiers};

/// Namespaces `shop` (team: shop) and `guest` (team: guest); `server` in
/// shop at .1, `client` in guest at .2, `friend` in shop at .3.
fn cluster() -> (Vec<PolicyPod>, Vec<PolicyNamespace>) {
    let pod = |ns: &str, name: &str, last| PolicyPod {
        namespace: ns.into(),
        name: name.into(),
        labels: BTreeMap::from([("app".to_string(), name.to_string())]),
        address: Ipv4Addr::new(10, 0, 0, last),
        ports: Vec::new(),
    };
    let ns = |name: &str| PolicyNamespace {
        name: name.into(),
        labels: BTreeMap::from([
            ("team".to_string(), name.to_string()),
            ("kubernetes.io/metadata.name".to_string(), name.to_string()),
        ]),
    };
    (
        vec![
            pod("shop", "server", 1),
            pod("guest", "client", 2),
            pod("shop", "friend", 3),
        ],
        vec![ns("shop"), ns("guest")],
    )
}

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const FRIEND: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);

fn team(name: &str) -> Selector {
    Selector {
        match_labels: BTreeMap::from([("team".to_string(), name.to_string())]),
        expressions: Vec::new(),
    }
}

/// shop's own NetworkPolicy: the server takes TCP 8080 from everyone.
fn shop_allows_8080() -> NetworkPolicy {
    NetworkPolicy {
        namespace: "shop".into(),
        name: "allow-web".into(),
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

/// An ANP on shop's pods with one ingress rule from `from`'s namespace.
fn anp(name: &str, priority: u16, action: AdminAction, from: &str) -> AdminNetworkPolicy {
    AdminNetworkPolicy {
        name: name.into(),
        priority,
        subject: PodSet::Namespaces(team("shop")),
        ingress: vec![AdminRule {
            name: Some(format!("{action}-{from}")),
            action,
            peers: vec![PodSet::Namespaces(team(from))],
            ports: Vec::new(),
        }],
        egress: Vec::new(),
    }
}

fn judge(policies: &PolicySet, src: Ipv4Addr, dst: Ipv4Addr, port: u16) -> ConnectionVerdict {
    let (pods, namespaces) = cluster();
    let direct = decide_connection(policies, &pods, &namespaces, src, dst, Protocol::Tcp, port);
    let tiers = translate_tiers(policies, &pods, &namespaces);
    assert_eq!(
        tiers_allow(&tiers, src, dst, Protocol::Tcp, port),
        direct.allowed(),
        "tiers and direct evaluation disagree on {src} -> {dst}:{port}: {direct:?}"
    );
    direct
}

#[test]
fn a_deny_at_priority_10_beats_the_namespaces_allowing_network_policy() {
    let mut policies = PolicySet {
        admin: Vec::new(),
        network: vec![shop_allows_8080()],
        baseline: None,
    };
    assert!(
        judge(&policies, CLIENT, SERVER, 8080).allowed(),
        "the NetworkPolicy alone allows"
    );
    policies.admin = vec![anp("no-guests", 10, AdminAction::Deny, "guest")];
    let v = judge(&policies, CLIENT, SERVER, 8080);
    assert!(!v.allowed());
    assert!(v.egress.allowed, "the client's egress has no policy");
    assert_eq!(
        v.ingress.decided_by,
        Decider::Rule {
            rule: RuleRef::Admin {
                policy: "no-guests".into(),
                priority: 10,
                direction: Direction::Ingress,
                index: 0,
                name: Some("Deny-guest".into()),
                action: AdminAction::Deny,
            }
        }
    );
    assert!(
        judge(&policies, FRIEND, SERVER, 8080).allowed(),
        "shop's own pods are no guests"
    );
    // a lower number wins: an Allow at 5 comes before the Deny at 10
    policies
        .admin
        .push(anp("guests-welcome", 5, AdminAction::Allow, "guest"));
    let v = judge(&policies, CLIENT, SERVER, 9999);
    assert!(
        v.allowed(),
        "the ANP Allow ignores the NetworkPolicy's port"
    );
    assert!(matches!(
        &v.ingress.decided_by,
        Decider::Rule { rule: RuleRef::Admin { policy, .. } } if policy == "guests-welcome"
    ));
}

#[test]
fn a_pass_hands_the_decision_to_the_network_policies() {
    // Pass at 5, Deny at 10: the Pass skips the Deny
    let mut policies = PolicySet {
        admin: vec![
            anp("delegate", 5, AdminAction::Pass, "guest"),
            anp("no-guests", 10, AdminAction::Deny, "guest"),
        ],
        network: vec![shop_allows_8080()],
        baseline: None,
    };
    let v = judge(&policies, CLIENT, SERVER, 8080);
    assert!(v.allowed(), "{v:?}");
    assert!(matches!(
        &v.ingress.decided_by,
        Decider::Rule { rule: RuleRef::Network { policy, .. } } if policy == "allow-web"
    ));
    assert!(matches!(
        &v.ingress.passed_by,
        Some(RuleRef::Admin { policy, action: AdminAction::Pass, .. }) if policy == "delegate"
    ));
    let v = judge(&policies, CLIENT, SERVER, 9090);
    assert!(
        !v.allowed(),
        "the NetworkPolicy isolates the server: 9090 is not allowed"
    );
    assert_eq!(
        v.ingress.decided_by,
        Decider::Isolation {
            policies: vec!["shop/allow-web".into()]
        }
    );
    // without a NetworkPolicy a Pass falls to the BANP, then to the default
    policies.network.clear();
    assert_eq!(
        judge(&policies, CLIENT, SERVER, 9090).ingress.decided_by,
        Decider::NoPolicy
    );
    // the Pass is what stops the Deny: without it the guest is denied
    policies.admin.remove(0);
    assert!(!judge(&policies, CLIENT, SERVER, 8080).allowed());
}

fn baseline_deny_guests() -> BaselineAdminNetworkPolicy {
    BaselineAdminNetworkPolicy {
        name: BASELINE_NAME.into(),
        subject: PodSet::Namespaces(team("shop")),
        ingress: vec![AdminRule {
            name: None,
            action: BaselineAction::Deny,
            peers: vec![PodSet::Namespaces(team("guest"))],
            ports: Vec::new(),
        }],
        egress: Vec::new(),
    }
}

#[test]
fn the_baseline_applies_only_where_nothing_else_decided() {
    let mut policies = PolicySet {
        admin: Vec::new(),
        network: Vec::new(),
        baseline: Some(baseline_deny_guests()),
    };
    // nothing else: the BANP denies
    let v = judge(&policies, CLIENT, SERVER, 8080);
    assert!(!v.allowed());
    assert!(matches!(
        v.ingress.decided_by,
        Decider::Rule {
            rule: RuleRef::Baseline {
                action: BaselineAction::Deny,
                ..
            }
        }
    ));
    assert!(
        judge(&policies, FRIEND, SERVER, 8080).allowed(),
        "no BANP rule matches shop's own pods"
    );
    // a NetworkPolicy isolating the server decides instead
    policies.network = vec![shop_allows_8080()];
    assert!(judge(&policies, CLIENT, SERVER, 8080).allowed());
    assert!(
        !judge(&policies, FRIEND, SERVER, 22).allowed(),
        "isolated: the BANP is not asked"
    );
    // an ANP Allow decides before both
    policies.network.clear();
    policies.admin = vec![anp("guests-welcome", 100, AdminAction::Allow, "guest")];
    assert!(judge(&policies, CLIENT, SERVER, 22).allowed());
    // a BANP Allow does not open what an isolating NetworkPolicy closes
    policies.admin.clear();
    policies.network = vec![shop_allows_8080()];
    policies.baseline = Some(BaselineAdminNetworkPolicy {
        ingress: vec![AdminRule {
            name: None,
            action: BaselineAction::Allow,
            peers: vec![PodSet::Namespaces(Selector::default())],
            ports: Vec::new(),
        }],
        ..baseline_deny_guests()
    });
    assert!(!judge(&policies, CLIENT, SERVER, 22).allowed());
}

#[test]
fn egress_rules_resolve_named_ports_on_the_destination_pod() {
    let (mut pods, namespaces) = cluster();
    pods[0].ports = vec![crate::policy::NamedPort {
        name: "http".into(),
        protocol: Protocol::Tcp,
        port: 8080,
    }];
    let policies = PolicySet {
        admin: vec![AdminNetworkPolicy {
            name: "guests-only-http".into(),
            priority: 1,
            subject: PodSet::Namespaces(team("guest")),
            ingress: Vec::new(),
            egress: vec![
                AdminRule {
                    name: None,
                    action: AdminAction::Allow,
                    peers: vec![PodSet::Namespaces(team("shop"))],
                    ports: vec![AdminPort::Named("http".into())],
                },
                AdminRule {
                    name: None,
                    action: AdminAction::Deny,
                    peers: vec![PodSet::Namespaces(Selector::default())],
                    ports: Vec::new(),
                },
            ],
        }],
        ..PolicySet::default()
    };
    let tiers = translate_tiers(&policies, &pods, &namespaces);
    for (dst, port, want) in [
        (SERVER, 8080, true),
        (SERVER, 8081, false),
        (FRIEND, 8080, false),
    ] {
        let direct = decide_connection(
            &policies,
            &pods,
            &namespaces,
            CLIENT,
            dst,
            Protocol::Tcp,
            port,
        );
        assert_eq!(direct.allowed(), want, "{dst}:{port}");
        assert_eq!(
            tiers_allow(&tiers, CLIENT, dst, Protocol::Tcp, port),
            want,
            "{dst}:{port}"
        );
    }
    // an address that is no pod's is in no set of pods: no rule matches
    let outside = Ipv4Addr::new(192, 0, 2, 1);
    assert!(
        decide_connection(
            &policies,
            &pods,
            &namespaces,
            CLIENT,
            outside,
            Protocol::Tcp,
            80
        )
        .allowed()
    );
}

#[test]
fn validation_names_the_policy_and_the_field() {
    let mut bad = anp("x", 1001, AdminAction::Deny, "guest");
    let err = bad.validate().expect_err("priority");
    assert_eq!(
        err.to_string(),
        "AdminNetworkPolicy x: priority 1001 (0..=1000)"
    );
    bad.priority = 1000;
    bad.validate().expect("1000 is the highest allowed");
    bad.ingress[0].ports = vec![AdminPort::Range {
        protocol: Protocol::Tcp,
        start: 90,
        end: 80,
    }];
    assert_eq!(
        bad.validate().expect_err("range").to_string(),
        "AdminNetworkPolicy x: ingress[0] (Deny-guest): port range 90-80 (need 1 ≤ start ≤ end)"
    );
    bad.ingress[0].ports.clear();
    bad.ingress[0].peers.clear();
    assert!(
        bad.validate()
            .expect_err("peers")
            .to_string()
            .contains("no peer")
    );
    let mut banp = baseline_deny_guests();
    banp.name = "other".into();
    assert!(
        banp.validate()
            .expect_err("name")
            .to_string()
            .contains("\"default\"")
    );
    let twice = PolicySet {
        admin: vec![
            anp("same", 1, AdminAction::Deny, "guest"),
            anp("same", 2, AdminAction::Deny, "guest"),
        ],
        ..PolicySet::default()
    };
    assert!(
        twice
            .validate()
            .expect_err("dup")
            .to_string()
            .contains("two policies")
    );
}

#[test]
fn a_policy_set_reads_from_json() {
    let text = r#"{
      "admin": [{
        "name": "no-guests", "priority": 10,
        "subject": {"namespaces": {"match_labels": {"team": "shop"}, "expressions": []}},
        "ingress": [{
          "name": "deny-guests", "action": "Deny",
          "peers": [{"namespaces": {"match_labels": {"team": "guest"}, "expressions": []}}],
          "ports": [{"number": {"protocol": "TCP", "port": 8080}}, {"named": "http"},
                    {"range": {"protocol": "UDP", "start": 53, "end": 54}}]
        }]
      }],
      "baseline": {
        "name": "default",
        "subject": {"pods": {"namespace_selector": {"match_labels": {}, "expressions": []},
                             "pod_selector": {"match_labels": {}, "expressions": []}}}
      }
    }"#;
    let set: PolicySet = serde_json::from_str(text).expect("json");
    set.validate().expect("valid");
    assert_eq!(set.admin[0].ingress[0].ports.len(), 3);
    assert!(set.network.is_empty() && set.admin[0].egress.is_empty());
    let back: PolicySet =
        serde_json::from_str(&serde_json::to_string(&set).expect("json")).expect("round trip");
    assert_eq!(back, set);
}
