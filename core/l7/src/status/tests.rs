use crate::{Options, SourceObject, translate};
use nephrite_krm::Package;

use super::*;

const OBJECTS: &str = "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bad, namespace: shop}
spec:
  rules:
  - http:
      paths:
      - {path: nope, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
---
apiVersion: route.openshift.io/v1
kind: Route
metadata: {name: early, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}
spec: {host: cart.example.com, path: /api, to: {kind: Service, name: web}}
---
apiVersion: route.openshift.io/v1
kind: Route
metadata: {name: late, namespace: shop, creationTimestamp: '2025-01-01T00:00:00Z'}
spec: {host: cart.example.com, path: /api, to: {kind: Service, name: web}}
";

fn objects() -> Vec<Object> {
    Package::from_yaml(OBJECTS).unwrap().into_objects()
}

fn settings() -> StatusSettings {
    StatusSettings {
        addresses: vec!["192.0.2.10".into(), "lb.example.com".into()],
        router_name: "kuryr-l7".into(),
        canonical_hostname: None,
    }
}

fn translation_of(objects: &[Object]) -> crate::Translation {
    let sources: Vec<SourceObject> = objects
        .iter()
        .map(|o| SourceObject {
            object: o.clone(),
            origin: "kube".into(),
        })
        .collect();
    translate(&sources, &Options::default())
}

fn decide_for(objects: &[Object]) -> Decisions {
    decide(
        objects,
        &translation_of(objects),
        &settings(),
        "2026-01-01T00:00:00Z",
    )
}

fn status_of<'a>(decisions: &'a Decisions, name: &str) -> &'a Value {
    &decisions
        .statuses
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no status for {name}: {decisions:?}"))
        .status
}

#[test]
fn served_objects_get_the_router_address_and_admitted_refused_ones_say_why() {
    let decisions = decide_for(&objects());
    assert_eq!(
        status_of(&decisions, "web")["loadBalancer"]["ingress"],
        json!([{"ip": "192.0.2.10"}, {"hostname": "lb.example.com"}])
    );
    assert_eq!(status_of(&decisions, "bad")["loadBalancer"], json!({}));
    let early = &status_of(&decisions, "early")["ingress"][0];
    assert_eq!(early["routerName"], "kuryr-l7");
    assert_eq!(early["host"], "cart.example.com");
    assert_eq!(early["conditions"][0]["status"], "True");
    let late = &status_of(&decisions, "late")["ingress"][0]["conditions"][0];
    assert_eq!(late["status"], "False");
    assert_eq!(late["reason"], "HostAlreadyClaimed");
    assert!(
        late["message"]
            .as_str()
            .unwrap()
            .contains("Route shop/early"),
        "{late}"
    );
}

#[test]
fn a_canonical_hostname_goes_into_our_route_entry_only_when_set() {
    let objects = objects();
    let without = decide_for(&objects);
    let early = &status_of(&without, "early")["ingress"][0];
    assert!(early.get("routerCanonicalHostname").is_none(), "{early}");
    let with = StatusSettings {
        canonical_hostname: Some("172.24.4.14".into()),
        ..settings()
    };
    let decisions = decide(
        &objects,
        &translation_of(&objects),
        &with,
        "2026-01-01T00:00:00Z",
    );
    let early = &status_of(&decisions, "early")["ingress"][0];
    assert_eq!(early["routerCanonicalHostname"], "172.24.4.14");
    assert_eq!(early["routerName"], "kuryr-l7");
}

#[test]
fn refused_objects_get_a_warning_event_naming_the_reason_or_the_winner() {
    let decisions = decide_for(&objects());
    let events: Vec<(&str, &str, &str)> = decisions
        .events
        .iter()
        .filter(|e| e.reason != "BackendWarning")
        .map(|e| (e.name.as_str(), e.reason.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!((events[0].0, events[0].1), ("bad", "Rejected"));
    assert!(events[0].2.contains("nope"), "{events:?}");
    assert_eq!((events[1].0, events[1].1), ("late", "Conflict"));
    assert!(
        events[1].2.contains("served by Route shop/early"),
        "{events:?}"
    );
}

#[test]
fn written_statuses_are_not_written_again_and_keep_their_transition_time() {
    let mut objects = objects();
    let first = decide_for(&objects);
    for update in &first.statuses {
        let object = objects
            .iter_mut()
            .find(|o| o.name() == Some(update.name.as_str()))
            .unwrap();
        object.body.insert("status", update.status.clone()).unwrap();
    }
    let again = decide(
        &objects,
        &translation_of(&objects),
        &settings(),
        "2027-01-01T00:00:00Z",
    );
    assert!(again.statuses.is_empty(), "{:?}", again.statuses);
}

#[test]
fn another_routers_route_status_is_kept_and_ingresses_of_another_class_are_left_alone() {
    let mut objects = objects();
    let route = objects
        .iter_mut()
        .find(|o| o.name() == Some("early"))
        .unwrap();
    route
        .body
        .insert(
            "status",
            json!({"ingress": [{"host": "cart.example.com", "routerName": "default"}]}),
        )
        .unwrap();
    let mut other = Package::from_yaml(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: theirs, namespace: shop}\nspec:\n  ingressClassName: nginx\n  defaultBackend: {service: {name: web, port: {number: 80}}}\n",
    )
    .unwrap()
    .into_objects();
    objects.append(&mut other);
    let decisions = decide_for(&objects);
    let routers: Vec<&str> = status_of(&decisions, "early")["ingress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["routerName"].as_str().unwrap())
        .collect();
    assert_eq!(routers, ["default", "kuryr-l7"]);
    assert!(decisions.statuses.iter().all(|s| s.name != "theirs"));
}

proptest::proptest! {
    /// Whatever the objects, writing what `decide` says and deciding again writes nothing:
    /// a status write coming back as a watch event never causes another write.
    #[test]
    fn decisions_are_idempotent(mask in 0u8..16, later in 0u32..1000) {
        let mut objects: Vec<Object> = objects()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, o)| o)
            .collect();
        for update in decide_for(&objects).statuses {
            let object = objects
                .iter_mut()
                .find(|o| o.name() == Some(update.name.as_str()))
                .unwrap();
            object.body.insert("status", update.status).unwrap();
        }
        let again = decide(
            &objects,
            &translation_of(&objects),
            &settings(),
            &format!("2030-01-01T00:00:{:02}Z", later % 60),
        );
        proptest::prop_assert!(again.statuses.is_empty(), "{:?}", again.statuses);
    }
}
