//! Unit tests of field ownership: field sets, update and apply bookkeeping, removals.

use super::*;
use serde_json::json;

fn manager(name: &str, operation: Operation) -> Manager {
    Manager {
        name: name.into(),
        operation,
        status: false,
    }
}

fn path(p: &str) -> FieldPath {
    p.split('.').map(str::to_string).collect()
}

#[test]
fn fields_are_leaves_with_lists_atomic_and_only_some_metadata() {
    let obj = json!({
        "apiVersion": "v1", "kind": "X",
        "metadata": {"name": "n", "uid": "u", "labels": {"a": "1"}, "finalizers": ["f"]},
        "spec": {"list": [1, 2], "empty": {}, "deep": {"x": {"y": null}}},
        "status": {"s": 1},
    });
    let all: Vec<FieldPath> = fields(&obj, Scope::All).into_iter().collect();
    let want: Vec<FieldPath> = [
        "metadata.finalizers",
        "metadata.labels.a",
        "spec.deep.x.y",
        "spec.empty",
        "spec.list",
        "status.s",
    ]
    .iter()
    .map(|p| path(p))
    .collect();
    assert_eq!(all, want);
    assert!(!fields(&obj, Scope::NoStatus).contains(&path("status.s")));
    assert_eq!(
        fields(&obj, Scope::StatusOnly)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![path("status.s")]
    );
}

#[test]
fn an_update_takes_changed_fields_from_everyone_else() {
    let mut m = ManagedFields::default();
    let old = json!({"data": {"a": "1", "b": "2"}});
    m.record_update(
        manager("x", Operation::Update),
        "v1",
        &Value::Null,
        &old,
        Scope::All,
    );
    let new = json!({"data": {"a": "1", "b": "3", "c": "4"}});
    m.record_update(
        manager("y", Operation::Update),
        "v1",
        &old,
        &new,
        Scope::All,
    );
    assert_eq!(m.owned_by("x"), [path("data.a")].into());
    assert_eq!(m.owned_by("y"), [path("data.b"), path("data.c")].into());
    // A removed field is no one's.
    let gone = json!({"data": {"a": "1"}});
    m.record_update(
        manager("z", Operation::Update),
        "v1",
        &new,
        &gone,
        Scope::All,
    );
    assert!(m.owned_by("y").is_empty());
    assert!(m.owned_by("z").is_empty());
}

#[test]
fn an_apply_removes_dropped_fields_and_prunes_emptied_parents() -> Result<(), String> {
    let mut m = ManagedFields::default();
    let a = manager("a", Operation::Apply);
    let live = json!({"spec": {"x": {"y": 1}, "z": 2}});
    let doc = m
        .apply(a.clone(), "v1", &json!({}), &live, Scope::All, false)
        .map_err(|c| format!("{c:?}"))?;
    assert_eq!(doc, live);
    let doc = m
        .apply(
            a.clone(),
            "v1",
            &doc,
            &json!({"spec": {"z": 2}}),
            Scope::All,
            false,
        )
        .map_err(|c| format!("{c:?}"))?;
    assert_eq!(doc, json!({"spec": {"z": 2}}));
    let doc = m
        .apply(a, "v1", &doc, &json!({}), Scope::All, false)
        .map_err(|c| format!("{c:?}"))?;
    assert_eq!(doc, json!({}));
    Ok(())
}

#[test]
fn a_dropped_field_another_manager_owns_stays() -> Result<(), String> {
    let mut m = ManagedFields::default();
    let live = json!({"spec": {"x": {"y": 1}}});
    m.record_update(
        manager("u", Operation::Update),
        "v1",
        &Value::Null,
        &live,
        Scope::All,
    );
    let a = manager("a", Operation::Apply);
    // Applying the same value shares the field; dropping it leaves it to u.
    let doc = m
        .apply(
            a.clone(),
            "v1",
            &live,
            &json!({"spec": {"x": {"y": 1}, "w": 3}}),
            Scope::All,
            false,
        )
        .map_err(|c| format!("{c:?}"))?;
    let doc = m
        .apply(a, "v1", &doc, &json!({}), Scope::All, false)
        .map_err(|c| format!("{c:?}"))?;
    assert_eq!(doc, json!({"spec": {"x": {"y": 1}}}));
    Ok(())
}

#[test]
fn a_changed_value_owned_by_another_conflicts_and_force_takes_it() {
    let mut m = ManagedFields::default();
    let live = json!({"spec": {"x": 1}});
    m.record_update(
        manager("u", Operation::Update),
        "v1",
        &Value::Null,
        &live,
        Scope::All,
    );
    let a = manager("a", Operation::Apply);
    let config = json!({"spec": {"x": 2}});
    let conflicts = m
        .apply(a.clone(), "v1", &live, &config, Scope::All, false)
        .err()
        .unwrap_or_default();
    assert_eq!(conflicts.len(), 1);
    let err = conflict_error(&conflicts);
    assert_eq!(err.code(), 409);
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"u\" using v1: .spec.x"
    );
    assert!(m.apply(a, "v1", &live, &config, Scope::All, true).is_ok());
    assert!(m.owned_by("u").is_empty());
    assert_eq!(m.owned_by("a"), [path("spec.x")].into());
}

#[test]
fn a_status_scope_apply_leaves_the_rest_alone() -> Result<(), String> {
    let mut m = ManagedFields::default();
    let live = json!({"spec": {"x": 1}});
    let doc = m
        .apply(
            manager("a", Operation::Apply),
            "v1",
            &live,
            &json!({"spec": {"x": 9}, "status": {"ok": true}}),
            Scope::StatusOnly,
            false,
        )
        .map_err(|c| format!("{c:?}"))?;
    assert_eq!(doc, json!({"spec": {"x": 1}, "status": {"ok": true}}));
    Ok(())
}
