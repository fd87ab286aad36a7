use super::*;

fn password(project: ProjectScope) -> Credentials {
    Credentials::Password {
        auth_url: "http://keystone:5000/v3/".to_owned(),
        username: "kuryr".to_owned(),
        password: "s3cret".to_owned(),
        user_domain_name: "Default".to_owned(),
        project,
    }
}

#[test]
fn the_token_url_is_under_v3_whether_or_not_auth_url_names_it() {
    assert_eq!(
        token_url("http://k:5000/v3"),
        "http://k:5000/v3/auth/tokens"
    );
    assert_eq!(
        token_url("http://k:5000/v3/"),
        "http://k:5000/v3/auth/tokens"
    );
    assert_eq!(
        token_url("http://k/identity"),
        "http://k/identity/v3/auth/tokens"
    );
    let noauth = Credentials::NoAuth {
        project_id: "p".to_owned(),
    };
    assert_eq!(noauth.token_url(), None);
    assert_eq!(noauth.token_request(), None);
}

#[test]
fn a_password_request_names_user_domain_and_project_scope() {
    let by_name = password(ProjectScope::Name {
        name: "k8s".to_owned(),
        domain_name: "Default".to_owned(),
    });
    assert_eq!(
        by_name.token_request().unwrap(),
        json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "kuryr", "domain": {"name": "Default"}, "password": "s3cret"}}},
            "scope": {"project": {"name": "k8s", "domain": {"name": "Default"}}},
        }})
    );
    let by_id = password(ProjectScope::Id("0123".to_owned()));
    assert_eq!(
        by_id.token_request().unwrap()["auth"]["scope"],
        json!({"project": {"id": "0123"}})
    );
    assert_eq!(
        by_id.token_url().as_deref(),
        Some("http://keystone:5000/v3/auth/tokens")
    );
}

#[test]
fn an_application_credential_request_has_no_scope() {
    let credentials = Credentials::ApplicationCredential {
        auth_url: "http://k:5000".to_owned(),
        id: "ac1".to_owned(),
        secret: "x".to_owned(),
    };
    let request = credentials.token_request().unwrap();
    assert_eq!(
        request["auth"]["identity"],
        json!({"methods": ["application_credential"],
               "application_credential": {"id": "ac1", "secret": "x"}})
    );
    assert!(request["auth"].get("scope").is_none());
}

#[test]
fn secrets_stay_out_of_debug_output() {
    let shown = format!("{:?}", password(ProjectScope::Id("p".to_owned())));
    assert!(!shown.contains("s3cret"), "{shown}");
    let credential = Credentials::ApplicationCredential {
        auth_url: "u".to_owned(),
        id: "ac1".to_owned(),
        secret: "topsecret".to_owned(),
    };
    assert!(!format!("{credential:?}").contains("topsecret"));
}

const ANSWER: &str = r#"{"token": {"methods": ["password"], "expires_at": "2026-11-27T01:14:24.000000Z",
  "project": {"domain": {"id": "default", "name": "Default"}, "id": "e7b5", "name": "admin"},
  "catalog": [
    {"type": "network", "endpoints": [
      {"interface": "internal", "region_id": "RegionOne", "region": "RegionOne", "url": "http://n-int:9696"},
      {"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": "http://n:9696/"}]},
    {"type": "load-balancer", "endpoints": [
      {"interface": "public", "region_id": "RegionTwo", "url": "http://o2:9876"},
      {"interface": "public", "region_id": "RegionOne", "url": "http://o1:9876"}]}]}}"#;

#[test]
fn a_token_answer_gives_expiry_project_and_catalog_endpoints() {
    let token = parse_token("gAAAA".to_owned(), ANSWER).unwrap();
    assert_eq!(token.project_id, "e7b5");
    assert_eq!(
        token.expires_at,
        "2026-11-27T01:14:24Z".parse::<Timestamp>().unwrap()
    );
    assert_eq!(
        token.endpoint("network", "public", None).as_deref(),
        Some("http://n:9696")
    );
    assert_eq!(
        token.endpoint("network", "internal", None).as_deref(),
        Some("http://n-int:9696")
    );
    assert_eq!(
        token
            .endpoint("load-balancer", "public", Some("RegionOne"))
            .as_deref(),
        Some("http://o1:9876")
    );
    assert_eq!(token.endpoint("load-balancer", "admin", None), None);
    assert_eq!(token.endpoint("compute", "public", None), None);
    assert!(!format!("{token:?}").contains("gAAAA"));
}

#[test]
fn a_token_is_renewed_shortly_before_it_expires() {
    let token = parse_token("t".to_owned(), ANSWER).unwrap();
    let expiry = token.expires_at;
    assert!(!token.needs_renewal(expiry - SignedDuration::from_secs(600)));
    assert!(token.needs_renewal(expiry - SignedDuration::from_secs(60)));
    assert!(token.needs_renewal(expiry + SignedDuration::from_secs(1)));
}

#[test]
fn an_unscoped_or_malformed_answer_is_refused_with_the_reason() {
    let unscoped = r#"{"token": {"expires_at": "2026-11-27T01:14:24Z", "catalog": []}}"#;
    assert_eq!(
        parse_token("t".to_owned(), unscoped).unwrap_err(),
        "the token is not scoped to a project"
    );
    let bad_time = r#"{"token": {"expires_at": "tomorrow", "project": {"id": "p"}}}"#;
    assert!(
        parse_token("t".to_owned(), bad_time)
            .unwrap_err()
            .starts_with("expires_at \"tomorrow\"")
    );
    assert!(
        parse_token("t".to_owned(), "{}")
            .unwrap_err()
            .starts_with("not a token answer")
    );
}
