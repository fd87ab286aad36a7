//! Property tests of HTTPRoute precedence on random routes and requests:
//!
//! - the compiled order is a total order that does not depend on the order objects come in;
//! - the rule a request goes to matches it, and no other matching rule is more specific by
//!   the spec's criteria (hostname, then path, then method, headers, query parameters; then
//!   the oldest route, then namespace/name, then rule and match order);
//! - a request that some rule matches is never answered 404.
//!
//! The matching and the "more specific" comparison here are written from the spec's text,
//! independently of `gateway::compiled`.

use std::cmp::Ordering;

use nephrite_krm::Object;
use nephrite_l7::gateway::{Decision, HttpRequest, ObjectKey, Settings, build};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct MatchSpec {
    path_type: &'static str,
    path: &'static str,
    method: Option<&'static str>,
    headers: Vec<(&'static str, &'static str)>,
    query: Vec<(&'static str, &'static str)>,
}

#[derive(Debug, Clone)]
struct RouteSpec {
    namespace: &'static str,
    created: Option<&'static str>,
    hostnames: Vec<&'static str>,
    rules: Vec<Vec<MatchSpec>>,
}

fn match_spec() -> impl Strategy<Value = MatchSpec> {
    (
        select(vec!["Exact", "PathPrefix", "RegularExpression"]),
        select(vec!["/", "/a", "/a/b", "/ab"]),
        prop::option::of(select(vec!["GET", "POST"])),
        subsequence(vec![("x", "1"), ("y", "2")], 0..=2),
        subsequence(vec![("q", "1"), ("r", "2")], 0..=2),
    )
        .prop_map(|(path_type, path, method, headers, query)| MatchSpec {
            path_type,
            path: if path_type == "RegularExpression" {
                match path {
                    "/" => "/.*",
                    "/a" => "/a.*",
                    "/a/b" => "/a/[a-z]",
                    _ => "/[ab]+",
                }
            } else {
                path
            },
            method,
            headers,
            query,
        })
}

fn route_spec() -> impl Strategy<Value = RouteSpec> {
    (
        select(vec!["a", "b"]),
        prop::option::of(select(vec!["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"])),
        subsequence(vec!["example.com", "*.example.com", "a.example.com"], 0..=2),
        prop::collection::vec(prop::collection::vec(match_spec(), 1..=2), 1..=3),
    )
        .prop_map(|(namespace, created, hostnames, rules)| RouteSpec {
            namespace,
            created,
            hostnames,
            rules,
        })
}

fn route_object(index: usize, spec: &RouteSpec) -> Object {
    let rules: Vec<Value> = spec
        .rules
        .iter()
        .map(|matches| {
            let matches: Vec<Value> = matches
                .iter()
                .map(|m| {
                    let mut out = json!({
                        "path": {"type": m.path_type, "value": m.path},
                        "headers": m.headers.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
                        "queryParams": m.query.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
                    });
                    if let Some(method) = m.method {
                        out["method"] = json!(method);
                    }
                    out
                })
                .collect();
            json!({"matches": matches, "backendRefs": [{"name": "echo", "namespace": "infra", "port": 8080}]})
        })
        .collect();
    let mut metadata = json!({"name": format!("r{index}"), "namespace": spec.namespace});
    if let Some(created) = spec.created {
        metadata["creationTimestamp"] = json!(created);
    }
    Object::from_json(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": metadata,
        "spec": {
            "parentRefs": [{"name": "web", "namespace": "infra"}],
            "hostnames": spec.hostnames,
            "rules": rules,
        },
    }))
    .expect("route object")
}

fn fixed_objects() -> Vec<Object> {
    let grant = |namespace: &str| {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "echo", "namespace": "infra"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": namespace}],
                     "to": [{"group": "", "kind": "Service"}]},
        })
    };
    [
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "kuryr"}, "spec": {"controllerName": "kuryr.nephrite.io/l7"}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "web", "namespace": "infra"},
               "spec": {"gatewayClassName": "kuryr", "listeners": [
                   {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": "infra"},
               "spec": {"ports": [{"name": "http", "port": 8080}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "echo-1", "namespace": "infra", "labels": {"kubernetes.io/service-name": "echo"}},
               "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"name": "http", "port": 8080}]}),
        grant("a"),
        grant("b"),
    ]
    .into_iter()
    .map(|v| Object::from_json(v).expect("fixed object"))
    .collect()
}

#[derive(Debug, Clone)]
struct Req {
    host: &'static str,
    path: &'static str,
    method: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    query: Vec<(&'static str, &'static str)>,
}

fn request() -> impl Strategy<Value = Req> {
    (
        select(vec![
            "example.com",
            "a.example.com",
            "b.example.com",
            "other.org",
        ]),
        select(vec!["/", "/a", "/a/b", "/ab", "/a/b/c", "/b"]),
        select(vec!["GET", "POST"]),
        subsequence(vec![("x", "1"), ("y", "2")], 0..=2),
        subsequence(vec![("q", "1"), ("r", "2")], 0..=2),
    )
        .prop_map(|(host, path, method, headers, query)| Req {
            host,
            path,
            method,
            headers,
            query,
        })
}

/// The spec's matching of one match, written out.
fn matches(m: &MatchSpec, r: &Req) -> bool {
    let path_ok = match m.path_type {
        "Exact" => r.path == m.path,
        "PathPrefix" => {
            let prefix = m.path.trim_end_matches('/');
            r.path == prefix || r.path.starts_with(&format!("{prefix}/"))
        }
        _ => regex::Regex::new(&format!("^(?:{})$", m.path)).is_ok_and(|re| re.is_match(r.path)),
    };
    path_ok
        && m.method.is_none_or(|method| method == r.method)
        && m.headers.iter().all(|h| r.headers.contains(h))
        && m.query.iter().all(|q| r.query.contains(q))
}

fn host_covers(hostname: &str, host: &str) -> bool {
    match hostname.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => hostname == host,
    }
}

/// A matching (route, rule, match) with the hostname it matched by.
struct Candidate<'a> {
    index: usize,
    route: &'a RouteSpec,
    rule: usize,
    matched: usize,
    hostname: Option<&'static str>,
}

/// `Less` when `a` is more specific than `b`, by the spec's criteria in the spec's order.
fn specificity(a: &Candidate<'_>, b: &Candidate<'_>) -> Ordering {
    let host_rank = |h: Option<&str>| match h {
        Some(h) if !h.starts_with('*') => (0, usize::MAX - h.len()),
        Some(h) => (1, usize::MAX - h.len()),
        None => (2, 0),
    };
    let ma = &a.route.rules[a.rule][a.matched];
    let mb = &b.route.rules[b.rule][b.matched];
    let path_rank = |m: &MatchSpec| {
        let kind = match m.path_type {
            "Exact" => 0,
            "RegularExpression" => 1,
            _ => 2,
        };
        let len = if m.path_type == "PathPrefix" {
            m.path.trim_end_matches('/').len().max(1)
        } else {
            m.path.len()
        };
        (kind, usize::MAX - len)
    };
    let age = |route: &RouteSpec| (route.created.is_none(), route.created.unwrap_or_default());
    host_rank(a.hostname)
        .cmp(&host_rank(b.hostname))
        .then(path_rank(ma).cmp(&path_rank(mb)))
        .then(ma.method.is_none().cmp(&mb.method.is_none()))
        .then(mb.headers.len().cmp(&ma.headers.len()))
        .then(mb.query.len().cmp(&ma.query.len()))
        .then(age(a.route).cmp(&age(b.route)))
        .then((a.route.namespace, a.index).cmp(&(b.route.namespace, b.index)))
        .then((a.rule, a.matched).cmp(&(b.rule, b.matched)))
}

fn candidates<'a>(routes: &'a [RouteSpec], r: &Req) -> Vec<Candidate<'a>> {
    let mut out = Vec::new();
    for (index, route) in routes.iter().enumerate() {
        let hostname = if route.hostnames.is_empty() {
            Some(None)
        } else {
            // The most specific of the route's hostnames that covers the host.
            let mut covering: Vec<&'static str> = route
                .hostnames
                .iter()
                .copied()
                .filter(|h| host_covers(h, r.host))
                .collect();
            covering.sort_by_key(|h| (h.starts_with('*'), usize::MAX - h.len()));
            covering.first().map(|h| Some(*h))
        };
        let Some(hostname) = hostname else { continue };
        for (rule, matches_) in route.rules.iter().enumerate() {
            for (matched, m) in matches_.iter().enumerate() {
                if matches(m, r) {
                    out.push(Candidate {
                        index,
                        route,
                        rule,
                        matched,
                        hostname,
                    });
                }
            }
        }
    }
    out
}

fn http(r: &Req) -> HttpRequest {
    let query: Vec<String> = r.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    HttpRequest {
        port: 80,
        method: r.method.to_owned(),
        host: r.host.to_owned(),
        target: if query.is_empty() {
            r.path.to_owned()
        } else {
            format!("{}?{}", r.path, query.join("&"))
        },
        headers: r
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// Names are unique per index; namespaces vary. Route `r{i}` of namespace `ns`.
fn key(route: &RouteSpec, index: usize) -> ObjectKey {
    ObjectKey::new(route.namespace, &format!("r{index}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_rule_chosen_matches_and_no_matching_rule_is_more_specific(
        routes in prop::collection::vec(route_spec(), 1..=5),
        requests in prop::collection::vec(request(), 1..=8),
    ) {
        let mut objects = fixed_objects();
        objects.extend(routes.iter().enumerate().map(|(i, r)| route_object(i, r)));
        let model = build(&objects, &Settings::default());
        prop_assert!(model.errors.is_empty(), "{:?}", model.errors);
        let gateway = model.compiled_gateway(&ObjectKey::new("infra", "web")).expect("compiled");
        for r in &requests {
            let found = candidates(&routes, r);
            let decision = gateway.route(&http(r), 0);
            let best = found.iter().min_by(|a, b| specificity(a, b));
            match (best, &decision) {
                (None, Decision::Respond { status: 404, .. }) => {}
                (Some(best), Decision::Forward(forward)) => {
                    prop_assert_eq!(
                        (&forward.route, forward.rule),
                        (&key(best.route, best.index), best.rule),
                        "request {:?}", r
                    );
                }
                (best, decision) => prop_assert!(
                    false,
                    "request {:?}: oracle {:?}, evaluator {:?}",
                    r, best.map(|b| (b.index, b.rule)), decision
                ),
            }
        }
    }

    #[test]
    fn the_compiled_order_does_not_depend_on_the_order_of_objects(
        routes in prop::collection::vec(route_spec(), 1..=5),
        seed in any::<u64>(),
    ) {
        let mut objects = fixed_objects();
        objects.extend(routes.iter().enumerate().map(|(i, r)| route_object(i, r)));
        let reference = build(&objects, &Settings::default());
        // A deterministic shuffle from the seed.
        let mut state = seed | 1;
        for i in (1..objects.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            objects.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let shuffled = build(&objects, &Settings::default());
        let order = |model: &nephrite_l7::gateway::Model| -> Vec<(ObjectKey, usize, usize, String)> {
            let listener = &model.compiled[0].listeners[0];
            listener
                .entries
                .iter()
                .map(|e| {
                    let action = &listener.actions[e.action];
                    (action.route.clone(), action.rule, e.match_index,
                     e.hostname.as_ref().map_or_else(String::new, ToString::to_string))
                })
                .collect()
        };
        let order_a = order(&reference);
        prop_assert_eq!(&order_a, &order(&shuffled));
        // Total: no two entries share a place.
        let mut unique = order_a.clone();
        unique.dedup();
        prop_assert_eq!(unique.len(), order_a.len());
    }

    #[test]
    fn reading_arbitrary_specs_never_panics(spec in arbitrary_json(3)) {
        for kind in ["GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant"] {
            let object = Object::from_json(json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": "x", "namespace": "infra"},
                "spec": spec.clone(),
            }));
            if let Ok(object) = object {
                let mut objects = fixed_objects();
                objects.push(object);
                let _ = build(&objects, &Settings::default());
            }
        }
    }
}

fn arbitrary_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-2i64..70000).prop_map(Value::from),
        select(vec![
            "",
            "/",
            "Exact",
            "PathPrefix",
            "RegularExpression",
            "web",
            "HTTP",
            "(",
            "*.x"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec(
                (
                    select(vec![
                        "listeners",
                        "rules",
                        "matches",
                        "path",
                        "type",
                        "value",
                        "name",
                        "parentRefs",
                        "hostnames",
                        "backendRefs",
                        "filters",
                        "port",
                        "protocol",
                        "controllerName",
                        "gatewayClassName",
                        "from",
                        "to",
                        "requestRedirect",
                        "urlRewrite",
                        "requestMirror",
                        "weight",
                    ]),
                    inner
                ),
                0..4
            )
            .prop_map(|pairs| Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}
