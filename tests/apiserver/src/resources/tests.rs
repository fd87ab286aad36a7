//! Unit tests of version ordering and CRD parsing.

use super::*;

#[test]
fn versions_sort_like_kubernetes() {
    let mut v = vec![
        "v1alpha1", "v1", "v2beta1", "foo", "v2", "v1beta2", "v1beta1",
    ];
    v.sort_by_key(|s| version_priority(s));
    assert_eq!(
        v,
        vec![
            "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"
        ]
    );
}

#[test]
fn crd_name_must_match_plural_and_group() {
    let crd = json!({
        "metadata": {"name": "widget.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
    });
    let err = parse_crd(&crd).err().map(|e| e.field);
    assert_eq!(err.as_deref(), Some("metadata.name"));
}
