use nephrite_krm::Package;

use super::*;
use crate::eval::{Outcome, Request, normalize_host, normalize_path};
use crate::model::PoolProtocol;
use crate::table::RouteTable;

fn objects(yaml: &str) -> Vec<SourceObject> {
    Package::from_yaml(yaml)
        .unwrap()
        .into_objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: "test.yaml".into(),
        })
        .collect()
}

fn run(yaml: &str) -> Translation {
    translate(&objects(yaml), &Options::default())
}

/// Where a request goes over HTTP, checked against the reference evaluation too.
fn route(translation: &Translation, host: &str, target: &str) -> String {
    route_on(translation, false, host, target)
}

fn route_on(translation: &Translation, https: bool, host: &str, target: &str) -> String {
    let table = RouteTable::compile(&translation.config);
    let (compiled, listener) = if https {
        (&table.https, &translation.config.https)
    } else {
        (&table.http, &translation.config.http)
    };
    let host = normalize_host(host).unwrap_or_default();
    let path = normalize_path(target);
    let headers: Vec<(String, String)> = Vec::new();
    let request = Request {
        host: &host,
        path: &path,
        target,
        headers: &headers,
        client_cert: None,
    };
    let outcome = compiled.lookup(&request);
    assert_eq!(
        outcome,
        listener.evaluate(&request),
        "table and reference disagree on {host}{target}"
    );
    match outcome {
        Outcome::Pool(pool) => pool.to_owned(),
        Outcome::Reject => "403".into(),
        Outcome::Redirect { code, location } => format!("{code} {location}"),
        Outcome::Status(status) => status.to_string(),
    }
}

fn ingress(name: &str, body: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n{body}\n---\n"
    )
}

fn path(p: &str, path_type: &str, service: &str) -> String {
    format!(
        "      - {{path: {p}, pathType: {path_type}, backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}\n"
    )
}

fn rule(host: Option<&str>, paths: &[String]) -> String {
    let host = host
        .map(|h| format!("host: \"{h}\"\n    "))
        .unwrap_or_default();
    format!("  - {host}http:\n      paths:\n{}", paths.concat())
}

fn rules(rules: &[String]) -> String {
    format!("  rules:\n{}", rules.concat())
}

#[test]
fn prefix_matches_element_wise_and_ignores_a_trailing_slash() {
    let t = run(&ingress(
        "i",
        &rules(&[rule(None, &[path("/foo/", "Prefix", "foo")])]),
    ));
    assert!(t.rejections.is_empty(), "{:?}", t.rejections);
    for ok in ["/foo", "/foo/", "/foo/bar", "/foo?x=1"] {
        assert_eq!(route(&t, "h", ok), "ns/foo:80", "{ok}");
    }
    for no in ["/foobar", "/fo", "/", "/Foo"] {
        assert_eq!(route(&t, "h", no), "404", "{no}");
    }
}

#[test]
fn exact_matches_exactly_and_case_sensitively() {
    let t = run(&ingress(
        "i",
        &rules(&[rule(None, &[path("/foo", "Exact", "foo")])]),
    ));
    assert_eq!(route(&t, "h", "/foo"), "ns/foo:80");
    assert_eq!(route(&t, "h", "/foo?q"), "ns/foo:80");
    for no in ["/foo/", "/Foo", "/foo/bar"] {
        assert_eq!(route(&t, "h", no), "404", "{no}");
    }
}

#[test]
fn slash_prefix_matches_everything_and_implementation_specific_is_prefix() {
    let t = run(&ingress(
        "i",
        &rules(&[rule(
            None,
            &[
                path("/", "Prefix", "all"),
                path("/img", "ImplementationSpecific", "img"),
            ],
        )]),
    ));
    assert_eq!(route(&t, "h", "/anything/at/all"), "ns/all:80");
    assert_eq!(route(&t, "h", "/img/a.png"), "ns/img:80");
    assert_eq!(route(&t, "h", "/imgs"), "ns/all:80");
    let shown = &t
        .config
        .http
        .policies()
        .iter()
        .find(|p| p.origin.contains("/img"))
        .unwrap()
        .origin;
    assert!(
        shown.contains("ImplementationSpecific, as Prefix"),
        "{shown}"
    );
}

#[test]
fn longest_path_wins_and_exact_beats_prefix_at_equal_length() {
    let t = run(&ingress(
        "i",
        &rules(&[rule(
            None,
            &[
                path("/", "Prefix", "root"),
                path("/a", "Prefix", "a"),
                path("/a/b", "Prefix", "ab"),
                path("/a/b", "Exact", "ab-exact"),
            ],
        )]),
    ));
    assert_eq!(route(&t, "h", "/a/b"), "ns/ab-exact:80");
    assert_eq!(route(&t, "h", "/a/b/c"), "ns/ab:80");
    assert_eq!(route(&t, "h", "/a/c"), "ns/a:80");
    assert_eq!(route(&t, "h", "/b"), "ns/root:80");
}

#[test]
fn matching_uses_the_normalized_path() {
    let t = run(&ingress(
        "i",
        &rules(&[rule(
            None,
            &[
                path("/public", "Prefix", "public"),
                path("/admin", "Prefix", "admin"),
            ],
        )]),
    ));
    assert_eq!(route(&t, "h", "/public/../admin/x"), "ns/admin:80");
    assert_eq!(route(&t, "h", "/public/./x"), "ns/public:80");
    // %2F is not decoded: /public%2F.. is one segment, not /public/..
    assert_eq!(route(&t, "h", "/public%2F..%2Fadmin"), "404");
}

#[test]
fn hosts_exact_wildcard_one_label_any_and_case_insensitive_without_port() {
    let t = run(&ingress(
        "i",
        &rules(&[
            rule(Some("foo.example.com"), &[path("/", "Prefix", "exact")]),
            rule(Some("*.example.com"), &[path("/", "Prefix", "wild")]),
            rule(None, &[path("/", "Prefix", "any")]),
        ]),
    ));
    assert_eq!(route(&t, "FOO.Example.com:8080", "/"), "ns/exact:80");
    assert_eq!(route(&t, "bar.example.com", "/"), "ns/wild:80");
    assert_eq!(route(&t, "example.com", "/"), "ns/any:80");
    assert_eq!(route(&t, "a.b.example.com", "/"), "ns/any:80");
    assert_eq!(route(&t, "elsewhere.org", "/"), "ns/any:80");
}

#[test]
fn a_less_specific_host_applies_when_the_more_specific_one_has_no_matching_rule() {
    let t = run(&ingress(
        "i",
        &rules(&[
            rule(Some("foo.example.com"), &[path("/api", "Prefix", "api")]),
            rule(
                Some("*.example.com"),
                &[path("/static", "Prefix", "static")],
            ),
            rule(None, &[path("/", "Prefix", "any")]),
        ]),
    ));
    assert_eq!(route(&t, "foo.example.com", "/api"), "ns/api:80");
    assert_eq!(route(&t, "foo.example.com", "/static/x"), "ns/static:80");
    assert_eq!(route(&t, "foo.example.com", "/other"), "ns/any:80");
}

#[test]
fn default_backend_is_last_and_nothing_is_404() {
    let t = run(&ingress(
        "i",
        &format!(
            "  defaultBackend: {{service: {{name: fallback, port: {{number: 80}}}}}}\n{}",
            rules(&[rule(Some("a.com"), &[path("/x", "Exact", "x")])])
        ),
    ));
    assert_eq!(route(&t, "a.com", "/x"), "ns/x:80");
    assert_eq!(route(&t, "a.com", "/y"), "ns/fallback:80");
    let t = run(&ingress(
        "i",
        &rules(&[rule(Some("a.com"), &[path("/x", "Exact", "x")])]),
    ));
    assert_eq!(route(&t, "a.com", "/y"), "404");
}

#[test]
fn one_policy_per_host_path_backend_and_one_pool_per_service_port() {
    let t = run(&ingress(
        "i",
        &rules(&[
            rule(
                Some("a.com"),
                &[path("/x", "Prefix", "svc"), path("/y", "Prefix", "svc")],
            ),
            rule(Some("b.com"), &[path("/x", "Prefix", "svc")]),
        ]),
    ));
    assert_eq!(t.config.http.policies().len(), 3);
    assert_eq!(t.config.https.policies().len(), 3);
    assert_eq!(t.config.pools.keys().collect::<Vec<_>>(), ["ns/svc:80"]);
    for policy in t.config.http.policies() {
        assert_eq!(
            policy.rules.len(),
            2,
            "a host rule and a path rule: {policy:?}"
        );
    }
}

#[test]
fn bad_objects_are_rejected_whole_and_the_rest_is_served() {
    let good = ingress(
        "good",
        &rules(&[rule(None, &[path("/ok", "Prefix", "ok")])]),
    );
    let cases = [
        (path("/a", "Regex", "x"), "unknown pathType \"Regex\""),
        (
            "      - {path: /a, backend: {service: {name: x, port: {number: 80}}}}\n".to_string(),
            "missing pathType",
        ),
        (path("a", "Prefix", "x"), "does not start with /"),
        (
            "      - {path: /a, pathType: Prefix, backend: {resource: {kind: Bucket, name: b}}}\n"
                .to_string(),
            "resource backend",
        ),
        (
            "      - {path: /a, pathType: Prefix, backend: {}}\n".to_string(),
            "a backend with no service",
        ),
    ];
    for (bad_path, reason) in cases {
        let bad = ingress(
            "bad",
            &rules(&[rule(None, &[path("/fine", "Prefix", "fine"), bad_path])]),
        );
        let t = run(&format!("{good}{bad}"));
        assert_eq!(t.rejections.len(), 1, "{reason}");
        assert_eq!(t.rejections[0].object, "Ingress ns/bad");
        assert_eq!(t.rejections[0].origin, "test.yaml");
        assert!(
            t.rejections[0].reason.contains(reason),
            "{} lacks {reason}",
            t.rejections[0].reason
        );
        assert_eq!(route(&t, "h", "/ok"), "ns/ok:80");
        assert_eq!(
            route(&t, "h", "/fine"),
            "404",
            "nothing of a rejected object is served"
        );
    }
}

#[test]
fn extra_rules_annotation_is_validated_and_anded() {
    let with = |rules_json: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: canary\n  namespace: ns\n  annotations:\n    {EXTRA_RULES_ANNOTATION}: '{rules_json}'\nspec:\n{}---\n",
            rules(&[rule(None, &[path("/", "Prefix", "canary")])])
        )
    };
    let stable = ingress(
        "stable",
        &rules(&[rule(None, &[path("/", "Prefix", "stable")])]),
    );
    let t = run(&format!(
        "{}{stable}",
        with(
            r#"[{"type": "HEADER", "compare_type": "EQUAL_TO", "key": "x-track", "value": "canary"}]"#
        )
    ));
    assert!(t.rejections.is_empty() && t.conflicts.is_empty(), "{t:?}");
    assert_eq!(route(&t, "h", "/"), "ns/stable:80");
    let table = RouteTable::compile(&t.config);
    let headers = vec![("X-Track".to_string(), "canary".to_string())];
    let request = Request {
        host: "h",
        path: "/",
        target: "/",
        headers: &headers,
        client_cert: None,
    };
    assert_eq!(table.http.lookup(&request), Outcome::Pool("ns/canary:80"));
    for (json, reason) in [
        (
            r#"[{"type": "PATH", "compare_type": "REGEX", "value": "(["}]"#,
            "invalid regex",
        ),
        (
            r#"[{"type": "PATH", "compare_type": "LIKE", "value": "/"}]"#,
            "unknown variant `LIKE`",
        ),
        (
            r#"[{"type": "HEADER", "compare_type": "EQUAL_TO", "value": "x"}]"#,
            "requires a key",
        ),
    ] {
        let t = run(&format!("{}{stable}", with(json)));
        assert_eq!(t.rejections.len(), 1, "{json}");
        assert!(
            t.rejections[0].reason.contains(reason),
            "{}",
            t.rejections[0].reason
        );
        assert_eq!(route(&t, "h", "/"), "ns/stable:80");
    }
}

#[test]
fn conflicts_go_to_the_oldest_then_namespace_name_and_name_the_winner() {
    let with_time = |name: &str, time: &str, service: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: ns, creationTimestamp: \"{time}\"}}\nspec:\n{}---\n",
            rules(&[rule(Some("a.com"), &[path("/", "Prefix", service)])])
        )
    };
    let t = run(&format!(
        "{}{}",
        with_time("young", "2024-05-01T00:00:00Z", "young"),
        with_time("old", "2023-01-01T00:00:00Z", "old")
    ));
    assert_eq!(route(&t, "a.com", "/"), "ns/old:80");
    assert_eq!(t.conflicts.len(), 1);
    assert_eq!(t.conflicts[0].winner, "Ingress ns/old");
    assert_eq!(t.conflicts[0].loser, "Ingress ns/young");
    // Without timestamps: namespace/name, whatever the order of the documents.
    let b = ingress(
        "b",
        &rules(&[rule(Some("a.com"), &[path("/", "Prefix", "b")])]),
    );
    let a = ingress(
        "a",
        &rules(&[rule(Some("a.com"), &[path("/", "Prefix", "a")])]),
    );
    for yaml in [format!("{b}{a}"), format!("{a}{b}")] {
        let t = run(&yaml);
        assert_eq!(route(&t, "a.com", "/"), "ns/a:80");
        assert_eq!(t.conflicts[0].winner, "Ingress ns/a");
    }
    // Exact and Prefix of the same path do not conflict.
    let exact = ingress(
        "e",
        &rules(&[rule(Some("a.com"), &[path("/", "Exact", "e")])]),
    );
    assert!(run(&format!("{a}{exact}")).conflicts.is_empty());
}

const CLASSES: &str = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: other}\nspec: {controller: example.com/other}\n---\n";

fn classed(name: &str, class: Option<&str>) -> String {
    let class = class
        .map(|c| format!("  ingressClassName: {c}\n"))
        .unwrap_or_default();
    ingress(
        name,
        &format!(
            "{class}{}",
            rules(&[rule(
                Some(&format!("{name}.com")),
                &[path("/", "Prefix", name)]
            )])
        ),
    )
}

#[test]
fn without_ingress_classes_every_classless_ingress_and_ours_are_served() {
    let t = run(&format!(
        "{}{}{}",
        classed("none", None),
        classed("ours", Some("kuryr-l7")),
        classed("theirs", Some("nginx"))
    ));
    assert_eq!(route(&t, "none.com", "/"), "ns/none:80");
    assert_eq!(route(&t, "ours.com", "/"), "ns/ours:80");
    assert_eq!(route(&t, "theirs.com", "/"), "404");
    assert_eq!(t.ignored.len(), 1);
}

#[test]
fn with_ingress_classes_ours_and_the_default_class_are_served() {
    let t = run(&format!(
        "{CLASSES}{}{}{}",
        classed("none", None),
        classed("ours", Some("kuryr-l7")),
        classed("theirs", Some("other"))
    ));
    assert_eq!(route(&t, "none.com", "/"), "404", "no default class");
    assert_eq!(route(&t, "ours.com", "/"), "ns/ours:80");
    assert_eq!(route(&t, "theirs.com", "/"), "404");
    let default = "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: main\n  annotations: {ingressclass.kubernetes.io/is-default-class: \"true\"}\n---\n";
    let t = run(&format!(
        "{CLASSES}{default}{}{}",
        classed("none", None),
        classed("main", Some("main"))
    ));
    assert_eq!(route(&t, "none.com", "/"), "ns/none:80");
    assert_eq!(route(&t, "main.com", "/"), "ns/main:80");
    let custom = translate(
        &objects(&classed("mine", Some("mine"))),
        &Options {
            ingress_class: "mine".into(),
            ..Options::default()
        },
    );
    assert_eq!(route(&custom, "mine.com", "/"), "ns/mine:80");
}

const BACKENDS: &str = "\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ns}
spec:
  ports: [{name: http, port: 80}, {name: admin, port: 9000}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: admin, port: 9090}]
endpoints:
- addresses: [10.0.0.1]
  conditions: {ready: true}
- addresses: [10.0.0.2]
- addresses: [10.0.0.3]
  conditions: {ready: false}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: other, namespace: elsewhere, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: [10.9.9.9]
---
";

fn members(t: &Translation, pool: &str) -> Vec<(String, u32)> {
    t.config.pools[pool]
        .members
        .iter()
        .map(|m| (m.address.to_string(), m.weight))
        .collect()
}

#[test]
fn service_port_by_number_or_name_maps_to_the_slice_port_of_that_name() {
    let by_name = "      - {path: /admin, pathType: Prefix, backend: {service: {name: web, port: {name: admin}}}}\n".to_string();
    let t = run(&format!(
        "{BACKENDS}{}",
        ingress(
            "i",
            &rules(&[rule(None, &[path("/", "Prefix", "web"), by_name])])
        )
    ));
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    assert_eq!(
        members(&t, "ns/web:80"),
        [("10.0.0.1:8080".into(), 1), ("10.0.0.2:8080".into(), 1)]
    );
    assert_eq!(
        members(&t, "ns/web:admin"),
        [("10.0.0.1:9090".into(), 1), ("10.0.0.2:9090".into(), 1)]
    );
}

#[test]
fn a_missing_service_or_port_is_an_empty_pool_and_a_warning() {
    let t = run(&format!(
        "{BACKENDS}{}",
        ingress("i", &rules(&[rule(None, &[path("/", "Prefix", "ghost")])]))
    ));
    assert_eq!(route(&t, "h", "/"), "ns/ghost:80");
    assert!(t.config.pools["ns/ghost:80"].members.is_empty());
    assert!(
        t.warnings[0].message.contains("Service ns/ghost not found"),
        "{:?}",
        t.warnings
    );
    let wrong_port = "      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 81}}}}\n".to_string();
    let t = run(&format!(
        "{BACKENDS}{}",
        ingress("i", &rules(&[rule(None, &[wrong_port])]))
    ));
    assert!(t.warnings[0].message.contains("has no port 81"));
}

fn route_object(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n{spec}\n---\n"
    )
}

#[test]
fn route_path_is_an_element_wise_prefix() {
    let t = run(&format!(
        "{BACKENDS}{}",
        route_object(
            "r",
            "  host: r.com\n  path: /shop\n  to: {kind: Service, name: web}\n"
        )
    ));
    assert_eq!(route(&t, "r.com", "/shop/cart"), "route:ns/r");
    assert_eq!(route(&t, "r.com", "/shop"), "route:ns/r");
    assert_eq!(route(&t, "r.com", "/shopping"), "404");
    assert_eq!(route(&t, "other.com", "/shop"), "404");
}

#[test]
fn route_weights_split_per_service_then_evenly_over_endpoints() {
    let other = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: b, namespace: ns, labels: {kubernetes.io/service-name: b}}\nports: [{name: http, port: 8080}]\nendpoints:\n- addresses: [10.1.0.1]\n---\n";
    let spec = "  host: r.com\n  port: {targetPort: http}\n  to: {kind: Service, name: web, weight: 3}\n  alternateBackends:\n  - {kind: Service, name: b, weight: 1}\n";
    let t = run(&format!("{BACKENDS}{other}{}", route_object("r", spec)));
    // web: 3/4 over two endpoints, b: 1/4 over one.
    let m = members(&t, "route:ns/r");
    assert_eq!(
        m,
        [
            ("10.0.0.1:8080".into(), 3),
            ("10.0.0.2:8080".into(), 3),
            ("10.1.0.1:8080".into(), 2)
        ]
    );
    let spec_num = "  host: r.com\n  port: {targetPort: 9090}\n  to: {kind: Service, name: web}\n";
    let t = run(&format!("{BACKENDS}{}", route_object("r", spec_num)));
    assert_eq!(
        members(&t, "route:ns/r"),
        [("10.0.0.1:9090".into(), 100), ("10.0.0.2:9090".into(), 100)]
    );
}

#[test]
fn route_all_zero_weights_is_a_pool_without_weight_and_bad_weights_are_rejected() {
    let t = run(&format!(
        "{BACKENDS}{}",
        route_object(
            "r",
            "  host: r.com\n  to: {kind: Service, name: web, weight: 0}\n"
        )
    ));
    assert!(!t.config.pools["route:ns/r"].has_weight());
    let t = run(&format!(
        "{BACKENDS}{}",
        route_object(
            "r",
            "  host: r.com\n  to: {kind: Service, name: web, weight: 257}\n"
        )
    ));
    assert!(t.rejections[0].reason.contains("outside 0–256"));
    let t = run(&route_object("r", "  to: {kind: Service, name: web}\n"));
    assert!(t.rejections[0].reason.contains("spec.host is required"));
}

#[test]
fn route_tls_terminations_and_insecure_policies() {
    let tls = |termination: &str, insecure: &str| {
        route_object(
            "r",
            &format!(
                "  host: r.com\n  to: {{kind: Service, name: web}}\n  tls: {{termination: {termination}, insecureEdgeTerminationPolicy: {insecure}, certificate: CERT, key: KEY, destinationCACertificate: CA}}\n"
            ),
        )
    };
    let t = run(&format!("{BACKENDS}{}", tls("edge", "None")));
    assert_eq!(route(&t, "r.com", "/"), "404");
    assert_eq!(route_on(&t, true, "r.com", "/"), "route:ns/r");
    assert_eq!(t.config.certificates[0].hosts, ["r.com"]);
    let t = run(&format!("{BACKENDS}{}", tls("edge", "Allow")));
    assert_eq!(route(&t, "r.com", "/"), "route:ns/r");
    let t = run(&format!("{BACKENDS}{}", tls("edge", "Redirect")));
    assert_eq!(route(&t, "r.com", "/a?b=c"), "302 https://r.com/a?b=c");
    let t = run(&format!("{BACKENDS}{}", tls("reencrypt", "None")));
    assert_eq!(
        t.config.pools["route:ns/r"].protocol,
        PoolProtocol::Https {
            ca_pem: Some("CA".into())
        }
    );
    let t = run(&format!("{BACKENDS}{}", tls("passthrough", "Redirect")));
    assert_eq!(t.config.passthrough["r.com"], "route:ns/r");
    assert_eq!(
        route_on(&t, true, "r.com", "/"),
        "404",
        "passthrough is not terminated"
    );
    let t = run(&format!("{BACKENDS}{}", tls("passthrough", "Allow")));
    assert!(
        t.rejections[0]
            .reason
            .contains("Allow is not valid with passthrough")
    );
    let t = run(&format!("{BACKENDS}{}", tls("bogus", "None")));
    assert!(t.rejections[0].reason.contains("unknown tls termination"));
}

#[test]
fn ingress_tls_reads_kubernetes_tls_secrets() {
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: tls, namespace: ns}\ntype: kubernetes.io/tls\ndata: {tls.crt: Q0VSVA==, tls.key: S0VZ}\n---\n";
    let body = format!(
        "  tls:\n  - hosts: [a.com]\n    secretName: tls\n  - hosts: [b.com]\n    secretName: missing\n{}",
        rules(&[rule(Some("a.com"), &[path("/", "Prefix", "a")])])
    );
    let t = run(&format!("{secret}{}", ingress("i", &body)));
    assert_eq!(t.config.certificates.len(), 1);
    assert_eq!(t.config.certificates[0].cert_pem, "CERT");
    assert_eq!(t.config.certificates[0].key_pem, "KEY");
    assert_eq!(route_on(&t, true, "a.com", "/"), "ns/a:80");
    assert!(
        t.warnings
            .iter()
            .any(|w| w.message.contains("Secret ns/missing not found"))
    );
}

#[test]
fn translation_does_not_depend_on_document_order() {
    let docs = [
        ingress(
            "a",
            &rules(&[rule(Some("*.x.com"), &[path("/p", "Prefix", "a")])]),
        ),
        ingress(
            "b",
            &rules(&[rule(Some("y.x.com"), &[path("/p", "Exact", "b")])]),
        ),
        ingress("c", &rules(&[rule(None, &[path("/", "Prefix", "c")])])),
        route_object(
            "r",
            "  host: y.x.com\n  path: /p\n  to: {kind: Service, name: r}\n",
        ),
    ];
    let forward = run(&docs.concat());
    let backward = run(&docs.iter().rev().cloned().collect::<String>());
    assert_eq!(forward.config, backward.config);
    assert_eq!(forward.conflicts, backward.conflicts);
}

#[test]
fn base64_decoding() {
    use crate::objects::decode_base64;
    assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
    assert_eq!(decode_base64("aGVs\nbG8").unwrap(), b"hello");
    assert!(decode_base64("a$==").is_none());
}
