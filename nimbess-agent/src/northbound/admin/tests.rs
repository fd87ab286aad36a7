use std::net::Ipv4Addr;

use nephrite_pipeline::{AdminAction, AdminPort, PodSet, Protocol, tiers_allow};

use super::super::resources::parse_into;
use super::super::{Objects, derive};

/// Two namespaces: `shop` (a server and a client) and `other` (a client);
/// the server's NetworkPolicy lets both clients in on TCP 8080.
const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {tier: shop}}
---
apiVersion: v1
kind: Namespace
metadata: {name: other, labels: {tier: other}}
---
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: shop, labels: {app: server}}
spec: {containers: [{name: c, image: x, ports: [{name: http, containerPort: 8080}]}]}
status: {podIP: 10.1.0.2}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: shop, labels: {app: client}}
spec: {containers: [{name: c, image: x}]}
status: {podIP: 10.1.0.3}
---
apiVersion: v1
kind: Pod
metadata: {name: outsider, namespace: other, labels: {app: client}}
spec: {containers: [{name: c, image: x}]}
status: {podIP: 10.1.0.4}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-clients, namespace: shop}
spec:
  podSelector: {matchLabels: {app: server}}
  policyTypes: [Ingress]
  ingress:
    - from: [{namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}]
      ports: [{port: 8080}]
"#;

const ANP: &str = r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: guard}
spec:
  priority: 10
  subject: {namespaces: {matchLabels: {tier: shop}}}
  ingress:
    - name: no-other
      action: Deny
      from: [{namespaces: {matchLabels: {tier: other}}}]
    - name: shop-to-np
      action: Pass
      from: [{pods: {namespaceSelector: {matchLabels: {tier: shop}}, podSelector: {}}}]
      ports: [{portNumber: {protocol: TCP, port: 8080}}, {namedPort: http}, {portRange: {start: 9000, end: 9010, protocol: UDP}}]
"#;

const BANP: &str = r#"
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: {namespaces: {}}
  ingress:
    - name: baseline-deny
      action: Deny
      from: [{namespaces: {}}]
"#;

fn objects(texts: &[&str]) -> Objects {
    let mut objects = Objects::default();
    let mut warnings = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        parse_into(t, &format!("doc{i}"), &mut objects, &mut warnings);
    }
    assert_eq!(warnings, Vec::<String>::new());
    objects
}

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 3);
const OUTSIDER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 4);

#[test]
fn an_admin_policy_is_read_with_its_subject_rules_peers_and_ports() {
    let objects = objects(&[ANP]);
    let anp = super::admin(&objects.admin_policies[0]).expect("valid");
    assert_eq!((anp.name.as_str(), anp.priority), ("guard", 10));
    assert!(matches!(anp.subject, PodSet::Namespaces(_)));
    assert_eq!(anp.ingress.len(), 2);
    assert_eq!(anp.ingress[0].action, AdminAction::Deny);
    assert_eq!(anp.ingress[1].action, AdminAction::Pass);
    assert_eq!(anp.ingress[1].name.as_deref(), Some("shop-to-np"));
    assert_eq!(
        anp.ingress[1].ports,
        [
            AdminPort::Number {
                protocol: Protocol::Tcp,
                port: 8080
            },
            AdminPort::Named("http".into()),
            AdminPort::Range {
                protocol: Protocol::Udp,
                start: 9000,
                end: 9010
            },
        ]
    );
}

#[test]
fn a_deny_beats_the_namespaces_allowing_policy_and_a_pass_hands_over_to_it() {
    let d = derive(&objects(&[CLUSTER, ANP]));
    assert_eq!(d.warnings, []);
    let tcp = |src, port| tiers_allow(&d.tiers, src, SERVER, Protocol::Tcp, port);
    // the NetworkPolicy alone would let the outsider in on 8080
    assert!(!tcp(OUTSIDER, 8080), "the Deny at priority 10 decides");
    // Pass: the NetworkPolicy decides (8080 allowed, 8081 not)
    assert!(tcp(CLIENT, 8080));
    assert!(!tcp(CLIENT, 8081));
    // the NetworkPolicies' ACL is still derived as before
    assert!(d.acls.contains_key(&SERVER));
}

#[test]
fn the_baseline_decides_only_where_nothing_else_did() {
    let d = derive(&objects(&[CLUSTER, BANP]));
    assert_eq!(d.warnings, []);
    let tcp = |src, dst, port| tiers_allow(&d.tiers, src, dst, Protocol::Tcp, port);
    // the server is isolated by its NetworkPolicy: the BANP never speaks there
    assert!(tcp(CLIENT, SERVER, 8080));
    assert!(!tcp(CLIENT, SERVER, 8081));
    // nothing selects the client for ingress: the BANP's Deny decides
    assert!(!tcp(SERVER, CLIENT, 80));
    assert!(!tcp(OUTSIDER, CLIENT, 80));
}

#[test]
fn what_the_schema_or_the_model_refuses_is_a_warning_naming_the_policy_and_field() {
    let bad = [
        (
            "kind: AdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: a}\nspec: {priority: 3, subject: {namespaces: {}}, ingress: [{action: Drop, from: [{namespaces: {}}]}]}\n",
            "AdminNetworkPolicy a: spec.ingress[0].action \"Drop\" is not Allow, Deny or Pass",
        ),
        (
            "kind: AdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: b}\nspec: {priority: 3, subject: {namespaces: {}}, egress: [{action: Allow, to: [{networks: [10.0.0.0/8]}]}]}\n",
            "AdminNetworkPolicy b: spec.egress[0].to[0].networks: peers by networks are not supported",
        ),
        (
            "kind: AdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: c}\nspec: {priority: 1001, subject: {namespaces: {}}}\n",
            "priority 1001",
        ),
        (
            "kind: AdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: d}\nspec: {priority: 3, subject: {namespaces: {}}, ingress: [{action: Allow, from: [{namespaces: {}}], ports: [{portRange: {start: 90, end: 80}}]}]}\n",
            "AdminNetworkPolicy d: spec.ingress[0].ports[0].portRange: start 90 is after end 80",
        ),
        (
            "kind: AdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: e}\nspec: {subject: {namespaces: {}}}\n",
            "AdminNetworkPolicy e: spec.priority is required",
        ),
        (
            "kind: BaselineAdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: other}\nspec: {subject: {namespaces: {}}}\n",
            "default",
        ),
        (
            "kind: BaselineAdminNetworkPolicy\napiVersion: policy.networking.k8s.io/v1alpha1\nmetadata: {name: default}\nspec: {subject: {namespaces: {}}, ingress: [{action: Pass, from: [{namespaces: {}}]}]}\n",
            "BaselineAdminNetworkPolicy default: spec.ingress[0].action \"Pass\" is not Allow or Deny",
        ),
    ];
    for (yaml, expected) in bad {
        let d = derive(&objects(&[CLUSTER, yaml]));
        assert_eq!(d.warnings.len(), 1, "{yaml}: {:?}", d.warnings);
        let w = &d.warnings[0];
        assert!(
            w.text.contains(expected),
            "{:?} does not say {expected:?}",
            w.text
        );
        assert!(w.reason.starts_with("Invalid"), "{}", w.reason);
        assert_eq!(w.regarding.api_version, super::API_VERSION);
        // the skipped policy decides nothing: the NetworkPolicy alone does
        assert!(tiers_allow(&d.tiers, OUTSIDER, SERVER, Protocol::Tcp, 8080));
    }
}
