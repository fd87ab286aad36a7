//! Unit and property tests of name and metadata validation.

use proptest::prelude::*;

use super::*;
use crate::resources::builtins;

fn rt(plural: &str) -> ResourceType {
    builtins()
        .into_iter()
        .find(|t| t.plural == plural && t.group.is_empty())
        .unwrap_or_else(|| panic!("{plural} is built in"))
}

#[test]
fn rules_by_kind() {
    assert_eq!(NameRule::of(&rt("namespaces")), NameRule::Label);
    assert_eq!(NameRule::of(&rt("services")), NameRule::Dns1035Label);
    assert_eq!(NameRule::of(&rt("configmaps")), NameRule::Subdomain);
}

#[test]
fn names_kubernetes_refuses() {
    let sub = NameRule::Subdomain;
    for good in ["a", "a.b", "0-x.example.com", &"a".repeat(253)] {
        assert!(sub.problems(good).is_empty(), "{good}");
    }
    for bad in [
        "Bad_Name!",
        "",
        "-a",
        "a-",
        "a..b",
        ".",
        "..",
        "a/b",
        "a%b",
        "A",
    ] {
        assert!(!sub.problems(bad).is_empty(), "{bad}");
    }
    assert_eq!(
        sub.problems(&"a".repeat(254)),
        ["must be no more than 253 characters"]
    );
    assert_eq!(
        NameRule::Label.problems("a.b"),
        [LABEL_MSG.to_string()],
        "a Namespace name has no dots"
    );
    assert_eq!(NameRule::Label.problems(&"a".repeat(64)).len(), 1);
    assert!(NameRule::Label.problems("1abc").is_empty());
    assert_eq!(NameRule::Dns1035Label.problems("1abc"), [DNS1035_MSG]);
}

#[test]
fn label_and_annotation_problems_name_the_field() {
    let meta: ObjectMeta = serde_json::from_value(serde_json::json!({
        "labels": {"Bad Key": "v", "ok": "bad value!", "fine": ""},
        "annotations": {"Example.com/Mixed-Case": "allowed", "-bad": "x"},
    }))
    .unwrap_or_else(|e| panic!("fixture: {e}"));
    let problems = metadata_problems(&meta);
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["metadata.labels", "metadata.labels", "metadata.annotations"]
    );
    assert!(problems[0].problem.contains("\"Bad Key\""), "{problems:?}");
    assert!(
        problems[1].problem.contains("\"bad value!\""),
        "{problems:?}"
    );
    assert!(problems[2].problem.contains("\"-bad\""), "{problems:?}");
}

#[test]
fn finalizers_and_owner_references_are_checked() {
    let meta: ObjectMeta = serde_json::from_value(serde_json::json!({
        "finalizers": ["example.com/cleanup", "foregroundDeletion", "bad finalizer"],
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": ""},
        ],
    }))
    .unwrap_or_else(|e| panic!("fixture: {e}"));
    let fields: Vec<String> = metadata_problems(&meta)
        .into_iter()
        .map(|p| p.field)
        .collect();
    assert_eq!(
        fields,
        [
            "metadata.finalizers",
            "metadata.ownerReferences.name",
            "metadata.ownerReferences.uid"
        ]
    );
}

#[test]
fn annotations_are_limited_to_256_kib() {
    let meta: ObjectMeta = serde_json::from_value(serde_json::json!({
        "annotations": {"big": "x".repeat(MAX_ANNOTATIONS_BYTES)},
    }))
    .unwrap_or_else(|e| panic!("fixture: {e}"));
    assert_eq!(
        metadata_problems(&meta),
        [FieldProblem::new(
            "metadata.annotations",
            "Too long: must have at most 262144 bytes"
        )]
    );
}

proptest! {
    /// Every name of the subdomain grammar within 253 characters is accepted.
    #[test]
    fn subdomains_are_accepted(name in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?){0,5}") {
        prop_assert!(NameRule::Subdomain.problems(&name).is_empty());
    }

    /// A name with a character outside `[a-z0-9.-]` is refused under every rule.
    #[test]
    fn foreign_characters_are_refused(
        head in "[a-z0-9]{0,10}",
        bad in "[A-Z_!/% ~]",
        tail in "[a-z0-9]{0,10}",
    ) {
        let name = format!("{head}{bad}{tail}");
        for rule in [NameRule::Subdomain, NameRule::Label, NameRule::Dns1035Label] {
            prop_assert!(!rule.problems(&name).is_empty(), "{rule:?} {name}");
        }
    }

    /// Labels are subdomains without dots, and DNS-1035 labels are labels starting with a
    /// letter.
    #[test]
    fn rules_nest(name in "[a-z0-9.-]{1,70}") {
        let label = NameRule::Label.problems(&name).is_empty();
        let dns1035 = NameRule::Dns1035Label.problems(&name).is_empty();
        if dns1035 {
            prop_assert!(label);
        }
        if label {
            prop_assert!(NameRule::Subdomain.problems(&name).is_empty());
            prop_assert!(!name.contains('.'));
        }
    }
}
