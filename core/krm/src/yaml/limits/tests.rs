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
