use std::time::Duration;

use super::*;

#[test]
fn errors_are_classified_by_status() {
    let body = r#"{"source":"carbide","message":"Error validating request data","data":{"name":"A value is required"}}"#;
    match ApiError::from_answer("POST vpc", 400, body) {
        ApiError::Rejected { message, data, .. } => {
            assert_eq!(message, "Error validating request data");
            assert_eq!(
                data,
                Some(serde_json::json!({"name": "A value is required"}))
            );
        }
        other => panic!("{other:?}"),
    }
    for status in [429, 502, 503, 504] {
        assert!(
            ApiError::from_answer("GET vpc", status, "").is_transient(),
            "{status}"
        );
    }
    assert!(!ApiError::from_answer("GET vpc", 500, "").is_transient());
    assert!(ApiError::from_answer("GET vpc/{id}", 404, "").is_not_found());
    assert!(matches!(
        ApiError::from_answer("GET vpc", 401, "{}"),
        ApiError::Auth { status: 401, .. }
    ));
    assert!(matches!(
        ApiError::from_answer("GET vpc", 403, "{}"),
        ApiError::Auth { status: 403, .. }
    ));
    let conflict = ApiError::from_answer(
        "POST vpc",
        409,
        r#"{"source":"carbide","message":"exists","data":{"id":"v-1"}}"#,
    );
    assert!(
        matches!(conflict, ApiError::Conflict { existing_id: Some(ref id), .. } if id == "v-1"),
        "{conflict:?}"
    );
}

#[test]
fn backoff_grows_is_jittered_and_capped_at_60s() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.cap, Duration::from_secs(60));
    assert_eq!(policy.delay(0, 0.0), Duration::from_millis(100));
    assert_eq!(policy.delay(0, 1.0), Duration::from_millis(200));
    assert_eq!(policy.delay(3, 1.0), Duration::from_millis(1600));
    for attempt in 0..40 {
        for unit in [0.0, 0.3, 0.99] {
            let d = policy.delay(attempt, unit);
            assert!(d <= Duration::from_secs(60), "{attempt}: {d:?}");
            assert!(d >= policy.delay(attempt, 0.0));
        }
    }
    assert!(policy.delay(20, 0.0) >= Duration::from_secs(30));
}

#[test]
fn the_token_is_never_printed() {
    let token = Token::new("eyJhbGciOiJIUzI1NiJ9.secret.sig\n");
    assert_eq!(token.expose(), "eyJhbGciOiJIUzI1NiJ9.secret.sig");
    let config = ClientConfig::new("http://127.0.0.1:1", "org", token);
    let shown = format!(
        "{config:?} {:?}",
        BmmClient::new(config.clone()).expect("client")
    );
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("<redacted>"));
}

#[test]
fn endpoint_and_org_are_checked() {
    let token = Token::new("t");
    let bad = BmmClient::new(ClientConfig::new("127.0.0.1:80", "org", token.clone()))
        .expect_err("no scheme");
    assert!(bad.to_string().contains("127.0.0.1:80"), "{bad}");
    assert!(BmmClient::new(ClientConfig::new("http://h", "", token.clone())).is_err());
    let ok = BmmClient::new(ClientConfig::new("https://bmm.example/", "acme", token)).expect("ok");
    assert_eq!(ok.base_url(), "https://bmm.example/v2/org/acme/carbide");
}
