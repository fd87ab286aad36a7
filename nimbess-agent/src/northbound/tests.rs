use std::net::Ipv4Addr;

use nephrite_pipeline::{Affinity, Backend, PodName, Protocol, acl_allows};

use super::resources::parse_into;
use super::{Objects, Source, derive, derive_at};

const YAML: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  sessionAffinity: ClientIP
  ports:
    - {name: http, port: 80, targetPort: http}
    - {name: admin, port: 9000, targetPort: 9090, protocol: UDP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports:
  - {name: http, port: 8080, protocol: TCP}
  - {name: admin, port: 9090, protocol: UDP}
endpoints:
  - addresses: [10.1.0.2]
    conditions: {ready: true}
  - addresses: [10.1.0.3]
  - addresses: [10.1.0.4]
    conditions: {ready: false}
---
apiVersion: v1
kind: Service
metadata: {name: headless, namespace: shop}
spec:
  clusterIP: None
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: broken, namespace: shop}
spec:
  clusterIP: 10.96.0.300
  ports: [{port: 80}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
"#;

fn objects(yaml: &str) -> (Objects, Vec<String>) {
    let mut objects = Objects::default();
    let mut warnings = Vec::new();
    parse_into(yaml, "test.yaml", &mut objects, &mut warnings);
    (objects, warnings)
}

#[test]
fn services_and_slices_become_load_balancers_of_ready_endpoints() {
    let (objects, warnings) = objects(YAML);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((objects.services.len(), objects.slices.len()), (3, 1));
    let derived = derive(&objects);
    assert_eq!(
        derived
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "service shop/broken: spec.clusterIP \"10.96.0.300\" is not an IP address".to_string()
        ]
    );
    assert_eq!(
        derived.load_balancers.len(),
        2,
        "headless and broken have none"
    );
    let http = derived
        .load_balancers
        .iter()
        .find(|(k, _)| k.port == 80)
        .map(|(_, lb)| lb)
        .expect("port 80");
    assert_eq!(http.vip, Ipv4Addr::new(10, 96, 0, 10));
    assert_eq!(http.affinity, Affinity::ClientIp);
    assert_eq!(
        http.backends,
        vec![
            Backend {
                address: Ipv4Addr::new(10, 1, 0, 2),
                port: 8080,
                weight: 1
            },
            Backend {
                address: Ipv4Addr::new(10, 1, 0, 3),
                port: 8080,
                weight: 1
            },
        ],
        "the named targetPort resolved; a missing ready condition is ready; not-ready left out"
    );
    let admin = derived
        .load_balancers
        .iter()
        .find(|(k, _)| k.port == 9000)
        .expect("port 9000");
    assert_eq!(admin.0.protocol, Protocol::Udp);
    assert_eq!(admin.1.backends.len(), 2);
}

/// What kube-controller-manager writes for a Service whose port `web`
/// targets the pods' port named `http`: the slice's port is named after the
/// Service port, with the number `http` resolved to on the slice's pods;
/// no slice port is named `http`. A single unnamed Service port's slice
/// port is named "" (the agent read it as no name before: so it still does).
const CONTROLLER_SLICES: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.11
  ports: [{name: web, port: 80, targetPort: http}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-x1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: web, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.1.0.2], conditions: {ready: true}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-x2, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: web, port: 8081, protocol: TCP}]
endpoints: [{addresses: [10.1.0.3], conditions: {ready: true}}]
---
apiVersion: v1
kind: Service
metadata: {name: solo, namespace: shop}
spec:
  clusterIP: 10.96.0.12
  ports: [{port: 81, targetPort: http}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: solo-x1, namespace: shop, labels: {kubernetes.io/service-name: solo}}
addressType: IPv4
ports: [{name: "", port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.1.0.2], conditions: {ready: true}}]
"#;

#[test]
fn a_named_target_port_is_paired_by_the_service_ports_name_as_the_controller_writes_slices() {
    let (objects, warnings) = objects(CONTROLLER_SLICES);
    assert!(warnings.is_empty(), "{warnings:?}");
    let derived = derive(&objects);
    assert!(derived.warnings.is_empty(), "{:?}", derived.warnings);
    let backends = |port: u16| {
        derived
            .load_balancers
            .iter()
            .find(|(k, _)| k.port == port)
            .map(|(_, lb)| lb.backends.clone())
            .unwrap_or_default()
    };
    let backend = |last: u8, port: u16| Backend {
        address: Ipv4Addr::new(10, 1, 0, last),
        port,
        weight: 1,
    };
    assert_eq!(
        backends(80),
        vec![backend(2, 8080), backend(3, 8081)],
        "each pod at the number its slice resolved targetPort http to"
    );
    assert_eq!(backends(81), vec![backend(2, 8080)], "the unnamed port");
}

#[test]
fn an_unreadable_document_is_named_and_the_rest_applied() {
    let yaml = "kind: Service\nmetadata: {name: a}\nspec: {ports: [{port: \"x\"}]}\n---\nkind: Namespace\nmetadata: {name: shop}\n";
    let (objects, warnings) = objects(yaml);
    assert_eq!(objects.namespaces.len(), 1);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("test.yaml: document 0 (Service a):"),
        "{warnings:?}"
    );
}

#[test]
fn resources_take_a_dir_prefix() {
    assert_eq!(
        "dir:/tmp/x".parse::<Source>(),
        Ok(Source::Dir("/tmp/x".into()))
    );
    assert!(
        "/tmp/x"
            .parse::<Source>()
            .unwrap_err()
            .contains("expected dir:PATH")
    );
}

const POLICY_YAML: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: shop, labels: {role: server}}
spec:
  containers:
  - name: c
    image: x
    ports: [{name: http, containerPort: 8080}, {name: dns, containerPort: 53, protocol: UDP}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: shop, labels: {role: client}}
spec: {containers: [{name: c, image: x}]}
status: {podIP: 10.1.0.9}
---
apiVersion: v1
kind: Pod
metadata: {name: legacy, namespace: shop, labels: {role: client}}
spec: {containers: [{name: c, image: x}]}
status: {podIP: 10.1.0.7}
---
apiVersion: v1
kind: Pod
metadata: {name: ghost, namespace: shop, labels: {role: client}}
spec: {containers: [{name: c, image: x}]}
status: {podIP: 10.1.0.4}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {role: server}}
  ingress:
  - from: [{podSelector: {matchLabels: {role: client}}}]
    ports: [{port: http}, {port: dns, protocol: UDP}, {port: metrics}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad-name, namespace: shop}
spec:
  podSelector: {}
  ingress: [{ports: [{port: "HTTP_1"}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad-range, namespace: shop}
spec:
  podSelector: {}
  ingress: [{ports: [{port: http, endPort: 90}]}]
"#;

#[test]
fn pods_are_placed_by_the_names_their_ports_record_and_named_ports_resolve_on_them() {
    let (objects, warnings) = objects(POLICY_YAML);
    assert!(warnings.is_empty(), "{warnings:?}");
    let named = |name: &str| {
        Some(PodName {
            namespace: "shop".into(),
            name: name.into(),
        })
    };
    let ip = |last| Ipv4Addr::new(10, 1, 0, last);
    // server: no podIP yet; client: its podIP is stale; legacy: its port
    // names no pod; ghost: its podIP is held by a port naming another pod
    let owners = [
        (named("server"), ip(2)),
        (named("client"), ip(3)),
        (named("other"), ip(4)),
        (None, ip(7)),
    ];
    let derived = derive_at(&objects, &owners);
    let texts: Vec<String> = derived.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        vec![
            "networkpolicy shop/bad-name: spec.ingress[0].ports[0].port \"HTTP_1\" is neither a port number nor a port name".to_string(),
            "networkpolicy shop/bad-range: spec.ingress[0].ports[0].endPort 90 needs a numeric port, not the name \"http\"".to_string(),
        ]
    );
    assert!(
        derived
            .warnings
            .iter()
            .all(|w| w.reason == "InvalidNetworkPolicy")
    );
    assert_eq!(
        derived.acls.keys().copied().collect::<Vec<_>>(),
        vec![ip(2)],
        "the server, placed by its name though it has no podIP"
    );
    let acls = &derived.acls;
    assert!(acl_allows(acls, ip(3), ip(2), Protocol::Tcp, 8080), "http");
    assert!(acl_allows(acls, ip(3), ip(2), Protocol::Udp, 53), "dns");
    assert!(
        !acl_allows(acls, ip(3), ip(2), Protocol::Tcp, 53),
        "dns is UDP"
    );
    assert!(!acl_allows(acls, ip(3), ip(2), Protocol::Tcp, 9090));
    assert!(
        !acl_allows(acls, ip(9), ip(2), Protocol::Tcp, 8080),
        "the client's stale podIP is not the client"
    );
    assert!(
        acl_allows(acls, ip(7), ip(2), Protocol::Tcp, 8080),
        "a port naming no pod: the Pod whose podIP it is"
    );
    assert!(
        !acl_allows(acls, ip(4), ip(2), Protocol::Tcp, 8080),
        "a podIP a port names another pod for is not the Pod's"
    );
    // by podIP alone the server has no address: nothing to police
    assert!(derive(&objects).acls.is_empty());
}

/// A policy admitting only an IPv6 block isolates its pods: no IPv4 peer is
/// in the block (skipping the policy, as the agent once did, left them open).
#[test]
fn an_ipv6_ip_block_is_read_and_its_policy_isolates_the_pod_on_ipv4() {
    let yaml = r#"
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: shop, labels: {role: server}}
spec: {containers: [{name: c, image: x}]}
status: {podIP: 10.1.0.2}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: v6-only, namespace: shop}
spec:
  podSelector: {matchLabels: {role: server}}
  ingress: [{from: [{ipBlock: {cidr: "fd00::/64", except: ["fd00::/96"]}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: mixed, namespace: shop}
spec:
  podSelector: {matchLabels: {role: server}}
  egress: [{to: [{ipBlock: {cidr: "fd00::/64", except: ["10.0.0.0/8"]}}]}]
"#;
    let (objects, warnings) = objects(yaml);
    assert!(warnings.is_empty(), "{warnings:?}");
    let derived = derive(&objects);
    assert_eq!(
        derived
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec![
            "networkpolicy shop/mixed: spec.egress[0] peer 0.ipBlock.except[0] \"10.0.0.0/8\" is not of the family of spec.egress[0] peer 0.ipBlock.cidr \"fd00::/64\"".to_string()
        ]
    );
    let server = Ipv4Addr::new(10, 1, 0, 2);
    let acl = &derived.acls[&server];
    assert_eq!(acl.ingress, Some(vec![]), "isolated, no IPv4 peer allowed");
    assert_eq!(acl.egress, None, "the unreadable policy is skipped");
    assert!(!acl_allows(
        &derived.acls,
        Ipv4Addr::new(10, 1, 0, 9),
        server,
        Protocol::Tcp,
        80
    ));
}

#[test]
fn an_event_note_is_cut_to_the_servers_byte_limit_at_a_character_boundary() {
    let warning = |text: String| super::Warning {
        reason: "InvalidService",
        regarding: super::Reference::default(),
        text,
    };
    assert_eq!(
        super::kube::event_note(&warning("service a/b: bad".into())),
        "service a/b: bad; skipped"
    );
    // 'é' is two bytes: 1023 ASCII bytes then 'é' would be 1025
    let note = super::kube::event_note(&warning(format!("{}é and more", "x".repeat(1023))));
    assert_eq!(note.len(), 1023, "cut before the character that crosses");
    assert!(note.bytes().all(|b| b == b'x'));
    let long = super::kube::event_note(&warning("é".repeat(600)));
    assert_eq!(long.len(), 1024);
    assert_eq!(long.chars().count(), 512);
}

const DUAL: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: dual, namespace: shop}
spec:
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20, "fd00:96::20"]
  ipFamilies: [IPv4, IPv6]
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: six, namespace: shop}
spec:
  clusterIP: "fd00:96::21"
  ipFamilies: [IPv6]
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dual-v4, namespace: shop, labels: {kubernetes.io/service-name: dual}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.1.0.2]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dual-v6, namespace: shop, labels: {kubernetes.io/service-name: dual}}
addressType: IPv6
ports: [{port: 8080}]
endpoints: [{addresses: ["fd00:1::2"]}, {addresses: ["fd00:1::3"], conditions: {ready: false}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: six-v6, namespace: shop, labels: {kubernetes.io/service-name: six}}
addressType: IPv6
ports: [{port: 8080}]
endpoints: [{addresses: ["fd00:1::4"]}]
---
apiVersion: v1
kind: Service
metadata: {name: single, namespace: shop}
spec:
  clusterIPs: [10.96.0.22, "fd00:96::22"]
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: required, namespace: shop}
spec:
  clusterIPs: ["fd00:96::23"]
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: mislabelled, namespace: shop}
spec:
  clusterIPs: ["fd00:96::24"]
  ipFamilies: [IPv4]
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: twice, namespace: shop}
spec:
  clusterIPs: ["fd00:96::25", "fd00:96::26"]
  ipFamilyPolicy: PreferDualStack
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: bad-v6, namespace: shop, labels: {kubernetes.io/service-name: six}}
addressType: IPv6
ports: [{port: 8080}]
endpoints: [{addresses: ["10.1.0.9"]}]
"#;

/// A dual-stack Service is balanced in both families, each over its own
/// EndpointSlices; an IPv6 single-stack one in IPv6 alone; ClusterIPs that
/// contradict `ipFamilies` or `ipFamilyPolicy` are named and skipped.
#[test]
fn dual_stack_services_balance_each_family_over_its_own_slices() {
    let (objects, warnings) = objects(DUAL);
    assert!(warnings.is_empty(), "{warnings:?}");
    let derived = derive(&objects);
    let texts: Vec<String> = derived.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "endpointslice shop/bad-v6: endpoints[0].addresses[0] \"10.1.0.9\" is not an IPv6 address",
            "service shop/mislabelled: spec.clusterIPs[0] fd00:96::24 is IPv6 but spec.ipFamilies[0] says IPv4",
            "service shop/required: spec.ipFamilyPolicy is RequireDualStack but spec.clusterIPs holds one address",
            "service shop/single: spec.ipFamilyPolicy is SingleStack but spec.clusterIPs holds 2 addresses",
            "service shop/twice: spec.clusterIPs holds two IPv6 addresses (at most one per family)",
        ]
    );
    let v4: Vec<(String, Ipv4Addr, Vec<Ipv4Addr>)> = derived
        .load_balancers
        .iter()
        .map(|(k, lb)| {
            let backends = lb.backends.iter().map(|b| b.address).collect();
            (k.service.clone(), lb.vip, backends)
        })
        .collect();
    assert_eq!(
        v4,
        [(
            "dual".to_string(),
            Ipv4Addr::new(10, 96, 0, 20),
            vec![Ipv4Addr::new(10, 1, 0, 2)]
        )]
    );
    let v6: Vec<(String, String, Vec<String>)> = derived
        .load_balancers6
        .iter()
        .map(|(k, lb)| {
            let backends = lb.backends.iter().map(|b| b.address.to_string()).collect();
            (k.service.clone(), lb.vip.to_string(), backends)
        })
        .collect();
    assert_eq!(
        v6,
        [
            (
                "dual".to_string(),
                "fd00:96::20".to_string(),
                vec!["fd00:1::2".to_string()]
            ),
            (
                "six".to_string(),
                "fd00:96::21".to_string(),
                vec!["fd00:1::4".to_string()]
            ),
        ],
        "the not-ready endpoint is no backend; the slice with a bad address is skipped"
    );
}
