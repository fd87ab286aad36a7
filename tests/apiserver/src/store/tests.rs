//! Unit tests of the store: resourceVersions, history, garbage collection chains, namespaces.

use super::*;
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
            WatchItem::Event(ty, obj) => out.push((
                ty.to_string(),
                meta_str(&obj, "name").unwrap_or("").to_string(),
            )),
            WatchItem::Bookmark { rv, .. } => out.push(("BOOKMARK".into(), rv.to_string())),
            WatchItem::Error(e) => out.push(("ERROR".into(), e.reason)),
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
    let rv = |o: &Value| meta_str(o, "resourceVersion").and_then(|r| r.parse::<u64>().ok());
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
    let owned = |name: &str, owner: &Value| {
        json!({"metadata": {"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": meta_str(owner, "name"), "uid": meta_str(owner, "uid")}
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
    let ghost = json!({"metadata": {"name": "ghost", "uid": "no-such-uid"}});
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
        is_terminating(&held),
        "objects with finalizers wait for them"
    );
    let err = s
        .create(&cm, Some("team"), json!({"metadata": {"name": "b"}}))
        .err()
        .map(|e| e.code);
    assert_eq!(err, Some(404));
    Ok(())
}

#[test]
fn json_patch_null_test_on_missing_path() {
    let mut doc = json!({"metadata": {}});
    let ok = br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
    assert!(apply_json_patch(&mut doc, ok).is_ok());
    assert_eq!(doc.pointer("/metadata/finalizers/0"), Some(&json!("f")));
    let fails = br#"[{"op":"test","path":"/metadata/finalizers","value":null}]"#;
    assert_eq!(
        apply_json_patch(&mut doc, fails).err().map(|e| e.code),
        Some(422)
    );
}
