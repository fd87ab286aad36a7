use serde_json::json;

use super::*;
use crate::condition::ConditionStatus;

fn order(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

#[test]
fn keeps_everything_in_order() {
    let input = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "prod",
            "uid": "u-1",
            "resourceVersion": "42",
            "generation": 7,
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "deletionTimestamp": "2024-01-02T00:00:00.5+01:00",
            "labels": {"z": "1", "a": "2"},
            "annotations": {"nephio.org/prepare": "Postpone"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u-0", "controller": true}],
            "finalizers": ["f1"],
            "managedFields": [{"manager": "kubectl"}],
            "selfLink": "/x"
        },
        "zeta": 1,
        "spec": {"replicas": 3, "b": [1, {"c": null}], "a": "x"},
        "status": {"conditions": []},
        "alpha": true
    });
    let object = Object::from_json(input.clone()).unwrap();
    assert_eq!(object.gvk(), Gvk::new("apps", "v1", "Deployment"));
    assert_eq!(object.name(), Some("web"));
    assert_eq!(object.namespace(), Some("prod"));
    assert_eq!(object.metadata.details().generation, Some(7));
    assert_eq!(
        object.metadata.details().deletion_timestamp.as_deref(),
        Some("2024-01-02T00:00:00.5+01:00")
    );
    assert!(object.is_being_deleted());
    assert_eq!(
        object.metadata.details().extra.keys().collect::<Vec<_>>(),
        ["managedFields", "selfLink"]
    );
    assert_eq!(
        object.body.keys().collect::<Vec<_>>(),
        ["zeta", "spec", "status", "alpha"]
    );
    assert_eq!(order(&object.to_json()), order(&input));
    assert_eq!(serde_json::to_string(&object).unwrap(), order(&input));
    assert_eq!(serde_json::from_value::<Object>(input).unwrap(), object);
    assert_eq!(object.labels().keys().collect::<Vec<_>>(), ["z", "a"]);
    assert_eq!(
        object.controller_owner().map(|o| o.name.as_str()),
        Some("o")
    );
}

#[test]
fn missing_and_empty_metadata() {
    let object =
        Object::from_json(json!({"apiVersion": "v1", "kind": "List", "items": []})).unwrap();
    assert!(object.metadata.is_empty());
    assert_eq!(object.name(), None);
    assert_eq!(
        order(&object.to_json()),
        r#"{"apiVersion":"v1","kind":"List","items":[]}"#
    );
    let null =
        Object::from_json(json!({"apiVersion": "v1", "kind": "List", "metadata": null})).unwrap();
    assert!(null.metadata.is_empty());
}

#[test]
fn only_the_rare_fields_are_boxed() {
    let plain = Object::from_json(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "n", "labels": {"x": "1"}, "annotations": {"y": "2"}}
    }))
    .unwrap();
    assert!(plain.metadata.details.is_none(), "{plain:?}");
    let mut unboxed = plain.clone();
    unboxed.metadata.details = Some(Box::default());
    assert_eq!(unboxed, plain, "an empty box equals none");

    for (field, value) in [
        ("uid", json!("u-1")),
        ("generateName", json!("a-")),
        ("resourceVersion", json!("3")),
        ("finalizers", json!(["f"])),
        ("managedFields", json!([])),
    ] {
        let object = Object::from_json(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", field: value}
        }))
        .unwrap();
        let details = object.metadata.details.as_deref();
        assert!(
            details.is_some_and(|d| !d.is_empty()),
            "{field}: {object:?}"
        );
        assert_eq!(object.to_json()["metadata"][field], value, "{field}");
    }
}

#[test]
fn errors_name_the_problem() {
    let cases = [
        (
            json!([1]),
            "expected a mapping with apiVersion and kind, found a list",
        ),
        (json!({"kind": "Pod"}), "missing apiVersion (kind \"Pod\")"),
        (
            json!({"apiVersion": "v1"}),
            "missing kind (apiVersion \"v1\")",
        ),
        (
            json!({"apiVersion": 1, "kind": "Pod"}),
            "apiVersion must be a non-empty string, found 1",
        ),
        (
            json!({"apiVersion": "v1", "kind": ""}),
            "kind must be a non-empty string, found \"\"",
        ),
    ];
    for (input, message) in cases {
        assert_eq!(Object::from_json(input).unwrap_err().to_string(), message);
    }
    for metadata in [
        json!([]),
        json!({"name": 5}),
        json!({"labels": ["a"]}),
        json!({"labels": {"a": 1}}),
        json!({"generation": "x"}),
    ] {
        let err =
            Object::from_json(json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata}))
                .unwrap_err();
        assert!(matches!(err, ObjectError::BadMetadata { .. }), "{err}");
        assert!(err.to_string().starts_with("bad metadata"), "{err}");
    }
    let err = Object::from_json(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": 1}}}),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad metadata.labels.a in v1 Pod: invalid type: integer `1`, expected a string"
    );
    let err =
        Object::from_json(json!({"apiVersion": "v1", "kind": "Pod", "metadata": "x"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad metadata in v1 Pod: invalid type: string \"x\", expected struct ObjectMeta"
    );
}

#[test]
fn metadata_errors_name_the_entry_at_fault() {
    let field = |metadata: Value| match Object::from_json(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata}),
    ) {
        Err(ObjectError::BadMetadata { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let cases = [
        (json!({"labels": {"ok": "x", "app": 1}}), "labels.app"),
        (json!({"labels": {"app": true}}), "labels.app"),
        (json!({"labels": {"app": null}}), "labels.app"),
        (
            json!({"annotations": {"example.com/x": 1.5}}),
            "annotations[\"example.com/x\"]",
        ),
        (json!({"labels": ["a"]}), "labels"),
        (json!({"finalizers": ["a", 2]}), "finalizers[1]"),
        (json!({"finalizers": "a"}), "finalizers"),
        (
            json!({"ownerReferences": [{"apiVersion": "v1", "kind": "A", "name": "a", "uid": "u"}, {"name": "b"}]}),
            "ownerReferences[1]",
        ),
        (json!({"ownerReferences": {"name": "b"}}), "ownerReferences"),
        (json!({"generation": "5"}), "generation"),
        (json!({"generation": 1.5}), "generation"),
    ];
    for (metadata, want) in cases {
        assert_eq!(field(metadata.clone()).as_deref(), Some(want), "{metadata}");
    }
    let err = Object::from_json(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"app": 1}}}),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad metadata.labels.app in v1 Pod: invalid type: integer `1`, expected a string"
    );
}

#[test]
fn labels_annotations_and_finalizers() {
    let gvk = Gvk::new("", "v1", "ConfigMap");
    let mut object = Object::new(&gvk, "c")
        .with_namespace("ns")
        .with_label("a", "1")
        .with_label("b", "2");
    assert_eq!(object.set_label("a", "3"), Some("1".into()));
    assert_eq!(
        object.labels().iter().collect::<Vec<_>>(),
        [
            (&"a".to_string(), &"3".to_string()),
            (&"b".into(), &"2".into())
        ]
    );
    assert_eq!(object.remove_label("a"), Some("3".into()));
    assert_eq!(object.remove_label("zz"), None);
    assert!(object.annotations().is_empty());
    assert_eq!(object.annotation(crate::keys::PREPARED), None);
    object.set_annotation(crate::keys::PREPARED, "true");
    assert_eq!(object.annotation("nephio.org/prepared"), Some("true"));
    assert_eq!(
        object.remove_annotation("nephio.org/prepared"),
        Some("true".into())
    );
    assert!(object.add_finalizer("x"));
    assert!(!object.add_finalizer("x"));
    assert!(object.has_finalizer("x"));
    assert!(object.remove_finalizer("x"));
    assert!(!object.remove_finalizer("x"));
    object.set_name("d");
    object.set_namespace(None);
    assert_eq!(object.object_ref().to_string(), "v1 ConfigMap d");
    assert_eq!(object.label_value("b"), Some("2"));
}

#[test]
fn spec_and_status_views() {
    let mut object = Object::new(&Gvk::new("example.org", "v1", "Thing"), "t");
    assert_eq!(object.spec(), None);
    object.spec_mut().unwrap().insert("size".into(), json!(3));
    assert_eq!(object.spec(), Some(&json!({"size": 3})));
    object.body.insert("status", json!("broken")).unwrap();
    let err = object.status_mut().unwrap_err();
    assert_eq!(
        err.to_string(),
        "status of example.org/v1 Thing t is not a mapping"
    );
    assert!(object.conditions().is_err());
    assert!(!object.is_condition_true("Ready"));
}

#[test]
fn conditions_on_objects() {
    let mut object = Object::new(&Gvk::new("example.org", "v1", "Thing"), "t");
    assert_eq!(object.conditions().unwrap(), vec![]);
    assert!(
        object
            .set_condition(Condition::new("Ready", ConditionStatus::False), "t1")
            .unwrap()
    );
    assert!(
        !object
            .set_condition(Condition::new("Ready", ConditionStatus::False), "t2")
            .unwrap()
    );
    assert_eq!(
        object.status(),
        Some(
            &json!({"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "t1"}]})
        )
    );
    assert!(
        object
            .set_condition(Condition::new("Ready", ConditionStatus::True), "t3")
            .unwrap()
    );
    assert!(object.is_condition_true("Ready"));
    assert_eq!(
        object
            .condition("Ready")
            .unwrap()
            .unwrap()
            .last_transition_time
            .as_deref(),
        Some("t3")
    );
    object
        .status_mut()
        .unwrap()
        .insert("conditions".into(), json!([{"type": "Ready"}]));
    let err = object.conditions().unwrap_err();
    assert!(
        err.to_string()
            .starts_with("bad status.conditions in example.org/v1 Thing t: "),
        "{err}"
    );
}

#[test]
fn typed_round_trip_and_errors() {
    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Cm {
        api_version: String,
        kind: String,
        metadata: ObjectMeta,
        data: IndexMap<String, String>,
    }
    let object = Object::from_json(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})).unwrap();
    let typed: Cm = object.to_typed().unwrap();
    assert_eq!(typed.data["k"], "v");
    assert_eq!(Object::from_typed(&typed).unwrap(), object);

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Strict {
        spec: String,
    }
    let err = object.to_typed::<Strict>().unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot convert v1 ConfigMap c to "),
        "{err}"
    );
    let err = Object::from_typed(&json!({"kind": "X"})).unwrap_err();
    assert!(matches!(err, ObjectError::MissingApiVersion { .. }));
}

#[test]
fn owner_references() {
    let mut owner = Object::new(&Gvk::new("apps", "v1", "ReplicaSet"), "rs");
    owner.metadata.details_mut().uid = Some("u-9".into());
    let reference = owner.owner_reference(true);
    assert_eq!(reference.uid, "u-9");
    assert!(reference.is_controller());
    assert_eq!(reference.block_owner_deletion, Some(true));
    assert!(reference.refers_to(&owner.object_ref()));
    let plain = owner.owner_reference(false);
    assert_eq!(plain.controller, None);
}

#[test]
fn a_copy_changes_alone() {
    // Clones share the body until one of them changes it; every way of changing it must
    // leave the other copies as they were.
    let original = Object::from_json(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}, "extra": [1]}),
    )
    .unwrap();

    let mut edited = original.clone();
    edited.body.get_mut("data").unwrap()["k"] = json!("w");
    assert_eq!(edited.body["data"]["k"], "w");

    let mut inserted = original.clone();
    inserted.body.insert("more", json!(true)).unwrap();
    inserted.body.entry_mapping("spec").unwrap()["x"] = json!(1);

    let mut removed = original.clone();
    assert_eq!(removed.body.remove("extra"), Some(json!([1])));
    assert_eq!(removed.body.remove("absent"), None);
    assert_eq!(removed.body.get_mut("absent"), None);

    let mut every = original.clone();
    for value in every.body.values_mut() {
        *value = Value::Null;
    }

    let map = original.clone().body.into_map();
    assert_eq!(map.keys().collect::<Vec<_>>(), ["data", "extra"]);

    assert_eq!(original.body["data"]["k"], "v");
    assert_eq!(original.body["extra"], json!([1]));
    assert_eq!(original.body.len(), 2);
    assert_eq!(
        original.to_yaml(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\nextra:\n- 1\n"
    );
    assert_eq!(inserted.body.len(), 4);
    assert_eq!(removed.body.len(), 1);
    assert!(every.body.values().all(Value::is_null));
}

#[test]
fn a_copy_shares_the_body_until_it_changes() {
    let original = Object::from_json(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}),
    )
    .unwrap();
    let mut copy = original.clone();
    assert!(copy.body.shares_with(&original.body), "a copy shares");
    // Asking for, or removing, a key that is not there changes nothing: still shared.
    assert_eq!(copy.body.get_mut("absent"), None);
    assert_eq!(copy.body.remove("absent"), None);
    assert!(copy.body.shares_with(&original.body), "nothing changed");
    // The first change copies; later ones change the copy in place.
    copy.body.insert("more", json!(1)).unwrap();
    assert!(!copy.body.shares_with(&original.body), "changed: copied");
    let before = copy.clone();
    assert!(before.body.shares_with(&copy.body));
    drop(before);
    copy.body.insert("again", json!(2)).unwrap();
    let alone = copy.body.clone();
    assert!(alone.shares_with(&copy.body));
}
