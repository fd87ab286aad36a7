//! Unit tests of the schema walk.

use super::*;
use serde_json::json;

#[test]
fn checks_present_nested_objects_only() {
    let schema = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "ports": {"type": "array", "items": {"type": "object", "required": ["port"]}},
                "extra": {"type": "object", "required": ["x"]},
            }},
        },
    });
    assert_eq!(
        missing_required(&schema, &json!({})),
        vec!["spec".to_string()]
    );
    assert_eq!(
        missing_required(&schema, &json!({"spec": {}})),
        vec!["spec.size".to_string()]
    );
    assert_eq!(
        missing_required(&schema, &json!({"spec": {"size": 1}})),
        Vec::<String>::new()
    );
    assert_eq!(
        missing_required(
            &schema,
            &json!({"spec": {"size": 1, "ports": [{"port": 1}, {}]}})
        ),
        vec!["spec.ports[1].port".to_string()]
    );
}

#[test]
fn prunes_what_the_schema_does_not_declare() {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "parts": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"typed": {"type": "object", "properties": {}}}},
                "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "properties": {"spec": {"type": "object"}}},
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    });
    let mut body = json!({
        "spec": {
            "size": 1, "foo": 2,
            "parts": [{"id": 1, "x": 1}, {"id": 2}],
            "labels": {"a": "b"},
            "free": {"anything": {"deep": 1}, "typed": {"gone": 1}},
            "embedded": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                         "spec": {"gone": true}, "data": {}},
        },
        "status": {"whatever": [1]},
        "extra": "top",
    });
    let pruned = prune(&schema, &mut body);
    assert_eq!(
        pruned,
        [
            "spec.foo",
            "spec.parts[0].x",
            "spec.free.typed.gone",
            "spec.embedded.spec.gone",
            "spec.embedded.data",
            "extra",
        ]
    );
    assert_eq!(
        body,
        json!({
            "spec": {
                "size": 1,
                "parts": [{"id": 1}, {"id": 2}],
                "labels": {"a": "b"},
                "free": {"anything": {"deep": 1}, "typed": {}},
                "embedded": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "spec": {}},
            },
            "status": {"whatever": [1]},
        })
    );
}

#[test]
fn an_object_without_properties_keeps_nothing() {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"parts": {"type": "array", "items": {"type": "object"}}}},
    }});
    let mut body = json!({"spec": {"parts": [{"id": 1}]}});
    assert_eq!(prune(&schema, &mut body), ["spec.parts[0].id"]);
    assert_eq!(body, json!({"spec": {"parts": [{}]}}));
}

fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let key = prop::sample::select(vec!["size", "foo", "parts", "id", "x", "free", "spec"]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(key.clone(), inner, 0..5).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn fixture_schema() -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "parts": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }},
    }})
}

proptest::proptest! {
    /// Pruning is idempotent, reports only paths under what it was given, never touches a
    /// declared scalar or a subtree that preserves unknown fields.
    #[test]
    fn pruning_is_idempotent_and_keeps_declared_fields(spec in arb_json()) {
        let schema = fixture_schema();
        let mut body = json!({"spec": spec.clone()});
        let pruned = prune(&schema, &mut body);
        proptest::prop_assert!(prune(&schema, &mut body.clone()).is_empty());
        for path in &pruned {
            proptest::prop_assert!(path.starts_with("spec"), "{path}");
        }
        if let Some(size) = spec.get("size").filter(|v| !v.is_object() && !v.is_array()) {
            proptest::prop_assert_eq!(body.pointer("/spec/size"), Some(size));
        }
        if let Some(free) = spec.get("free").filter(|v| v.is_object()) {
            proptest::prop_assert_eq!(body.pointer("/spec/free"), Some(free));
        }
        if !spec.is_object() {
            proptest::prop_assert!(pruned.is_empty() || spec.is_array());
        }
    }
}

#[test]
fn finds_the_first_pattern_that_does_not_compile() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ok": {"type": "string", "pattern": "^a+$"},
        "list": {"type": "array", "items": {"type": "string", "pattern": "(unclosed"}},
    }}}});
    assert_eq!(
        compile_patterns(&schema, "root").err(),
        Some((
            "root.properties[spec].properties[list].items.pattern".to_string(),
            "(unclosed".to_string()
        ))
    );
    let patterns = compile_patterns(&json!({"pattern": "^ok$"}), "root").expect("compiles");
    assert!(patterns.is_match("^ok$", "ok"));
    assert!(!patterns.is_match("^ok$", "not ok"));
    // Compiled once, shared by clones.
    assert_eq!(patterns, patterns.clone());
    assert_ne!(patterns, Patterns::default());
}
