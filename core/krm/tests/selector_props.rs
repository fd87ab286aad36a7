//! Properties of label selectors: the string form round-trips, and matching agrees with a
//! reference evaluation written here independently (over the canonical string form).

use std::collections::{BTreeMap, HashMap};

use indexmap::IndexMap;
use nephrite_krm::{Gvk, LabelSelector, LabelSelectorRequirement, Object, SelectorOperator};
use proptest::prelude::*;

fn name_part() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9]([A-Za-z0-9._-]{0,6}[A-Za-z0-9])?",
        1 => Just("in".to_owned()),
        1 => Just("notin".to_owned()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    (
        proptest::option::of("[a-z0-9]([a-z0-9-]{0,4}[a-z0-9])?(\\.[a-z0-9]{1,4}){0,2}"),
        name_part(),
    )
        .prop_map(|(prefix, name)| match prefix {
            Some(prefix) => format!("{prefix}/{name}"),
            None => name,
        })
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![1 => Just(String::new()), 4 => name_part()]
}

fn requirement() -> impl Strategy<Value = LabelSelectorRequirement> {
    let values = || proptest::collection::vec(label_value(), 1..4);
    prop_oneof![
        (key(), values()).prop_map(|(k, v)| LabelSelectorRequirement::in_values(k, v)),
        (key(), values()).prop_map(|(k, v)| LabelSelectorRequirement::not_in(k, v)),
        key().prop_map(LabelSelectorRequirement::exists),
        key().prop_map(LabelSelectorRequirement::does_not_exist),
    ]
}

fn selector() -> impl Strategy<Value = LabelSelector> {
    (
        proptest::collection::vec((key(), label_value()), 0..4),
        proptest::collection::vec(requirement(), 0..5),
    )
        .prop_map(|(labels, expressions)| LabelSelector {
            match_labels: labels.into_iter().collect(),
            match_expressions: expressions,
        })
}

/// Selectors over a few keys and values, so that labels often hit them.
fn small_selector() -> impl Strategy<Value = LabelSelector> {
    let key = proptest::sample::select(vec!["a", "b", "x.io/c", "in"]).prop_map(str::to_owned);
    let value = proptest::sample::select(vec!["", "1", "2", "v"]).prop_map(str::to_owned);
    let op = proptest::sample::select(vec![
        SelectorOperator::In,
        SelectorOperator::NotIn,
        SelectorOperator::Exists,
        SelectorOperator::DoesNotExist,
    ]);
    let requirement = (
        key.clone(),
        op,
        proptest::collection::vec(value.clone(), 1..3),
    )
        .prop_map(|(key, operator, values)| {
            let values = match operator {
                SelectorOperator::In | SelectorOperator::NotIn => values,
                _ => Vec::new(),
            };
            LabelSelectorRequirement {
                key,
                operator,
                values,
            }
        });
    (
        proptest::collection::vec((key, value), 0..3),
        proptest::collection::vec(requirement, 0..4),
    )
        .prop_map(|(labels, expressions)| LabelSelector {
            match_labels: labels.into_iter().collect(),
            match_expressions: expressions,
        })
}

fn small_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    let key =
        proptest::sample::select(vec!["a", "b", "x.io/c", "in", "other"]).prop_map(str::to_owned);
    let value = proptest::sample::select(vec!["", "1", "2", "v", "w"]).prop_map(str::to_owned);
    proptest::collection::btree_map(key, value, 0..5)
}

/// The reference: split the canonical string into requirements and evaluate each by its text,
/// without using the library's parser or matcher.
fn reference_matches(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    let mut requirements = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                requirements.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !selector.is_empty() {
        requirements.push(current);
    }
    requirements.iter().all(|requirement| {
        let set = |text: &str| -> Vec<String> {
            let inner = text.trim().trim_start_matches('(').trim_end_matches(')');
            inner.split(',').map(str::to_owned).collect()
        };
        if let Some((key, rest)) = requirement.split_once(" notin ") {
            labels.get(key).is_none_or(|v| !set(rest).contains(v))
        } else if let Some((key, rest)) = requirement.split_once(" in ") {
            labels.get(key).is_some_and(|v| set(rest).contains(v))
        } else if let Some((key, value)) = requirement.split_once("!=") {
            labels.get(key).is_none_or(|v| v != value)
        } else if let Some((key, value)) = requirement.split_once('=') {
            labels.get(key).is_some_and(|v| v == value)
        } else if let Some(key) = requirement.strip_prefix('!') {
            !labels.contains_key(key)
        } else {
            labels.contains_key(requirement.as_str())
        }
    })
}

proptest! {
    #[test]
    fn structure_string_structure(selector in selector()) {
        prop_assert_eq!(selector.validate(), Ok(()));
        let text = selector.to_string();
        let parsed: LabelSelector = text.parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(&parsed, &selector, "{}", text);
        prop_assert_eq!(parsed.to_string(), text);
    }

    #[test]
    fn string_structure_string(
        selector in selector(),
        spaces in proptest::collection::vec(proptest::sample::select(vec!["", " ", "  ", "\t"]), 64),
    ) {
        // Re-space the canonical text and use `==` / `notin (x)` spellings: it must parse to a
        // selector whose canonical text equals the first one's.
        let canonical = selector.to_string();
        let mut spaced = String::new();
        let mut pads = spaces.iter().cycle();
        for c in canonical.chars() {
            if matches!(c, ',' | '(' | ')') {
                spaced.push_str(pads.next().copied().unwrap_or(""));
                spaced.push(c);
                spaced.push_str(pads.next().copied().unwrap_or(""));
            } else {
                spaced.push(c);
            }
        }
        let parsed: LabelSelector = spaced.parse().map_err(|e| TestCaseError::fail(format!("{spaced:?}: {e}")))?;
        prop_assert_eq!(parsed.to_string(), canonical.clone());
        let doubled = canonical.replacen('=', "==", 1);
        if !doubled.contains("!==") {
            let reparsed: LabelSelector = doubled.parse().map_err(|e| TestCaseError::fail(format!("{doubled:?}: {e}")))?;
            prop_assert_eq!(reparsed.to_string(), canonical);
        }
    }

    #[test]
    fn arbitrary_text_parses_or_errors_without_panicking(text in "[a-z0-9=!(), ./-]{0,24}|\\PC{0,16}") {
        if let Ok(selector) = text.parse::<LabelSelector>() {
            prop_assert_eq!(selector.validate(), Ok(()));
            let again: LabelSelector = selector.to_string().parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(again, selector);
        }
    }

    #[test]
    fn matching_agrees_with_reference(selector in small_selector(), labels in small_labels()) {
        let expected = reference_matches(&selector.to_string(), &labels);
        prop_assert_eq!(selector.matches(&labels), expected, "{} on {:?}", selector, labels);

        // Every way of holding labels gives the same answer.
        let index: IndexMap<String, String> = labels.clone().into_iter().collect();
        let hash: HashMap<String, String> = labels.clone().into_iter().collect();
        let mut object = Object::new(&Gvk::new("", "v1", "ConfigMap"), "c");
        for (k, v) in &labels {
            object.set_label(k.clone(), v.clone());
        }
        prop_assert_eq!(selector.matches(&index), expected);
        prop_assert_eq!(selector.matches(&hash), expected);
        prop_assert_eq!(selector.matches(&object), expected);
        // And the parsed canonical form matches the same way.
        let reparsed: LabelSelector = selector.to_string().parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(reparsed.matches(&labels), expected);
    }
}
