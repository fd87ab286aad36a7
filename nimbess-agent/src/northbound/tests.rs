use std::net::Ipv4Addr;

use nephrite_pipeline::{Affinity, Backend, Protocol};

use super::resources::parse_into;
use super::{Objects, Source, derive};

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
            "service shop/broken: spec.clusterIP \"10.96.0.300\" is not an IPv4 address"
                .to_string()
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
