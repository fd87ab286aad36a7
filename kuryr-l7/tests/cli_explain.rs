//! `kuryr-l7 rules --source dir:… [--explain]` on Gateway API objects: the policies HTTPRoutes
//! become (with their METHOD and QUERY_PARAM rules and filters), and per rule which drivers
//! serve it fully, partly or not, naming the field.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

const OBJECTS: &str = "\
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
metadata: {name: cart, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cart, namespace: shop}
spec:
  parentRefs: [{name: web}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    backendRefs: [{name: cart, port: 80}]
  - matches: [{path: {type: RegularExpression, value: '/item/[0-9]+'}}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: x-from, value: gw}]}}]
    backendRefs: [{name: cart, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /api}, method: POST, queryParams: [{name: v, value: '2'}]}]
    backendRefs: [{name: cart, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /copy}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: cart, port: 80}}}]
    backendRefs: [{name: cart, port: 80}]
";

fn rules(dir: &std::path::Path, extra: &[&str]) -> String {
    let output = Command::new(BIN)
        .args(["rules", "--source"])
        .arg(format!("dir:{}", dir.display()))
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn rules_shows_the_policies_of_httproutes_with_their_method_query_rules_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gateway.yaml"), OBJECTS).unwrap();
    let text = rules(dir.path(), &[]);
    assert!(text.contains("LISTENER http: 4 policies"), "{text}");
    assert!(
        text.contains("gateway:shop/web/http:shop/cart/0/0/shop.example.com  REDIRECT_TO_POOL gateway:shop/cart/0"),
        "{text}"
    );
    assert!(text.contains("METHOD EQUAL_TO \"POST\""), "{text}");
    assert!(text.contains("QUERY_PARAM[v] EQUAL_TO \"2\""), "{text}");
    assert!(
        text.contains(r#"filters {"request_headers":{"add":[["x-from","gw"]]}}"#),
        "{text}"
    );
    assert!(
        text.contains(r#""pool":"gateway-mirror:shop/cart:80""#),
        "{text}"
    );
    // The embedded router (rules' default driver) serves all of it: nothing is reported.
    assert!(
        !text.contains("REJECTED") && !text.contains("WARNING"),
        "{text}"
    );
    assert!(!text.contains("IGNORED"), "{text}");
}

#[test]
fn explain_says_per_rule_which_drivers_serve_it_and_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gateway.yaml"), OBJECTS).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&rules(dir.path(), &["--explain", "-o", "json"])).unwrap();
    let rules = json.as_array().unwrap();
    assert_eq!(rules.len(), 4, "{json:#}");
    let rule = |i: u64| rules.iter().find(|r| r["rule"] == i).unwrap();
    let served = |i: u64, driver: &str| rule(i)["drivers"][driver]["served"].clone();
    // A prefix match: everyone, as written.
    for driver in ["router", "haproxy", "octavia"] {
        assert_eq!(served(0, driver), "fully", "{driver}");
    }
    // A regex with a header change: the router and HAProxy serve it fully; Octavia without the
    // change, and its PCRE said.
    assert_eq!(served(1, "router"), "fully");
    assert_eq!(served(1, "haproxy"), "fully");
    assert_eq!(served(1, "octavia"), "partly");
    let octavia_gaps = rule(1)["drivers"]["octavia"]["gaps"].to_string();
    assert!(
        octavia_gaps.contains("spec.rules[1].matches[0].path"),
        "{octavia_gaps}"
    );
    assert!(
        octavia_gaps.contains("RequestHeaderModifier"),
        "{octavia_gaps}"
    );
    // Method and query matches: the router and HAProxy fully; Octavia not, naming the fields.
    assert_eq!(served(2, "router"), "fully");
    assert_eq!(served(2, "haproxy"), "fully");
    assert_eq!(served(2, "octavia"), "not");
    let gaps = rule(2)["drivers"]["octavia"]["gaps"].to_string();
    assert!(gaps.contains("spec.rules[2].matches[0].method"), "{gaps}");
    assert!(
        gaps.contains("spec.rules[2].matches[0].queryParams (v)"),
        "{gaps}"
    );
    // A mirror: the router fully; HAProxy (no SPOE agent) and Octavia serve it without.
    assert_eq!(served(3, "router"), "fully");
    assert_eq!(served(3, "haproxy"), "partly");
    let gaps = rule(3)["drivers"]["haproxy"]["gaps"].to_string();
    assert!(gaps.contains("RequestMirror"), "{gaps}");

    let table = self::rules(dir.path(), &["--explain"]);
    assert!(
        table.contains("HTTPRoute shop/cart spec.rules[2] on Gateway shop/web listener http"),
        "{table}"
    );
    assert!(table.contains("  octavia  not"), "{table}");
    assert!(table.contains("  router   fully"), "{table}");
}

#[test]
fn explain_needs_a_source() {
    let output = Command::new(BIN)
        .args(["rules", "--rules", "127.0.0.1:1", "--explain"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--source"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
