//! Unit tests of qualified names and label values, worded as Kubernetes words them.

use super::*;

#[test]
fn keys_as_kubernetes_words_them() {
    assert!(key_problems("app.kubernetes.io/name").is_empty());
    assert!(key_problems("My_Key.1").is_empty());
    assert_eq!(
        key_problems(""),
        vec![
            "name part must be non-empty".to_string(),
            format!("name part {NAME_MSG}")
        ]
    );
    assert_eq!(key_problems("/x"), vec!["prefix part must be non-empty"]);
    assert_eq!(
        key_problems("Bad/x"),
        vec![format!("prefix part {PREFIX_MSG}")]
    );
    assert!(key_problems("a/b/c")[0].starts_with("a valid label key must consist"));
    let long = "a".repeat(64);
    assert_eq!(
        key_problems(&long),
        vec!["name part must be no more than 63 bytes"]
    );
}

#[test]
fn values_as_kubernetes_words_them() {
    assert!(value_problems("").is_empty());
    assert!(value_problems("v1.2_x-y").is_empty());
    assert_eq!(value_problems("-a"), vec![VALUE_MSG]);
    assert_eq!(
        value_problems(&"a".repeat(64)),
        vec!["must be no more than 63 bytes"]
    );
}
