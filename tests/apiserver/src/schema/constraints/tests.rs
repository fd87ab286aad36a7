//! Unit tests of the value constraints.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn fields(schema: Value, spec: Value) -> Vec<String> {
    let schema = json!({"type": "object", "properties": {"spec": schema}});
    let patterns = crate::schema::compile_patterns(&schema, "").expect("patterns compile");
    violations(&schema, &patterns, &json!({"spec": spec}))
        .into_iter()
        .map(|p| format!("{}: {}", p.field, p.problem))
        .collect()
}

#[test]
fn formats_follow_their_definitions() {
    for (format, good, bad) in [
        ("ipv4", "10.1.2.3", "10.1.2.256"),
        ("ipv6", "fd00::1", "fd00:::1"),
        ("cidr", "fd00::/64", "10.0.0.0"),
        ("mac", "02:42:ac:11:00:02", "02:42:ac:11:00"),
        (
            "uuid",
            "123e4567-e89b-12d3-a456-426614174000",
            "123e4567e89b",
        ),
        ("hostname", "api.example.com", "-api.example.com"),
        ("date", "2026-11-22", "2026-13-01"),
        ("date-time", "2026-11-22T17:00:00Z", "yesterday"),
        ("byte", "aGVsbG8=", "not base64!"),
        ("uri", "https://example.com/x", "example dot com"),
        ("email", "ops@example.com", "ops"),
    ] {
        assert!(format_ok(format, good), "{format} refuses {good:?}");
        assert!(!format_ok(format, bad), "{format} accepts {bad:?}");
    }
    assert!(format_ok("int-or-anything-unknown", "whatever"));
}

#[test]
fn types_integers_are_numbers_and_null_is_not_checked() {
    let schema = json!({"type": "object", "properties": {
        "ratio": {"type": "number"}, "count": {"type": "integer"}, "name": {"type": "string"},
    }});
    assert!(
        fields(
            schema.clone(),
            json!({"ratio": 1, "count": 2, "name": null})
        )
        .is_empty()
    );
    assert_eq!(
        fields(schema, json!({"ratio": "1", "count": 2.5})),
        [
            "spec.ratio: Invalid value: \"1\": spec.ratio in body must be of type number: \"string\"",
            "spec.count: Invalid value: 2.5: spec.count in body must be of type integer: \"number\"",
        ]
    );
}

#[test]
fn nested_items_and_additional_properties_are_checked() {
    let schema = json!({"type": "object", "properties": {
        "rules": {"type": "array", "uniqueItems": true, "items": {"type": "object", "properties": {
            "direction": {"type": "string", "enum": ["INGRESS", "EGRESS"]},
        }}},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
    }});
    let got = fields(
        schema,
        json!({"rules": [{"direction": "IN"}, {"direction": "IN"}], "labels": {"a": "long"}}),
    );
    assert_eq!(
        got,
        [
            "spec.rules[1]: Duplicate value: {\"direction\":\"IN\"}",
            "spec.rules[0].direction: Unsupported value: \"IN\": supported values: \"INGRESS\", \"EGRESS\"",
            "spec.rules[1].direction: Unsupported value: \"IN\": supported values: \"INGRESS\", \"EGRESS\"",
            "spec.labels.a: Too long: may not be longer than 3",
        ]
    );
}

#[test]
fn exclusive_bounds_and_multiples() {
    let schema = json!({"type": "object", "properties": {
        "p": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "multipleOf": 2},
    }});
    assert_eq!(
        fields(schema.clone(), json!({"p": 0})),
        ["spec.p: Invalid value: 0: spec.p in body should be greater than 0"]
    );
    assert_eq!(
        fields(schema.clone(), json!({"p": 3})),
        ["spec.p: Invalid value: 3: spec.p in body should be a multiple of 2"]
    );
    assert!(fields(schema, json!({"p": 4})).is_empty());
}

proptest! {
    /// A value inside every constraint is never refused; one outside a bound always is.
    #[test]
    fn bounds_split_values_exactly(min in -50i64..50, span in 0i64..50, x in -200i64..200) {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": min, "maximum": min + span},
        }});
        let got = fields(schema, json!({"n": x}));
        prop_assert_eq!(got.is_empty(), (min..=min + span).contains(&x), "{:?}", got);
    }

    /// Every CIDR Rust formats is accepted; a prefix past the address width never is.
    #[test]
    fn cidrs_round_trip(a in any::<[u8; 4]>(), bits in 0u8..=40) {
        let cidr = format!("{}/{bits}", std::net::Ipv4Addr::from(a));
        prop_assert_eq!(format_ok("cidr", &cidr), bits <= 32);
    }
}
