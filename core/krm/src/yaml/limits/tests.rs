use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn limits(depth: usize) -> YamlLimits {
    YamlLimits {
        max_depth: depth,
        ..YamlLimits::default()
    }
}

fn depth_error(text: &str, depth: usize) -> Option<(usize, usize)> {
    match limits(depth).check(text) {
        Ok(()) => None,
        Err(LimitError::TooDeep { line, column, .. }) => Some((line, column)),
        Err(other) => panic!("{other}"),
    }
}

#[test]
fn flow_and_block_nesting_count_up_to_the_limit() {
    assert_eq!(depth_error("a: [[1]]\n", 3), None);
    assert_eq!(depth_error("a: [[1]]\n", 2), Some((1, 5)));
    assert_eq!(depth_error("a: {b: {c: 1}}\n", 2), Some((1, 8)));
    // Block collections count by their indentation.
    let block = "a:\n  b:\n    c:\n      - 1\n";
    assert_eq!(depth_error(block, 4), None);
    assert_eq!(depth_error(block, 3), Some((4, 7)));
    // Siblings do not add up; closing a collection gives its level back.
    assert_eq!(
        depth_error("a: [[1], [2], {b: [3]}]\nc:\n  d: [[4]]\n", 4),
        None
    );
    assert_eq!(depth_error("a: [[1], [2], {b: [3]}]\n", 3), Some((1, 19)));
}

#[test]
fn brackets_inside_scalars_and_comments_are_not_collections() {
    let deep = "[".repeat(50);
    let cases = [
        format!("a: '{deep}'\n"),
        format!("a: \"{deep}\\\"{deep}\"\n"),
        format!("a: x{deep}\n"),
        format!("a: b # {deep}\n"),
        format!("# {deep}\na: 1\n"),
        format!("a: |\n  {deep}\n  {deep}\nb: 1\n"),
        format!("- a: >-\n    {deep}\n\n    {deep}\n"),
        format!("a: [x{}y]\n", "(".repeat(50)),
        format!("a: ['{deep}', \"{deep}\", it's]\n"),
        format!("a: !<tag:x,[[[]> 1\nb: 'it''s {deep}'\n"),
        format!("a: plain\n  continued {deep}\n"),
    ];
    for text in cases {
        assert_eq!(depth_error(&text, 3), None, "{text}");
    }
}

#[test]
fn hiding_collections_in_would_be_scalars_does_not_work() {
    let n = 20;
    let cases = [
        // A closing bracket inside a quoted string closes nothing.
        format!("a: {}1{}\n", "[\"]\", ".repeat(n), "]".repeat(n)),
        // A quote inside a plain scalar opens no string.
        format!("a: [it's, {}1{}, 'x']\n", "[".repeat(n), "]".repeat(n)),
        // A line separator (U+2028) ends a comment.
        format!("a: # c\u{2028}{}1{}\n", "[".repeat(n), "]".repeat(n)),
        // A block scalar's content is indented past its mapping's key, not past the line's `-`.
        format!("- a: |\n  b: {}1{}\n", "[".repeat(n), "]".repeat(n)),
        // A `#` inside a plain scalar starts no comment.
        format!("a: [x#y, {}1{}]\n", "[".repeat(n), "]".repeat(n)),
        // Neither does a tag end at a quote or hide what follows it.
        format!("a: [!x' {}1{}]\n", "[".repeat(n), "]".repeat(n)),
    ];
    for text in cases {
        assert!(depth_error(&text, 10).is_some(), "{text:?}");
    }
}

#[test]
fn a_document_over_the_size_limit_names_it() {
    let small = YamlLimits {
        max_document_bytes: 10,
        ..YamlLimits::default()
    };
    assert_eq!(small.check("a: 1234567"), Ok(()));
    let err = small.check("a: 12345678").unwrap_err();
    assert_eq!(
        err,
        LimitError::TooLarge {
            size: 11,
            limit: 10
        }
    );
    assert_eq!(
        err.to_string(),
        "the document is 11 bytes, over the limit of 10 bytes"
    );
    assert_eq!(err.position(), None);
}

/// A nested JSON value `depth` levels deep, with leaves that look like YAML syntax.
fn nested(depth: usize, leaves: &[String]) -> Value {
    let mut value = Value::String(leaves.first().cloned().unwrap_or_default());
    for level in 0..depth {
        value = if level % 2 == 0 {
            let mut items: Vec<Value> = leaves.iter().map(|s| json!(s)).collect();
            items.push(value);
            Value::Array(items)
        } else {
            json!({ leaves.get(level % leaves.len().max(1)).cloned().unwrap_or_default(): value })
        };
    }
    value
}

proptest! {
    // JSON is YAML flow syntax: its nesting is exactly what the check counts, whatever the
    // strings hold.
    #[test]
    fn json_documents_are_refused_exactly_past_the_limit(
        depth in 1usize..40,
        limit in 1usize..40,
        leaves in prop::collection::vec("[\\[\\]{}'\",#:!&*| a-z\\\\\u{2028}\u{85}]{0,8}", 1..4),
    ) {
        let text = serde_json::to_string(&nested(depth, &leaves)).unwrap();
        let refused = limits(limit).check(&text).is_err();
        prop_assert_eq!(refused, depth > limit, "{}", text);
    }

    #[test]
    fn the_check_never_panics(text in "[\\[\\]{}'\"#:!&*|>\\- \n\ta-z0-9\u{2028}]{0,200}") {
        let _ = limits(5).check(&text);
    }
}

/// How deep `value` nests: collections count one each, scalars none.
fn depth_of(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth_of).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth_of).max().unwrap_or(0),
        _ => 0,
    }
}

/// Writes `value` as YAML at `indent`: collections in flow style where `flow` says so (and
/// everything inside them), else in block style with every nested collection indented; a
/// comment full of brackets after each block entry.
fn write_mixed(
    out: &mut String,
    value: &Value,
    indent: usize,
    flow: &mut impl Iterator<Item = bool>,
) {
    let pad = " ".repeat(indent);
    let as_flow = |out: &mut String, value: &Value| out.push_str(&json_text(value));
    match value {
        Value::Array(items) if !items.is_empty() && !flow.next().unwrap_or(false) => {
            for item in items {
                out.push_str(&format!("{pad}- # ]]}}}}[[{{{{ '\n"));
                if depth_of(item) == 0 {
                    out.push_str(&format!("{pad}  "));
                    as_flow(out, item);
                    out.push('\n');
                } else {
                    write_mixed(out, item, indent + 2, flow);
                }
            }
        }
        Value::Object(map) if !map.is_empty() && !flow.next().unwrap_or(false) => {
            for (key, item) in map {
                out.push_str(&format!(
                    "{pad}{}: # ]]}}}}[[{{{{ \"\n",
                    json_text(&Value::from(key.as_str()))
                ));
                if depth_of(item) == 0 {
                    out.push_str(&format!("{pad}  "));
                    as_flow(out, item);
                    out.push('\n');
                } else {
                    write_mixed(out, item, indent + 2, flow);
                }
            }
        }
        _ => {
            out.push_str(&pad);
            as_flow(out, value);
            out.push('\n');
        }
    }
}

/// JSON text as YAML reads it back: a line separator inside a string is a line break to YAML
/// (folded into a space), so it is escaped.
fn json_text(value: &Value) -> String {
    serde_json::to_string(value)
        .unwrap()
        .replace('\u{2028}', "\\u2028")
}

fn tricky_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        "[\\[\\]{}'\",#:!&*|> a-z\\\\\u{2028}]{0,8}".prop_map(Value::String),
        any::<i32>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(12, 64, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z\\[\\]{}' #:]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    // Block and flow styles mixed, comments and strings full of YAML punctuation: the count is
    // the value's true nesting, so a document is refused exactly when it nests past the limit.
    #[test]
    fn mixed_documents_are_refused_exactly_past_the_limit(
        value in tricky_value(),
        styles in prop::collection::vec(any::<bool>(), 64),
        limit in 1usize..14,
    ) {
        let mut text = String::new();
        write_mixed(&mut text, &value, 0, &mut styles.into_iter());
        // The text reads back as the value (so it is the document we think it is).
        let read = crate::yaml::document_to_json(&text);
        prop_assert!(read.as_ref().is_ok_and(|v| *v == value), "{:?}\n{}", read, text);
        let refused = limits(limit).check(&text).is_err();
        prop_assert_eq!(refused, depth_of(&value) > limit, "{}", text);
    }
}
