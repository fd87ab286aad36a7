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
