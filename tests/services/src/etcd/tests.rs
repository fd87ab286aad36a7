use super::*;

#[test]
fn a_health_body_is_true_only_when_it_says_so() {
    assert!(health_is_true("{\"health\":\"true\"}"));
    assert!(health_is_true("{\"health\": \"true\", \"reason\": \"\"}\n"));
    assert!(!health_is_true(
        "{\"health\":\"false\",\"reason\":\"RAFT NO LEADER\"}"
    ));
    assert!(!health_is_true(""));
}

#[test]
fn a_response_splits_into_status_and_body() {
    let response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\n{\"health\":\"false\"}";
    assert_eq!(
        parse_response(response),
        Some((503, "{\"health\":\"false\"}".to_owned()))
    );
    assert_eq!(parse_response("HTTP/1.1 200 OK\r\n"), None);
    assert_eq!(parse_response("garbage\r\n\r\n"), None);
}
