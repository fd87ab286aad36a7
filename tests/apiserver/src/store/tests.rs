//! Unit tests of the store: resourceVersions, history, garbage collection chains, namespaces.

use super::*;
use crate::error::ApiError;
use crate::resources::{CRD_GROUP, CRD_PLURAL, ResourceType};
use crate::selector::{FieldSelector, LabelSelector};
use serde_json::Value;
use tokio::sync::mpsc;

fn rt(store: &Store, plural: &str) -> ResourceType {
    store
        .resolve("", "v1", plural)
        .unwrap_or_else(|| panic!("{plural} is built in"))
}

fn all() -> Filter {
    Filter {
        namespace: None,
        labels: LabelSelector::default(),
        fields: FieldSelector::default(),
    }
}

fn drain(rx: &mut mpsc::UnboundedReceiver<WatchItem>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while let Ok(item) = rx.try_recv() {
        match item {
            WatchItem::Event(ty, obj) => {
                out.push((ty.to_string(), obj.name().unwrap_or("").to_string()))
            }
            WatchItem::Bookmark { rv, .. } => out.push(("BOOKMARK".into(), rv.to_string())),
            WatchItem::Error(e) => out.push(("ERROR".into(), e.reason().to_string())),
            WatchItem::Close => out.push(("CLOSE".into(), String::new())),
        }
    }
    out
}

#[test]
fn resource_versions_are_global_and_increasing() -> Result<(), ApiError> {
    let mut s = Store::new(100);
    let cm = rt(&s, "configmaps");
    let secret = rt(&s, "secrets");
    let a = s.create(&cm, Some("default"), json!({"metadata": {"name": "a"}}))?;
    let b = s.create(&secret, Some("default"), json!({"metadata": {"name": "b"}}))?;
    let rv = |o: &Object| {
        o.metadata
            .details()
            .resource_version
            .as_deref()
            .and_then(|r| r.parse::<u64>().ok())
    };
    assert!(rv(&b) > rv(&a));
    assert_eq!(rv(&b), Some(s.current_rv()));
    Ok(())
}

#[test]
fn watch_replays_history_then_expires() -> Result<(), ApiError> {
    let mut s = Store::new(3);
    let cm = rt(&s, "configmaps");
    let start = s.current_rv();
    for n in ["a", "b"] {
        s.create(&cm, Some("default"), json!({"metadata": {"name": n}}))?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    s.watch(&cm, all(), WatchStart::After(start), false, tx);
    s.delete(&cm, Some("default"), "a", &DeleteOptions::default())?;
    assert_eq!(
        drain(&mut rx),
        [
            ("ADDED".to_string(), "a".to_string()),
            ("ADDED".into(), "b".into()),
            ("DELETED".into(), "a".into())
        ]
    );
    for n in ["c", "d", "e"] {
        s.create(&cm, Some("default"), json!({"metadata": {"name": n}}))?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    s.watch(&cm, all(), WatchStart::After(start), false, tx);
    assert_eq!(
        drain(&mut rx),
        [("ERROR".to_string(), "Expired".to_string())]
    );
    Ok(())
}

#[test]
fn garbage_collection_follows_chains() -> Result<(), ApiError> {
    let mut s = Store::new(100);
    let cm = rt(&s, "configmaps");
    let owned = |name: &str, owner: &Object| {
        json!({"metadata": {"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": owner.name(), "uid": owner.metadata.details().uid}
        ]}})
    };
    let root = s.create(&cm, Some("default"), json!({"metadata": {"name": "root"}}))?;
    let mid = s.create(&cm, Some("default"), owned("mid", &root))?;
    s.create(&cm, Some("default"), owned("leaf", &mid))?;
    s.delete(&cm, Some("default"), "root", &DeleteOptions::default())?;
    for n in ["root", "mid", "leaf"] {
        assert!(s.get(&cm, Some("default"), n).is_err(), "{n} collected");
    }
    // A dependent whose owner never existed is collected at once.
    let ghost = Object::from_json(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ghost", "uid": "no-such-uid"}}))
    .map_err(|e| ApiError::internal(e.to_string()))?;
    s.create(&cm, Some("default"), owned("orphan", &ghost))?;
    assert!(s.get(&cm, Some("default"), "orphan").is_err());
    Ok(())
}

#[test]
fn deleting_a_namespace_deletes_its_objects() -> Result<(), ApiError> {
    let mut s = Store::new(100);
    let ns = rt(&s, "namespaces");
    let cm = rt(&s, "configmaps");
    s.create(&ns, None, json!({"metadata": {"name": "team"}}))?;
    s.create(&cm, Some("team"), json!({"metadata": {"name": "a"}}))?;
    s.create(
        &cm,
        Some("team"),
        json!({"metadata": {"name": "held", "finalizers": ["x"]}}),
    )?;
    s.delete(&ns, None, "team", &DeleteOptions::default())?;
    assert!(s.get(&cm, Some("team"), "a").is_err());
    let held = s.get(&cm, Some("team"), "held")?;
    assert!(
        held.is_being_deleted(),
        "objects with finalizers wait for them"
    );
    let err = s
        .create(&cm, Some("team"), json!({"metadata": {"name": "b"}}))
        .err()
        .map(|e| e.code());
    assert_eq!(err, Some(404));
    Ok(())
}

#[test]
fn json_patch_null_test_on_missing_path() {
    let mut doc = json!({"metadata": {}});
    let ok = br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
    assert!(json_patch(&mut doc, ok).is_ok());
    assert_eq!(doc.pointer("/metadata/finalizers/0"), Some(&json!("f")));
    let fails = br#"[{"op":"test","path":"/metadata/finalizers","value":null}]"#;
    assert_eq!(
        json_patch(&mut doc, fails).err().map(|e| e.code()),
        Some(422)
    );
}

#[test]
fn json_patch_null_test_needs_a_json_pointer() {
    let mut doc = json!({"metadata": {"finalizers": ["f"]}});
    let bad = br#"[{"op":"test","path":"metadata/finalizers","value":null},{"op":"remove","path":"/metadata/finalizers"}]"#;
    let err = json_patch(&mut doc, bad).err();
    assert_eq!(err.as_ref().map(|e| e.code()), Some(400), "{err:?}");
    let missing = br#"[{"op":"test","value":null}]"#;
    assert_eq!(
        json_patch(&mut doc, missing).err().map(|e| e.code()),
        Some(400)
    );
    assert_eq!(doc.pointer("/metadata/finalizers/0"), Some(&json!("f")));
}

#[test]
fn crd_scope_and_kind_are_immutable_and_rewrites_are_no_ops() -> Result<(), ApiError> {
    let mut s = Store::new(100);
    let crds = s
        .resolve(CRD_GROUP, "v1", CRD_PLURAL)
        .ok_or_else(|| ApiError::internal("crds are built in"))?;
    let crd = |scope: &str, kind: &str| {
        json!({"metadata": {"name": "gadgets.example.com"}, "spec": {
            "group": "example.com", "scope": scope,
            "names": {"plural": "gadgets", "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true}]}})
    };
    let created = s.create(&crds, None, crd("Namespaced", "Gadget"))?;
    for (scope, kind, field) in [
        ("Cluster", "Gadget", "spec.scope"),
        ("Namespaced", "Gizmo", "spec.names.kind"),
    ] {
        let err = s
            .replace(
                &crds,
                None,
                "gadgets.example.com",
                crd(scope, kind),
                Subresource::Main,
                &WriteOptions::new(FieldValidation::Strict),
            )
            .err();
        assert_eq!(err.as_ref().map(|e| e.code()), Some(422), "{err:?}");
        assert!(err.is_some_and(|e| e.message().contains(field)));
    }
    // The same CRD again (a second apply, seconds later) changes nothing.
    let mut conditions = created.to_json().pointer("/status/conditions").cloned();
    if let Some(cs) = conditions.as_mut().and_then(Value::as_array_mut) {
        for c in cs {
            c["lastTransitionTime"] = json!("2000-01-01T00:00:00Z");
        }
    }
    let key = ObjectKey::new("", "gadgets.example.com");
    if let Some(status) = s
        .objects
        .get_mut(&crds.storage())
        .and_then(|m| m.get_mut(&key))
        .and_then(|stored| stored.body.get_mut("status"))
    {
        status["conditions"] = conditions.unwrap_or_default();
    }
    let rv = s.current_rv();
    let again = s
        .replace(
            &crds,
            None,
            "gadgets.example.com",
            crd("Namespaced", "Gadget"),
            Subresource::Main,
            &WriteOptions::new(FieldValidation::Strict),
        )?
        .object;
    assert_eq!(s.current_rv(), rv, "no write");
    assert_eq!(
        again
            .to_json()
            .pointer("/status/conditions/0/lastTransitionTime")
            .cloned(),
        Some(json!("2000-01-01T00:00:00Z"))
    );
    Ok(())
}

#[test]
fn remaining_item_count_only_without_selectors() -> Result<(), ApiError> {
    let mut s = Store::new(100);
    let cm = rt(&s, "configmaps");
    for n in ["a", "b", "c"] {
        s.create(
            &cm,
            Some("default"),
            json!({"metadata": {"name": n, "labels": {"x": "1"}}}),
        )?;
    }
    let page = s.list(&cm, &all(), Some(1), None)?;
    assert_eq!(
        page.pointer("/metadata/remainingItemCount"),
        Some(&json!(2))
    );
    let mut selected = all();
    selected.labels = LabelSelector::parse("x=1").map_err(ApiError::bad_request)?;
    let page = s.list(&cm, &selected, Some(1), None)?;
    assert!(page.pointer("/metadata/continue").is_some());
    assert_eq!(page.pointer("/metadata/remainingItemCount"), None);
    Ok(())
}

/// Decodes and applies a JSON patch, as a PATCH request does.
fn json_patch(doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    Patch::decode(PatchKind::Json, body)?.apply_to(doc)
}
