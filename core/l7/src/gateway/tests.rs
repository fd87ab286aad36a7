//! Unit tests of the Gateway API model: reading errors, attachment edge cases, status writes,
//! and what each driver serves.

use std::collections::BTreeMap;

use nephrite_krm::{Object, Package};

use super::capabilities::{Driver, DriverCapabilities, Feature, Served, explain};
use super::evaluate::{Decision, HttpRequest};
use super::status::{GatewayAddress, decide};
use super::{GatewayError, ObjectKey, Settings, build};

const BASE: &str = "
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: kuryr}
spec: {controllerName: kuryr.nephrite.io/l7}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: infra, generation: 3}
spec:
  gatewayClassName: kuryr
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: infra}
spec: {ports: [{name: http, port: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: infra, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
ports: [{name: http, port: 8080}]
";

fn objects(extra: &str) -> Vec<Object> {
    Package::from_yaml(&format!("{BASE}---\n{extra}"))
        .expect("test YAML")
        .into_objects()
}

fn request(path: &str) -> HttpRequest {
    HttpRequest {
        port: 80,
        method: "GET".into(),
        host: "example.com".into(),
        target: path.into(),
        headers: Vec::new(),
    }
}

#[test]
fn a_field_of_the_wrong_shape_is_an_error_naming_object_and_field() {
    let model = build(
        &objects(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad, namespace: infra}
spec:
  parentRefs: [{name: web, port: not-a-port}]
",
        ),
        &Settings::default(),
    );
    let GatewayError::Invalid { object, field, .. } = &model.errors[0];
    assert_eq!(object, "HTTPRoute infra/bad");
    assert_eq!(field, "spec.parentRefs[0]");
    assert!(model.routes.is_empty());
}

#[test]
fn an_unreadable_rule_is_refused_and_the_other_rules_served() {
    let model = build(
        &objects(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: half, namespace: infra}
spec:
  parentRefs: [{name: web}]
  rules:
  - matches: {not: a-list}
  - backendRefs: [{name: echo, port: 8080}]
",
        ),
        &Settings::default(),
    );
    let parent = &model.routes[0].parents[0];
    assert!(parent.accepted.holds);
    let partly = parent.partially_invalid.as_ref().expect("PartiallyInvalid");
    assert!(
        partly.message.contains("spec.rules[0]"),
        "{}",
        partly.message
    );
    let gateway = model
        .compiled_gateway(&ObjectKey::new("infra", "web"))
        .expect("compiled");
    assert!(matches!(
        gateway.route(&request("/x"), 0),
        Decision::Forward(_)
    ));
}

#[test]
fn gateways_of_another_controller_are_left_alone() {
    let model = build(
        &objects(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: theirs, namespace: infra}
spec:
  gatewayClassName: other
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-theirs, namespace: infra}
spec:
  parentRefs: [{name: theirs}]
",
        ),
        &Settings::default(),
    );
    assert_eq!(model.classes.len(), 1);
    assert_eq!(model.gateways.len(), 1);
    assert!(model.routes.is_empty(), "{:?}", model.routes);
}

#[test]
fn listeners_sharing_a_port_and_hostname_conflict_and_are_not_programmed() {
    let model = build(
        &objects(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: clash, namespace: infra}
spec:
  gatewayClassName: kuryr
  listeners:
  - {name: a, port: 80, protocol: HTTP, hostname: a.example.com}
  - {name: b, port: 80, protocol: HTTP, hostname: a.example.com}
  - {name: c, port: 80, protocol: HTTP, hostname: c.example.com}
  - {name: d, port: 81, protocol: HTTP}
  - {name: e, port: 81, protocol: HTTPS, tls: {certificateRefs: [{name: x}]}}
",
        ),
        &Settings::default(),
    );
    let clash = model
        .gateways
        .iter()
        .find(|g| g.gateway.name == "clash")
        .expect("clash");
    let reasons: Vec<(&str, bool, &str)> = clash
        .listeners
        .iter()
        .map(|l| (l.conflicted.reason, l.programmed.holds, l.name.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("HostnameConflict", false, "a"),
            ("HostnameConflict", false, "b"),
            ("NoConflicts", true, "c"),
            ("ProtocolConflict", false, "d"),
            ("ProtocolConflict", false, "e"),
        ]
    );
    assert_eq!(clash.accepted.reason, "ListenersNotValid");
    assert!(clash.accepted.holds);
}

#[test]
fn status_is_written_once_keeps_other_controllers_and_carries_the_generation() {
    let route = "
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: infra, generation: 7}
spec:
  parentRefs: [{name: web}, {name: elsewhere, namespace: other}]
  rules: [{backendRefs: [{name: echo, port: 8080}]}]
status:
  parents:
  - parentRef: {name: elsewhere, namespace: other}
    controllerName: example.com/other
    conditions: [{type: Accepted, status: 'True', reason: Accepted, lastTransitionTime: '2020-01-01T00:00:00Z'}]
";
    let mut objects = objects(route);
    let settings = Settings::default();
    let model = build(&objects, &settings);
    let addresses = BTreeMap::from([(
        ObjectKey::new("infra", "web"),
        vec![GatewayAddress::new("192.0.2.1")],
    )]);
    let updates = decide(&objects, &model, &settings, &addresses, "t1");
    let kinds: Vec<&str> = updates.iter().map(|u| u.kind.as_str()).collect();
    assert_eq!(kinds, ["GatewayClass", "Gateway", "HTTPRoute"]);
    let route_status = &updates[2].status;
    let parents = route_status["parents"].as_array().expect("parents");
    assert_eq!(parents.len(), 2);
    assert_eq!(parents[0]["controllerName"], "example.com/other");
    assert_eq!(parents[1]["controllerName"], "kuryr.nephrite.io/l7");
    assert_eq!(parents[1]["conditions"][0]["observedGeneration"], 7);
    let gateway_status = &updates[1].status;
    assert_eq!(gateway_status["addresses"][0]["type"], "IPAddress");
    assert_eq!(gateway_status["conditions"][1]["observedGeneration"], 3);

    // Written back, nothing is decided again, even later.
    for update in &updates {
        let object = objects
            .iter_mut()
            .find(|o| o.kind == update.kind && o.name() == Some(update.name.as_str()))
            .expect("object");
        *object.status_mut().expect("status") = update.status.as_object().cloned().expect("map");
    }
    assert_eq!(decide(&objects, &model, &settings, &addresses, "t2"), []);

    // Without an address the Gateway is not programmed.
    let none = decide(&objects, &model, &settings, &BTreeMap::new(), "t3");
    assert_eq!(none.len(), 1);
    let programmed = &none[0].status["conditions"][1];
    assert_eq!(programmed["reason"], "AddressNotAssigned");
    assert_eq!(programmed["lastTransitionTime"], "t3");
}

#[test]
fn octavia_explains_which_rules_it_cannot_serve_naming_the_field() {
    let model = build(
        &objects(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: infra}
spec:
  parentRefs: [{name: web}]
  hostnames: [example.com]
  rules:
  - matches: [{path: {type: Exact, value: /plain}, headers: [{name: v, value: '1'}]}]
    backendRefs: [{name: echo, port: 8080}]
  - matches: [{path: {value: /q}, queryParams: [{name: a, value: b}]}]
    backendRefs: [{name: echo, port: 8080}]
  - matches: [{path: {value: /h}}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x, value: y}]}}]
    backendRefs: [{name: echo, port: 8080}]
",
        ),
        &Settings::default(),
    );
    let listener = &model.compiled[0].listeners[0];
    let octavia = explain(listener, &DriverCapabilities::of(Driver::Octavia));
    let served: Vec<(usize, Served)> = octavia.iter().map(|r| (r.rule, r.served)).collect();
    assert_eq!(
        served,
        [(0, Served::Fully), (1, Served::Not), (2, Served::Partly)]
    );
    assert_eq!(
        octavia[1].gaps[0].field,
        "spec.rules[1].matches[0].queryParams (a)"
    );
    assert_eq!(octavia[1].gaps[0].feature, Feature::QueryParamExact);
    assert_eq!(octavia[2].gaps[0].feature, Feature::RequestHeaderModifier);
    let router = explain(listener, &DriverCapabilities::of(Driver::Router));
    assert!(
        router
            .iter()
            .all(|r| r.served == Served::Fully && r.gaps.is_empty())
    );
}

#[test]
fn a_redirect_keeping_the_request_host_of_a_wildcard_rule_is_beyond_octavia() {
    let model = build(
        &objects(
            "
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: infra}
spec:
  parentRefs: [{name: web}]
  hostnames: ['*.example.com']
  rules:
  - filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]
",
        ),
        &Settings::default(),
    );
    let listener = &model.compiled[0].listeners[0];
    let octavia = explain(listener, &DriverCapabilities::of(Driver::Octavia));
    assert_eq!(octavia[0].served, Served::Not);
    assert_eq!(octavia[0].gaps[0].feature, Feature::RedirectRequestHost);
    let haproxy = explain(listener, &DriverCapabilities::of(Driver::Haproxy));
    assert_eq!(haproxy[0].served, Served::Fully);
}
