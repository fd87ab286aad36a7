//! The lowering: what the L7 model serves of HTTPRoutes, and what it reports instead of
//! serving differently.

use nephrite_krm::Package;

use super::SERVED_CONDITION;
use crate::gateway::ObjectKey;
use crate::gateway::capabilities::Driver;
use crate::gateway::status::decide;
use crate::{Options, Outcome, RouteTable, SourceObject, eval, translate};

const OBJECTS: &str = "
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: kuryr}
spec: {controllerName: kuryr.nephrite.io/l7}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: shop}
spec:
  gatewayClassName: kuryr
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: blue, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: blue-1, namespace: shop, labels: {kubernetes.io/service-name: blue}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: green, namespace: shop}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: green-1, namespace: shop, labels: {kubernetes.io/service-name: green}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.2]}, {addresses: [10.0.0.3]}]
ports: [{name: http, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: shop, creationTimestamp: '2026-01-01T00:00:00Z'}
spec:
  parentRefs: [{name: web}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cart}, headers: [{name: x-canary, value: 'yes'}]}]
    backendRefs: [{name: green, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    backendRefs: [{name: blue, port: 80, weight: 3}, {name: green, port: 80, weight: 1}]
  - matches: [{path: {type: Exact, value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
  - matches: [{path: {type: PathPrefix, value: /api}, method: POST}]
    backendRefs: [{name: blue, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /static}}]
    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-cache, value: hit}]}}]
    backendRefs: [{name: blue, port: 80}]
";

fn translation() -> crate::Translation {
    let objects: Vec<SourceObject> = Package::from_yaml(OBJECTS)
        .expect("test YAML")
        .into_objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: "test".into(),
        })
        .collect();
    translate(&objects, &Options::default())
}

fn lookup(table: &RouteTable, path: &str, headers: &Vec<(String, String)>) -> String {
    let request = eval::Request {
        host: "shop.example.com",
        path,
        target: path,
        headers,
        client_cert: None,
    };
    match table.http.lookup(&request) {
        Outcome::Pool(pool) => pool.to_owned(),
        Outcome::Redirect { code, location } => format!("{code} {location}"),
        Outcome::Status(status) => status.to_string(),
        Outcome::Reject => "403".into(),
    }
}

#[test]
fn routes_are_served_by_host_path_header_and_redirect_in_precedence_order() {
    let t = translation();
    assert!(t.ignored.is_empty(), "{:?}", t.ignored);
    let table = RouteTable::compile(&t.config);
    let canary = vec![("X-Canary".to_owned(), "yes".to_owned())];
    assert_eq!(lookup(&table, "/cart/1", &canary), "gateway:shop/shop/0");
    assert_eq!(
        lookup(&table, "/cart/1", &Vec::new()),
        "gateway:shop/shop/1"
    );
    assert_eq!(lookup(&table, "/cartoon", &Vec::new()), "404");
    assert_eq!(
        lookup(&table, "/old", &Vec::new()),
        "301 https://shop.example.com/old"
    );
    assert_eq!(
        lookup(&table, "/static/a.css", &Vec::new()),
        "gateway:shop/shop/4"
    );
}

#[test]
fn weights_are_member_weights_giving_each_service_its_share() {
    let t = translation();
    let pool = &t.config.pools["gateway:shop/shop/1"];
    let weight = |address: &str| {
        pool.members
            .iter()
            .find(|m| m.address.to_string() == address)
            .map(|m| m.weight)
            .expect("member")
    };
    let blue = weight("10.0.0.1:8080");
    let green = weight("10.0.0.2:8080") + weight("10.0.0.3:8080");
    assert_eq!(blue, 3 * green, "{:?}", pool.members);
}

fn translation_for(driver: Driver) -> crate::Translation {
    let objects: Vec<SourceObject> = Package::from_yaml(OBJECTS)
        .expect("test YAML")
        .into_objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: "test".into(),
        })
        .collect();
    let mut options = Options::default();
    options.gateway.driver = driver;
    translate(&objects, &options)
}

#[test]
fn the_model_carries_method_matches_and_filters_so_the_router_serves_every_rule() {
    let t = translation();
    assert!(
        t.rejections.is_empty() && t.warnings.is_empty(),
        "{:?} {:?}",
        t.rejections,
        t.warnings
    );
    let table = RouteTable::compile(&t.config);
    // A header list alone carries no method: the POST-only rule does not match it.
    assert_eq!(lookup(&table, "/api/x", &Vec::new()), "404");
    let headers: Vec<(String, String)> = Vec::new();
    let post = eval::WithMethod {
        method: "POST",
        headers: &headers,
    };
    let request = eval::Request {
        host: "shop.example.com",
        path: "/api/x",
        target: "/api/x",
        headers: &post,
        client_cert: None,
    };
    assert_eq!(
        table.http.lookup(&request),
        Outcome::Pool("gateway:shop/shop/3")
    );
    let get = eval::WithMethod {
        method: "GET",
        headers: &headers,
    };
    let request = eval::Request {
        headers: &get,
        ..request
    };
    assert_eq!(table.http.lookup(&request), Outcome::Status(404));
    let request = eval::Request {
        path: "/static/a.css",
        target: "/static/a.css",
        ..request
    };
    let (outcome, filters) = table.http.lookup_with_filters(&request);
    assert_eq!(outcome, Outcome::Pool("gateway:shop/shop/4"));
    assert_eq!(
        filters.response_headers.set,
        [("x-cache".to_owned(), "hit".to_owned())]
    );
    let route = t
        .gateway
        .routes
        .iter()
        .find(|r| r.route == ObjectKey::new("shop", "shop"))
        .expect("route");
    assert_eq!(route.parents[0].served, None);
}

#[test]
fn what_the_controllers_driver_cannot_say_is_reported_with_its_field_never_served_differently() {
    let t = translation_for(Driver::Octavia);
    let table = RouteTable::compile(&t.config);
    // The POST-only rule is left out on Octavia: nothing may reach it for another method.
    assert!(
        t.config
            .http
            .policies()
            .iter()
            .all(|p| !p.name.contains(":shop/shop/3/"))
    );
    assert_eq!(lookup(&table, "/api/x", &Vec::new()), "404");
    let rejection = t
        .rejections
        .iter()
        .find(|r| r.object == "HTTPRoute shop/shop")
        .expect("the method rule is reported");
    assert!(
        rejection.reason.contains("spec.rules[3].matches[0].method"),
        "{rejection:?}"
    );
    let warning = t
        .warnings
        .iter()
        .find(|w| w.object == "HTTPRoute shop/shop" && w.message.contains("Response"))
        .expect("the header change is reported");
    assert!(
        warning.message.contains("ResponseHeaderModifier"),
        "{warning:?}"
    );
    let route = t
        .gateway
        .routes
        .iter()
        .find(|r| r.route == ObjectKey::new("shop", "shop"))
        .expect("route");
    let served = route.parents[0].served.as_ref().expect("Served condition");
    assert!(!served.holds);
    assert_eq!(served.reason, "RuleNotServed");
    assert!(served.message.contains("spec.rules[3].matches[0].method"));
    assert!(
        served
            .message
            .contains("spec.rules[4].filters (ResponseHeaderModifier)")
    );
    // And the Octavia tree says the same of the model's policy, field by field.
    let unexpressed = crate::octavia::unexpressed_in(&translation().config);
    assert!(
        unexpressed
            .iter()
            .any(|u| u.refused && u.field.contains("METHOD") && u.policy.contains(":shop/shop/3/")),
        "{unexpressed:?}"
    );
    assert!(
        unexpressed
            .iter()
            .any(|u| !u.refused && u.field == "filters.response_headers"),
        "{unexpressed:?}"
    );
}

#[test]
fn the_served_condition_is_written_in_the_route_status() {
    let t = translation_for(Driver::Octavia);
    let objects: Vec<_> = Package::from_yaml(OBJECTS)
        .expect("test YAML")
        .into_objects();
    let updates = decide(
        &objects,
        &t.gateway,
        &crate::gateway::Settings::default(),
        &Default::default(),
        "2026-01-01T00:00:00Z",
    );
    let route = updates
        .iter()
        .find(|u| u.kind == "HTTPRoute")
        .expect("route status");
    let conditions = route.status["parents"][0]["conditions"]
        .as_array()
        .expect("conditions");
    let served = conditions
        .iter()
        .find(|c| c["type"] == SERVED_CONDITION)
        .expect("Served");
    assert_eq!(served["status"], "False");
    assert_eq!(served["reason"], "RuleNotServed");
}

#[test]
fn octavia_is_given_what_its_l7_model_expresses_and_nothing_of_a_rule_it_cannot() {
    let t = translation();
    let desired = crate::octavia::Desired::from_config(&t.config);
    let listener = &desired.listeners[0];
    let names: Vec<&str> = listener.policies.iter().map(|p| p.name.as_str()).collect();
    // Rules 0, 1, 2 and 4 (served; 4 without its header change), in precedence order; rule 3
    // (a method match Octavia cannot say) has no policy.
    assert!(
        names.iter().all(|n| !n.contains(":shop/shop/3/")),
        "{names:?}"
    );
    for rule in [0, 1, 2, 4] {
        assert!(
            names
                .iter()
                .any(|n| n.contains(&format!(":shop/shop/{rule}/"))),
            "rule {rule}: {names:?}"
        );
    }
    let pool = desired
        .pools
        .iter()
        .find(|p| p.name == "gateway:shop/shop/1")
        .expect("the weighted rule's pool");
    assert_eq!(pool.members.len(), 3, "{:?}", pool.members);
    // What Octavia serves only partly or not is said per field by its own capabilities.
    let octavia = crate::gateway::capabilities::DriverCapabilities::through_rules(
        crate::gateway::capabilities::Driver::Octavia,
    );
    let listener = &t.gateway.compiled[0].listeners[0];
    let support = crate::gateway::capabilities::explain(listener, &octavia);
    let by_rule = |rule: usize| support.iter().find(|s| s.rule == rule).expect("rule");
    assert_eq!(by_rule(3).served, crate::gateway::capabilities::Served::Not);
    assert_eq!(
        by_rule(1).served,
        crate::gateway::capabilities::Served::Partly,
        "member weights 0–256"
    );
}
