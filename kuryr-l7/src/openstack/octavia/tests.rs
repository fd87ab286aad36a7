use super::*;

#[test]
fn only_octavias_immutable_refusal_is_waited_out() {
    let answer = |body: &str| Answer {
        method: Method::POST,
        url: "u".to_owned(),
        status: 409,
        body: body.to_owned(),
    };
    assert!(is_immutable(&answer(
        r#"{"faultcode": "Client", "faultstring": "Load Balancer 1 is immutable and cannot be updated.", "debuginfo": null}"#
    )));
    assert!(!is_immutable(&answer(
        r#"{"faultcode": "Client", "faultstring": "Duplicate member 10.0.0.1:80 in pool p", "debuginfo": null}"#
    )));
}

#[test]
fn new_objects_serialise_as_octavia_expects() {
    let rule = NewL7Rule {
        rule_type: "PATH".to_owned(),
        compare_type: "STARTS_WITH".to_owned(),
        value: "/api".to_owned(),
        ..NewL7Rule::default()
    };
    assert_eq!(
        serde_json::to_value(&rule).unwrap(),
        serde_json::json!({"type": "PATH", "compare_type": "STARTS_WITH", "value": "/api",
                           "invert": false})
    );
    let policy = NewL7Policy {
        name: "p".to_owned(),
        listener_id: "l".to_owned(),
        action: "REDIRECT_TO_POOL".to_owned(),
        redirect_pool_id: Some("pool".to_owned()),
        tags: vec!["kuryr-l7".to_owned()],
        ..NewL7Policy::default()
    };
    assert_eq!(
        serde_json::to_value(&policy).unwrap(),
        serde_json::json!({"name": "p", "listener_id": "l", "action": "REDIRECT_TO_POOL",
                           "redirect_pool_id": "pool", "tags": ["kuryr-l7"]})
    );
}

#[test]
fn statuses_parse_and_pending_ones_are_known() {
    let status: ProvisioningStatus = serde_json::from_str("\"PENDING_UPDATE\"").unwrap();
    assert!(status.is_pending());
    let active: ProvisioningStatus = serde_json::from_str("\"ACTIVE\"").unwrap();
    assert!(!active.is_pending());
    let error: ProvisioningStatus = serde_json::from_str("\"ERROR\"").unwrap();
    assert!(!error.is_pending());
}

#[test]
fn created_objects_are_read_back_at_their_own_path() {
    assert_eq!(
        collection_path("pools/p/members", &Method::POST, "m"),
        "pools/p/members/m"
    );
    assert_eq!(
        collection_path("l7policies/x", &Method::PUT, "x"),
        "l7policies/x"
    );
    assert_eq!(kind_name("l7policy"), "L7 policy");
}

#[test]
fn a_settle_reads_quickly_first_then_backs_off_to_its_poll() {
    let settle = Settle {
        poll: Duration::from_millis(100),
        timeout: Duration::from_secs(1),
    };
    let waits: Vec<u128> = settle.waits().take(5).map(|w| w.as_millis()).collect();
    assert_eq!(waits, [25, 50, 100, 100, 100]);
    // A poll shorter than the first wait is never exceeded.
    let tight = Settle {
        poll: Duration::from_millis(10),
        ..settle
    };
    let waits: Vec<u128> = tight.waits().take(3).map(|w| w.as_millis()).collect();
    assert_eq!(waits, [10, 10, 10]);
}
