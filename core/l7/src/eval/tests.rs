use super::*;
use crate::model::{Action, Listener, Policy, Rule};

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn matches(
    rule: &Rule,
    host: &str,
    path: &str,
    hs: &[(&str, &str)],
    cert: Option<&ClientCert>,
) -> bool {
    let hs = headers(hs);
    let request = Request {
        host,
        path,
        target: path,
        headers: &hs,
        client_cert: cert,
    };
    rule_matches(rule, compile_regex(rule).as_ref(), &request)
}

#[test]
fn host_is_lowercased_and_loses_its_port() {
    assert_eq!(
        normalize_host("Shop.Example.COM:8080").as_deref(),
        Some("shop.example.com")
    );
    assert_eq!(
        normalize_host("example.com.").as_deref(),
        Some("example.com")
    );
    assert_eq!(normalize_host("[::1]:443").as_deref(), Some("::1"));
    assert_eq!(normalize_host("::1").as_deref(), Some("::1"));
    assert_eq!(normalize_host(""), None);
    assert_eq!(normalize_host(":80"), None);
}

#[test]
fn path_drops_query_and_dot_segments_but_not_percent_escapes() {
    assert_eq!(normalize_path("/a/b?x=/c"), "/a/b");
    assert_eq!(normalize_path("/a/./b/../c"), "/a/c");
    assert_eq!(normalize_path("/a/b/.."), "/a/");
    assert_eq!(normalize_path("/../../etc"), "/etc");
    assert_eq!(normalize_path("/a%2Fb"), "/a%2Fb");
    assert_eq!(normalize_path("/foo/%2e%2e/bar"), "/foo/%2e%2e/bar");
    assert_eq!(normalize_path(""), "/");
    assert_eq!(normalize_path("/#frag"), "/");
}

#[test]
fn host_name_compares_case_insensitively() {
    let rule = Rule::new(RuleType::HostName, CompareType::EqualTo, "Shop.Example.com");
    assert!(matches(&rule, "shop.example.com", "/", &[], None));
    let rule = Rule::new(RuleType::HostName, CompareType::EndsWith, ".EXAMPLE.com");
    assert!(matches(&rule, "a.example.com", "/", &[], None));
    let rule = Rule::new(RuleType::HostName, CompareType::Regex, "^SHOP\\.");
    assert!(matches(&rule, "shop.example.com", "/", &[], None));
}

#[test]
fn path_compare_types() {
    let path = "/static/app.js";
    for (compare, value, expected) in [
        (CompareType::EqualTo, "/static/app.js", true),
        (CompareType::EqualTo, "/STATIC/app.js", false),
        (CompareType::StartsWith, "/stat", true),
        (CompareType::EndsWith, ".js", true),
        (CompareType::Contains, "tic/a", true),
        (CompareType::Regex, "^/static/[a-z]+\\.js$", true),
        (CompareType::Regex, "^/img", false),
    ] {
        let rule = Rule::new(RuleType::Path, compare, value);
        assert_eq!(matches(&rule, "h", path, &[], None), expected, "{rule}");
        assert_eq!(
            matches(&rule.clone().inverted(), "h", path, &[], None),
            !expected,
            "NOT {rule}"
        );
    }
}

#[test]
fn file_type_header_and_cookie() {
    let js = Rule::new(RuleType::FileType, CompareType::EqualTo, "js");
    assert!(matches(&js, "h", "/a/app.js", &[], None));
    assert!(!matches(&js, "h", "/a.js/app", &[], None));
    assert!(!matches(&js, "h", "/a/app", &[], None));
    let header = Rule::new(RuleType::Header, CompareType::EqualTo, "canary").with_key("X-Track");
    assert!(matches(&header, "h", "/", &[("x-track", "canary")], None));
    assert!(!matches(&header, "h", "/", &[], None));
    assert!(matches(&header.clone().inverted(), "h", "/", &[], None));
    let cookie = Rule::new(RuleType::Cookie, CompareType::EqualTo, "beta").with_key("group");
    assert!(matches(
        &cookie,
        "h",
        "/",
        &[("Cookie", "a=1; group=beta")],
        None
    ));
    assert!(!matches(
        &cookie,
        "h",
        "/",
        &[("Cookie", "groups=beta")],
        None
    ));
}

#[test]
fn ssl_rules_look_at_the_client_certificate() {
    let cert = ClientCert {
        verify_result: 0,
        subject: vec![("CN".into(), "alice".into())],
    };
    let has = Rule::new(RuleType::SslConnHasCert, CompareType::EqualTo, "True");
    assert!(matches(&has, "h", "/", &[], Some(&cert)));
    assert!(!matches(&has, "h", "/", &[], None));
    let verified = Rule::new(RuleType::SslVerifyResult, CompareType::EqualTo, "0");
    assert!(matches(&verified, "h", "/", &[], Some(&cert)));
    let cn = Rule::new(RuleType::SslDnField, CompareType::StartsWith, "ali").with_key("CN");
    assert!(matches(&cn, "h", "/", &[], Some(&cert)));
}

fn listener() -> Listener {
    let mut listener = Listener::new(404);
    let to = |pool: &str| Action::RedirectToPool { pool: pool.into() };
    let path = |v: &str| Rule::new(RuleType::Path, CompareType::StartsWith, v);
    listener
        .insert_policy(
            Policy::new(
                "api",
                to("api"),
                vec![
                    path("/api"),
                    Rule::new(RuleType::HostName, CompareType::EqualTo, "a.com"),
                ],
            ),
            None,
        )
        .unwrap();
    listener
        .insert_policy(Policy::new("empty", to("never"), vec![]), None)
        .unwrap();
    listener
        .insert_policy(
            Policy::new("deny", Action::Reject, vec![path("/admin")]),
            None,
        )
        .unwrap();
    listener
        .insert_policy(
            Policy::new(
                "moved",
                Action::RedirectPrefix {
                    prefix: "https://b.com/".into(),
                    code: 308,
                },
                vec![path("/old")],
            ),
            None,
        )
        .unwrap();
    listener
        .insert_policy(Policy::new("all", to("web"), vec![path("/")]), None)
        .unwrap();
    listener
}

fn evaluate(listener: &Listener, host: &str, target: &str) -> Outcome<'static> {
    let hs: Vec<(String, String)> = Vec::new();
    let path = normalize_path(target);
    let request = Request {
        host,
        path: &path,
        target,
        headers: &hs,
        client_cert: None,
    };
    match listener.evaluate(&request) {
        Outcome::Pool(p) => Outcome::Pool(p.to_owned().leak()),
        Outcome::Reject => Outcome::Reject,
        Outcome::Redirect { code, location } => Outcome::Redirect { code, location },
        Outcome::Status(s) => Outcome::Status(s),
    }
}

#[test]
fn first_match_in_position_order_with_rules_anded() {
    let listener = listener();
    assert_eq!(evaluate(&listener, "a.com", "/api/x"), Outcome::Pool("api"));
    // The host rule of "api" fails, so the rules being ANDed sends it further down.
    assert_eq!(evaluate(&listener, "b.com", "/api/x"), Outcome::Pool("web"));
    assert_eq!(evaluate(&listener, "b.com", "/admin"), Outcome::Reject);
    assert_eq!(
        evaluate(&listener, "b.com", "/old/page?q=1"),
        Outcome::Redirect {
            code: 308,
            location: "https://b.com/old/page?q=1".into()
        }
    );
}

#[test]
fn empty_policy_never_matches_and_no_match_falls_to_default() {
    let mut listener = Listener::new(404);
    listener
        .insert_policy(Policy::new("empty", Action::Reject, vec![]), None)
        .unwrap();
    assert_eq!(evaluate(&listener, "x", "/"), Outcome::Status(404));
    listener.default_pool = Some("fallback".into());
    assert_eq!(evaluate(&listener, "x", "/"), Outcome::Pool("fallback"));
    assert_eq!(
        evaluate(&Listener::default(), "x", "/"),
        Outcome::Status(503)
    );
}
