use proptest::prelude::*;

use super::*;
use crate::eval::{Outcome, Request, normalize_path};
use crate::model::{Action, CompareType, Listener, Policy, Rule, RuleType};

#[test]
fn regex_forms_round_trip() {
    assert_eq!(
        parse_wildcard_host_regex(&wildcard_host_regex("example.com")).as_deref(),
        Some("example.com")
    );
    assert_eq!(
        parse_path_prefix_regex(&path_prefix_regex("/a.b/c+")).as_deref(),
        Some("/a.b/c+")
    );
    assert_eq!(
        parse_path_prefix_regex(&path_prefix_regex("")).as_deref(),
        Some("")
    );
    assert_eq!(parse_path_prefix_regex("(?s)^/a.b(?:/.*)?$"), None);
    assert_eq!(parse_wildcard_host_regex("^[^.]+\\.x$"), None);
}

#[test]
fn element_wise_prefix_regex_matches_like_the_trie() {
    let regex = regex::Regex::new(&path_prefix_regex("/foo")).unwrap();
    for (path, expected) in [
        ("/foo", true),
        ("/foo/", true),
        ("/foo/bar", true),
        ("/foobar", false),
        ("/fo", false),
    ] {
        assert_eq!(regex.is_match(path), expected, "{path}");
    }
}

const HOSTS: &[&str] = &[
    "a.com",
    "b.a.com",
    "c.a.com",
    "x.b.a.com",
    "B.A.com",
    "other.org",
];
const PATHS: &[&str] = &[
    "/",
    "/foo",
    "/foo/",
    "/foo/bar",
    "/foobar",
    "/foo/bar/baz",
    "/x.js",
    "/foo/x.js",
    "/a%2Fb",
];

fn rule() -> impl Strategy<Value = Rule> {
    let host = prop::sample::select(HOSTS);
    let path = prop::sample::select(PATHS);
    prop_oneof![
        host.clone()
            .prop_map(|h| Rule::new(RuleType::HostName, CompareType::EqualTo, h)),
        prop::sample::select(&["a.com", "b.a.com", "com"][..]).prop_map(|s| Rule::new(
            RuleType::HostName,
            CompareType::Regex,
            wildcard_host_regex(s)
        )),
        host.prop_map(|h| Rule::new(RuleType::HostName, CompareType::EndsWith, h)),
        path.clone()
            .prop_map(|p| Rule::new(RuleType::Path, CompareType::EqualTo, p)),
        path.clone().prop_map(|p| Rule::new(
            RuleType::Path,
            CompareType::Regex,
            path_prefix_regex(p.trim_end_matches('/'))
        )),
        path.prop_map(|p| Rule::new(RuleType::Path, CompareType::StartsWith, p)),
        prop::sample::select(&["js", "html"][..]).prop_map(|v| Rule::new(
            RuleType::FileType,
            CompareType::EqualTo,
            v
        )),
        prop::sample::select(&["1", "2"][..]).prop_map(|v| Rule::new(
            RuleType::Header,
            CompareType::EqualTo,
            v
        )
        .with_key("x-v")),
    ]
    .prop_flat_map(|rule| (Just(rule), any::<u8>()))
    .prop_map(|(rule, bits)| if bits % 7 == 0 { rule.inverted() } else { rule })
}

fn policy() -> impl Strategy<Value = (Vec<Rule>, u8)> {
    (prop::collection::vec(rule(), 0..4), 0u8..4)
}

fn listener(policies: Vec<(Vec<Rule>, u8)>, default_pool: bool) -> Listener {
    let mut listener = Listener::new(404);
    for (i, (rules, action)) in policies.into_iter().enumerate() {
        let action = match action {
            0 => Action::Reject,
            1 => Action::RedirectPrefix {
                prefix: "https://r.example".into(),
                code: 301,
            },
            _ => Action::RedirectToPool {
                pool: format!("pool{i}"),
            },
        };
        listener
            .insert_policy(Policy::new(format!("p{i}"), action, rules), None)
            .unwrap();
    }
    if default_pool {
        listener.default_pool = Some("default".into());
    }
    listener
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn compiled_table_agrees_with_position_order_evaluation(
        policies in prop::collection::vec(policy(), 0..30),
        default_pool in any::<bool>(),
        requests in prop::collection::vec((prop::sample::select(HOSTS), prop::sample::select(PATHS), proptest::option::of(prop::sample::select(&["1", "2"][..]))), 1..20),
    ) {
        let listener = listener(policies, default_pool);
        let table = CompiledListener::compile(&listener);
        for (host, target, header) in requests {
            let host = host.to_ascii_lowercase();
            let headers: Vec<(String, String)> = header.map(|v| ("X-V".to_string(), v.to_string())).into_iter().collect();
            let path = normalize_path(target);
            let request = Request { host: &host, path: &path, target, headers: &headers, client_cert: None };
            prop_assert_eq!(table.lookup(&request), listener.evaluate(&request), "{} {}", host, target);
        }
    }
}

#[test]
fn lookup_visits_a_bounded_number_of_policies() {
    // 10,000 exact-host policies: a request for the last one still resolves through the index.
    let mut listener = Listener::new(404);
    for i in 0..10_000 {
        listener
            .insert_policy(
                Policy::new(
                    format!("p{i}"),
                    Action::RedirectToPool {
                        pool: format!("pool{i}"),
                    },
                    vec![
                        Rule::new(
                            RuleType::HostName,
                            CompareType::EqualTo,
                            format!("h{i}.example.com"),
                        ),
                        Rule::new(
                            RuleType::Path,
                            CompareType::Regex,
                            path_prefix_regex("/api"),
                        ),
                    ],
                ),
                None,
            )
            .unwrap();
    }
    let table = CompiledListener::compile(&listener);
    assert_eq!(table.len(), 10_000);
    let headers: Vec<(String, String)> = Vec::new();
    let request = Request {
        host: "h9999.example.com",
        path: "/api/v1",
        target: "/api/v1",
        headers: &headers,
        client_cert: None,
    };
    assert_eq!(table.lookup(&request), Outcome::Pool("pool9999"));
    assert!(
        table
            .exact_hosts
            .get("h9999.example.com")
            .is_some_and(|index| index.prefixes.children.len() == 1)
    );
}
