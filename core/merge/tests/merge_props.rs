//! Property tests for the merge engine's invariants (issue 7):
//! merge is deterministic; merging the same package twice equals merging it once (Override and
//! Replace); resources of the target not named by the source are untouched and keep their
//! order; the annotation rewrite table holds for every input.

use std::collections::HashSet;

use nephrite_krm::{Gvk, Object, Package, keys};
use nephrite_merge::merge_package;
use nephrite_merge::preparation::rewrite_mode;
use proptest::prelude::*;
use serde_json::{Map, Value};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn mode() -> impl Strategy<Value = Option<&'static str>> {
    prop::option::of(prop_oneof![
        Just("Here"),
        Just("Postpone"),
        Just("Never"),
        Just(""),
        Just("Odd")
    ])
}

fn object(rename: bool) -> impl Strategy<Value = Object> {
    (
        prop_oneof![Just("ConfigMap"), Just("Tuning")],
        "[a-e]",
        value(),
        mode(),
        mode(),
        prop::option::of(prop_oneof![Just("Replace"), Just("Override")]),
        prop::option::of("[a-e]")
            .prop_filter("rename only in sources", move |r| rename || r.is_none()),
    )
        .prop_map(|(kind, name, spec, prepare, metadata, merge, rename)| {
            let gvk = if kind == "ConfigMap" {
                Gvk::new("", "v1", kind)
            } else {
                Gvk::new("example.org", "v1", kind)
            };
            let mut object = Object::new(&gvk, name);
            object
                .body
                .insert("spec".to_owned(), spec)
                .expect("spec is not reserved");
            if let Some(v) = prepare {
                object.set_annotation(keys::PREPARE, v);
            }
            if let Some(v) = metadata {
                object.set_annotation(keys::METADATA, v);
            }
            if let Some(v) = merge {
                object.set_annotation(keys::MERGE, v);
            }
            if let Some(v) = rename {
                object.set_annotation(keys::RENAME, v);
            }
            object
        })
}

fn package(rename: bool) -> impl Strategy<Value = Package> {
    prop::collection::vec(object(rename), 0..8).prop_map(Package::from)
}

/// A `Tuning` named `x` with optional labels, annotations, an unlisted metadata field,
/// finalizers, a spec and another body field — what an `Override` has to combine.
fn rich_object() -> impl Strategy<Value = Object> {
    // Annotations are never an empty mapping: the merge drops one it emptied.
    let strings =
        |least| prop::option::of(prop::collection::btree_map("[a-c]", "[a-z]{0,3}", least..3));
    (
        strings(0),
        strings(1),
        prop::option::of(value()),
        prop::option::of(prop::collection::vec("[a-z]{1,3}", 0..2)),
        value(),
        prop::option::of(value()),
    )
        .prop_map(|(labels, annotations, extra, finalizers, spec, data)| {
            let mut metadata = Map::new();
            metadata.insert("name".into(), "x".into());
            if let Some(labels) = labels {
                metadata.insert("labels".into(), serde_json::to_value(labels).unwrap());
            }
            if let Some(annotations) = annotations {
                metadata.insert(
                    "annotations".into(),
                    serde_json::to_value(annotations).unwrap(),
                );
            }
            if let Some(extra) = extra {
                metadata.insert("fieldManager".into(), extra);
            }
            if let Some(finalizers) = finalizers {
                metadata.insert("finalizers".into(), finalizers.into());
            }
            let mut object = Map::new();
            object.insert("apiVersion".into(), "example.org/v1".into());
            object.insert("kind".into(), "Tuning".into());
            object.insert("metadata".into(), Value::Object(metadata));
            object.insert("spec".into(), spec);
            if let Some(data) = data {
                object.insert("data".into(), data);
            }
            Object::from_json(Value::Object(object)).expect("a valid object")
        })
}

fn identity(object: &Object) -> (String, String, String) {
    (
        object.api_version.clone(),
        object.kind.clone(),
        object.name().unwrap_or_default().to_owned(),
    )
}

/// The merge as the module documentation states it, one source resource at a time with a
/// linear search and the JSON deep merge: the reference the indexed, in-place merge must equal.
fn reference_merge(target: &Package, source: &Package) -> Package {
    let mut out: Vec<Object> = target.objects().to_vec();
    for original in source.iter() {
        let mut object = original.clone();
        if let Some(name) = object.remove_annotation(keys::RENAME) {
            object.set_name(name);
        }
        let mode = object.remove_annotation(keys::MERGE);
        if object.annotations().is_empty() {
            object.metadata.annotations = None;
        }
        for key in [keys::PREPARE, keys::METADATA] {
            if let Some(new) = rewrite_mode(object.annotation(key)) {
                object.set_annotation(key, new);
            }
        }
        match out.iter().position(|o| identity(o) == identity(&object)) {
            None => out.push(object),
            Some(at) if mode.as_deref() == Some("Override") => {
                let mut json = out[at].to_json();
                nephrite_merge::merge::deep_merge(&mut json, object.to_json());
                out[at] = Object::from_json(json).expect("a valid object");
            }
            Some(at) => out[at] = object,
        }
    }
    Package::from(out)
}

proptest! {
    #[test]
    fn merge_equals_the_sequential_reference(target in package(false), source in package(true)) {
        let mut merged = target.clone();
        merge_package(&mut merged, &source, |_| false).unwrap();
        prop_assert_eq!(merged, reference_merge(&target, &source));
    }

    #[test]
    fn merge_is_deterministic(target in package(false), source in package(true)) {
        let mut a = target.clone();
        let mut b = target.clone();
        let ra = merge_package(&mut a, &source, |_| false).map(|r| (r.appended, r.replaced, r.overridden)).map_err(|e| e.to_string());
        let rb = merge_package(&mut b, &source, |_| false).map(|r| (r.appended, r.replaced, r.overridden)).map_err(|e| e.to_string());
        prop_assert_eq!(ra, rb);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn merging_twice_equals_merging_once(target in package(false), source in package(true)) {
        let mut once = target.clone();
        merge_package(&mut once, &source, |_| false).unwrap();
        let mut twice = once.clone();
        merge_package(&mut twice, &source, |_| false).unwrap();
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn untouched_resources_keep_content_and_order(target in package(false), source in package(true)) {
        let mut merged = target.clone();
        merge_package(&mut merged, &source, |_| false).unwrap();
        let named: HashSet<_> = source.iter().map(|o| {
            let mut id = identity(o);
            if let Some(rename) = o.annotation(keys::RENAME) { id.2 = rename.to_owned(); }
            id
        }).collect();
        let before: Vec<&Object> = target.iter().filter(|o| !named.contains(&identity(o))).collect();
        let after: Vec<&Object> = merged.iter().take(target.len()).filter(|o| !named.contains(&identity(o))).collect();
        prop_assert_eq!(before, after);
        // The target's resources keep their slots; new ones come after.
        prop_assert!(merged.len() >= target.len());
        for (old, new) in target.iter().zip(merged.iter()) {
            prop_assert_eq!(identity(old), identity(new));
        }
    }

    #[test]
    fn rewrite_table_holds_for_every_merged_resource(target in package(false), source in package(true)) {
        let mut merged = target.clone();
        merge_package(&mut merged, &source, |_| false).unwrap();
        // The last source resource of each identity decides the merged annotation when it sets one.
        for original in source.iter() {
            let mut id = identity(original);
            if let Some(rename) = original.annotation(keys::RENAME) { id.2 = rename.to_owned(); }
            let last = source.iter().rev().find(|o| {
                let mut other = identity(o);
                if let Some(rename) = o.annotation(keys::RENAME) { other.2 = rename.to_owned(); }
                other == id
            }).expect("itself");
            let result = merged.iter().find(|o| identity(o) == id).expect("merged resource present");
            for key in [keys::PREPARE, keys::METADATA] {
                if let Some(expected) = rewrite_mode(last.annotation(key)) {
                    prop_assert_eq!(result.annotation(key), Some(expected.as_str()));
                }
            }
            prop_assert_eq!(result.annotation(keys::RENAME), None);
            // The merge directive is consumed (a target's own one may remain under Override).
            if last.annotation(keys::MERGE) != Some("Override") {
                prop_assert_eq!(result.annotation(keys::MERGE), None);
            }
        }
    }

    #[test]
    fn override_equals_deep_merge_of_the_json_forms(base in rich_object(), over in rich_object()) {
        // What Override means: the JSON forms deep-merged (mappings merge, the rest replaces).
        let mut expected = base.to_json();
        nephrite_merge::merge::deep_merge(&mut expected, over.to_json());
        let expected = Object::from_json(expected).unwrap();
        let mut target = Package::from(vec![base]);
        let source = Package::from(vec![over.with_annotation(keys::MERGE, "Override")]);
        let report = merge_package(&mut target, &source, |_| false).unwrap();
        prop_assert_eq!(report.overridden, 1);
        prop_assert_eq!(target.objects(), &[expected][..]);
    }

    #[test]
    fn rewrite_mode_table(value in prop::option::of(".{0,8}")) {
        let out = rewrite_mode(value.as_deref());
        match value.as_deref() {
            None => prop_assert_eq!(out, None),
            Some("Here") | Some("") => prop_assert_eq!(out.as_deref(), Some("Never")),
            Some("Postpone") => prop_assert_eq!(out.as_deref(), Some("Here")),
            Some(other) => prop_assert_eq!(out.as_deref(), Some(other)),
        }
    }

    #[test]
    fn not_ready_leaves_target_untouched(target in package(false), source in package(true)) {
        prop_assume!(!source.is_empty());
        let mut merged = target.clone();
        let err = merge_package(&mut merged, &source, |o| o.kind == "Tuning");
        if source.iter().any(|o| o.kind == "Tuning") {
            prop_assert!(err.is_err_and(|e| e.is_not_ready()));
            prop_assert_eq!(merged, target);
        }
    }
}
