use proptest::prelude::*;

use super::*;

fn pool_policy(name: &str) -> Policy {
    Policy::new(
        name,
        Action::RedirectToPool { pool: "p".into() },
        vec![Rule::new(RuleType::Path, CompareType::StartsWith, "/")],
    )
}

fn reason(rule: Rule) -> String {
    match rule.validate() {
        Err(ModelError::BadRule { reason, .. }) => reason,
        other => panic!("expected a bad rule, got {other:?}"),
    }
}

#[test]
fn value_is_always_required() {
    assert_eq!(
        reason(Rule::new(RuleType::Path, CompareType::EqualTo, "")),
        "value is required"
    );
}

#[test]
fn header_cookie_and_dn_rules_need_a_key() {
    for rule_type in [RuleType::Header, RuleType::Cookie, RuleType::SslDnField] {
        let rule = Rule::new(rule_type, CompareType::EqualTo, "x");
        assert!(reason(rule).contains("requires a key"), "{rule_type}");
    }
    assert!(
        Rule::new(RuleType::Header, CompareType::EqualTo, "x")
            .with_key("X-Env")
            .validate()
            .is_ok()
    );
    assert!(
        reason(Rule::new(RuleType::Header, CompareType::EqualTo, "x").with_key("bad key"))
            .contains("not a valid")
    );
    assert!(
        reason(Rule::new(RuleType::SslDnField, CompareType::EqualTo, "x").with_key("XX"))
            .contains("DN field")
    );
    assert!(
        reason(Rule::new(RuleType::Path, CompareType::EqualTo, "/").with_key("k"))
            .contains("takes no key")
    );
}

#[test]
fn file_type_allows_only_equal_to_and_regex() {
    assert!(
        Rule::new(RuleType::FileType, CompareType::EqualTo, "jpg")
            .validate()
            .is_ok()
    );
    assert!(
        Rule::new(RuleType::FileType, CompareType::Regex, "jpe?g")
            .validate()
            .is_ok()
    );
    for compare in [
        CompareType::StartsWith,
        CompareType::EndsWith,
        CompareType::Contains,
    ] {
        assert!(reason(Rule::new(RuleType::FileType, compare, "jpg")).contains("FILE_TYPE"));
    }
}

#[test]
fn invalid_regex_is_refused_naming_the_regex_error() {
    let why = reason(Rule::new(RuleType::Path, CompareType::Regex, "^/(unclosed"));
    assert!(why.starts_with("invalid regex"), "{why}");
}

#[test]
fn ssl_rules_follow_octavia() {
    assert!(
        Rule::new(RuleType::SslConnHasCert, CompareType::EqualTo, "True")
            .validate()
            .is_ok()
    );
    assert!(
        Rule::new(RuleType::SslConnHasCert, CompareType::EqualTo, "False")
            .validate()
            .is_err()
    );
    assert!(
        Rule::new(RuleType::SslConnHasCert, CompareType::Contains, "True")
            .validate()
            .is_err()
    );
    assert!(
        Rule::new(RuleType::SslVerifyResult, CompareType::EqualTo, "0")
            .validate()
            .is_ok()
    );
    assert!(
        Rule::new(RuleType::SslVerifyResult, CompareType::EqualTo, "-1")
            .validate()
            .is_err()
    );
}

#[test]
fn unknown_names_are_refused() {
    assert_eq!("REGEX".parse::<CompareType>(), Ok(CompareType::Regex));
    assert_eq!(
        "LIKE".parse::<CompareType>(),
        Err(ModelError::Unknown {
            what: "compare type",
            value: "LIKE".into()
        })
    );
    assert!("QUERY".parse::<RuleType>().is_err());
    let json = r#"{"type": "PATH", "compare_type": "LIKE", "value": "/"}"#;
    let err = serde_json::from_str::<Rule>(json).unwrap_err().to_string();
    assert!(err.contains("unknown variant `LIKE`"), "{err}");
}

#[test]
fn redirect_codes_and_urls_are_checked() {
    let mut policy = Policy::new(
        "r",
        Action::RedirectToUrl {
            url: "https://example.com/".into(),
            code: 301,
        },
        vec![Rule::new(RuleType::Path, CompareType::EqualTo, "/old")],
    );
    assert!(policy.validate().is_ok());
    policy.action = Action::RedirectToUrl {
        url: "https://example.com/".into(),
        code: 200,
    };
    assert!(
        policy
            .validate()
            .unwrap_err()
            .to_string()
            .contains("redirect code 200")
    );
    policy.action = Action::RedirectPrefix {
        prefix: "ftp://x".into(),
        code: 302,
    };
    assert!(
        policy
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not an http(s) URL")
    );
    policy.action = Action::RedirectToPool {
        pool: String::new(),
    };
    assert!(policy.validate().is_err());
}

#[test]
fn insert_at_taken_position_shifts_the_rest_down() {
    let mut listener = Listener::default();
    for name in ["a", "b", "c"] {
        listener.insert_policy(pool_policy(name), None).unwrap();
    }
    assert_eq!(
        listener.insert_policy(pool_policy("x"), Some(2)).unwrap(),
        2
    );
    let order: Vec<_> = listener
        .policies()
        .iter()
        .map(|p| (p.name.as_str(), p.position))
        .collect();
    assert_eq!(order, [("a", 1), ("x", 2), ("b", 3), ("c", 4)]);
}

#[test]
fn missing_zero_or_too_large_position_appends() {
    let mut listener = Listener::default();
    listener.insert_policy(pool_policy("a"), Some(7)).unwrap();
    assert_eq!(
        listener.insert_policy(pool_policy("b"), Some(99)).unwrap(),
        2
    );
    assert_eq!(listener.insert_policy(pool_policy("c"), None).unwrap(), 3);
    assert_eq!(
        listener.insert_policy(pool_policy("d"), Some(0)).unwrap(),
        4
    );
}

#[test]
fn removal_renumbers_without_gaps_and_duplicates_are_refused() {
    let mut listener = Listener::default();
    for name in ["a", "b", "c"] {
        listener.insert_policy(pool_policy(name), None).unwrap();
    }
    listener.remove_policy("a").unwrap();
    let positions: Vec<_> = listener.policies().iter().map(|p| p.position).collect();
    assert_eq!(positions, [1, 2]);
    assert_eq!(
        listener.insert_policy(pool_policy("b"), None),
        Err(ModelError::DuplicatePolicy { policy: "b".into() })
    );
    assert_eq!(listener.move_policy("c", Some(1)).unwrap(), 1);
    assert_eq!(listener.policies()[0].name, "c");
    assert!(listener.move_policy("zz", None).is_err());
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Option<usize>),
    Remove(usize),
    Move(usize, Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::option::of(0usize..12).prop_map(Op::Insert),
        (0usize..12).prop_map(Op::Remove),
        (0usize..12, proptest::option::of(0usize..12)).prop_map(|(a, b)| Op::Move(a, b)),
    ]
}

proptest! {
    #[test]
    fn positions_stay_one_to_n_and_inserts_land_where_asked(ops in proptest::collection::vec(op(), 0..40)) {
        let mut listener = Listener::default();
        let mut model: Vec<String> = Vec::new();
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Insert(position) => {
                    let name = format!("p{step}");
                    let got = listener.insert_policy(pool_policy(&name), position).unwrap();
                    let index = match position {
                        Some(p) if p >= 1 && p <= model.len() => p - 1,
                        _ => model.len(),
                    };
                    prop_assert_eq!(got, index + 1);
                    model.insert(index, name);
                }
                Op::Remove(i) => {
                    if let Some(name) = model.get(i).cloned() {
                        prop_assert!(listener.remove_policy(&name).is_some());
                        model.remove(i);
                    }
                }
                Op::Move(i, position) => {
                    if let Some(name) = model.get(i).cloned() {
                        listener.move_policy(&name, position).unwrap();
                        model.remove(i);
                        let index = match position {
                            Some(p) if p >= 1 && p <= model.len() => p - 1,
                            _ => model.len(),
                        };
                        model.insert(index, name);
                    }
                }
            }
            let names: Vec<_> = listener.policies().iter().map(|p| p.name.clone()).collect();
            prop_assert_eq!(&names, &model);
            for (i, policy) in listener.policies().iter().enumerate() {
                prop_assert_eq!(policy.position, i + 1);
            }
        }
    }
}

fn policy_reason(policy: &Policy) -> String {
    match policy.validate() {
        Err(ModelError::BadPolicy { reason, .. }) => reason,
        other => panic!("expected a bad policy, got {other:?}"),
    }
}

#[test]
fn method_and_query_rules_are_checked_naming_what_is_wrong() {
    assert!(
        Rule::new(RuleType::Method, CompareType::EqualTo, "POST")
            .validate()
            .is_ok()
    );
    assert_eq!(
        reason(Rule::new(RuleType::Method, CompareType::Regex, "P.*")),
        "METHOD allows only EQUAL_TO"
    );
    assert_eq!(
        reason(Rule::new(RuleType::Method, CompareType::EqualTo, "post")),
        "METHOD value must be an upper-case method name"
    );
    assert_eq!(
        reason(Rule::new(RuleType::QueryParam, CompareType::EqualTo, "1")),
        "QUERY_PARAM rule requires a key"
    );
    assert_eq!(
        reason(Rule::new(RuleType::QueryParam, CompareType::EqualTo, "1").with_key("a=b")),
        "key \"a=b\" is not a query parameter name"
    );
    assert_eq!(
        reason(Rule::new(RuleType::QueryParam, CompareType::Contains, "1").with_key("a")),
        "QUERY_PARAM allows only EQUAL_TO and REGEX"
    );
    assert_eq!("QUERY_PARAM".parse::<RuleType>(), Ok(RuleType::QueryParam));
}

#[test]
fn a_request_relative_redirect_and_filters_are_checked_naming_the_field() {
    let redirect = |scheme: &str, host: Option<&str>, path: Option<PathChange>| {
        Policy::new(
            "r",
            Action::Redirect {
                scheme: scheme.into(),
                host: host.map(Into::into),
                port: None,
                path,
                code: 302,
            },
            vec![Rule::new(RuleType::Path, CompareType::StartsWith, "/")],
        )
    };
    assert!(redirect("https", None, None).validate().is_ok());
    assert_eq!(
        policy_reason(&redirect("ftp", None, None)),
        "redirect scheme \"ftp\" is not http or https"
    );
    assert_eq!(
        policy_reason(&redirect("http", Some("a b"), None)),
        "redirect host \"a b\" is not a host name"
    );
    assert_eq!(
        policy_reason(&redirect(
            "http",
            None,
            Some(PathChange::Full("relative".into()))
        )),
        "redirect path: \"relative\" is not an absolute path"
    );
    let mut policy = pool_policy("f");
    policy.filters.request_headers.set = vec![("Host".into(), "x".into())];
    assert_eq!(
        policy_reason(&policy),
        "request header change: Host may not be changed"
    );
    let mut policy = pool_policy("f");
    policy.filters.response_headers.add = vec![("bad name".into(), "x".into())];
    assert_eq!(
        policy_reason(&policy),
        "response header change: \"bad name\" is not a header name"
    );
    let mut policy = pool_policy("f");
    policy.filters.mirrors = vec![Mirror {
        pool: "m".into(),
        numerator: 3,
        denominator: 2,
    }];
    assert_eq!(
        policy_reason(&policy),
        "mirror to m: share 3/2 is not a fraction of 0 to 1"
    );
}

#[test]
fn a_prefix_change_replaces_the_matched_prefix_element_wise_and_keeps_the_query() {
    let change = |matched: &str, replacement: &str| PathChange::Prefix {
        matched: matched.into(),
        replacement: replacement.into(),
    };
    assert_eq!(change("/a", "/b").apply("/a/x"), "/b/x");
    assert_eq!(change("/a", "/b").apply("/a"), "/b");
    assert_eq!(change("/a", "/").apply("/a"), "/");
    assert_eq!(change("/a", "/").apply("/a/x"), "/x");
    assert_eq!(change("", "/p").apply("/x"), "/p/x");
    assert_eq!(
        change("/a", "/b").apply_to_target("/a/x", "/a/x?q=1"),
        "/b/x?q=1"
    );
    assert_eq!(
        PathChange::Full("/f".into()).apply_to_target("/a/x", "/a/x?q=1"),
        "/f?q=1"
    );
}
