//! Unit tests of label and field selectors.

use super::*;
use serde_json::json;

fn obj(labels: Value) -> Object {
    Object::from_json(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns", "labels": labels}}))
    .unwrap_or_else(|e| panic!("fixture: {e}"))
}

#[test]
fn label_operators() {
    let o = obj(json!({"app": "web", "tier": "front"}));
    for (sel, want) in [
        ("", true),
        ("app=web", true),
        ("app==web", true),
        ("app!=web", false),
        ("app in (web, db)", true),
        ("app notin (web,db)", false),
        ("tier", true),
        ("!tier", false),
        ("!missing", true),
        ("missing!=x", true),
        ("app=web,tier in (back)", false),
        ("app in (db),tier", false),
    ] {
        let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
        assert_eq!(s.matches(&o), want, "{sel}");
    }
}

#[test]
fn label_parse_errors() {
    assert!(LabelSelector::parse("app in (a").is_err());
    assert!(LabelSelector::parse("a,,b").is_err());
    assert!(LabelSelector::parse("a b=c").is_err());
}

#[test]
fn field_selectors() {
    let o = obj(json!({}));
    let m = |s: &str| FieldSelector::parse(s).map(|f| f.matches(&o));
    assert_eq!(m("metadata.name=a"), Ok(true));
    assert_eq!(m("metadata.name!=a"), Ok(false));
    assert_eq!(m("metadata.namespace==ns,metadata.name=b"), Ok(false));
    assert_eq!(m("spec.nodeName="), Ok(true));
    assert!(m("metadata..name=a").is_err());
    assert!(m("nonsense").is_err());
}
