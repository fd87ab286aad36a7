use nephrite_krm::{Gvk, Object, Package, keys};
use serde_json::json;

use super::*;

fn package(yaml: &str) -> Package {
    Package::from_yaml(yaml).expect("test YAML")
}

const TEMPLATE: &str = "\
apiVersion: example.org/v1
kind: Tuning
metadata: {name: tuning, labels: {tier: core}}
spec:
  workers: 2
  mode: fast
  limits: {cpu: 1, memory: 1Gi}
  zones: [a, b]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {level: info}
";

#[test]
fn default_replaces_the_whole_resource_in_place() {
    let mut target = package(TEMPLATE);
    let source = package(
        "apiVersion: example.org/v1\nkind: Tuning\nmetadata: {name: tuning}\nspec: {workers: 8}\n",
    );
    let report = merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(report.replaced, 1);
    assert_eq!(target.len(), 2);
    let tuning = &target.objects()[0];
    assert_eq!(tuning.spec(), Some(&json!({"workers": 8})));
    assert_eq!(tuning.label("tier"), None, "replace drops the old labels");
    assert_eq!(target.objects()[1].kind, "ConfigMap");
}

#[test]
fn override_merges_maps_and_replaces_lists_and_scalars() {
    let mut target = package(TEMPLATE);
    let source = package(
        "apiVersion: example.org/v1
kind: Tuning
metadata:
  name: tuning
  annotations: {nephio.org/merge: Override}
spec:
  workers: 8
  limits: {cpu: 4}
  zones: [c]
",
    );
    let report = merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(report.overridden, 1);
    let tuning = &target.objects()[0];
    assert_eq!(
        tuning.spec(),
        Some(
            &json!({"workers": 8, "mode": "fast", "limits": {"cpu": 4, "memory": "1Gi"}, "zones": ["c"]})
        )
    );
    assert_eq!(
        tuning.label("tier"),
        Some("core"),
        "override keeps other metadata"
    );
    assert_eq!(
        tuning.annotation(keys::MERGE),
        None,
        "the merge directive is dropped"
    );
}

#[test]
fn rename_picks_the_target_resource() {
    let mut target = package(TEMPLATE);
    let source = package(
        "apiVersion: example.org/v1
kind: Tuning
metadata:
  name: controller-tuning
  annotations: {nephio.org/rename: tuning, nephio.org/merge: Override}
spec: {workers: 8}
",
    );
    merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(target.len(), 2);
    let tuning = &target.objects()[0];
    assert_eq!(tuning.name(), Some("tuning"));
    assert_eq!(tuning.spec().unwrap()["workers"], 8);
    assert_eq!(tuning.annotation(keys::RENAME), None);
}

#[test]
fn absent_resources_are_appended_in_order() {
    let mut target = package(TEMPLATE);
    let source = package(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-2}\n",
    );
    let report = merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(report.appended, 2);
    let names: Vec<_> = target.iter().filter_map(Object::name).collect();
    assert_eq!(names, ["tuning", "settings", "extra-1", "extra-2"]);
}

#[test]
fn same_name_other_kind_is_a_different_resource() {
    let mut target = package(TEMPLATE);
    let source = package("apiVersion: example.org/v2\nkind: Tuning\nmetadata: {name: tuning}\n");
    let report = merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(report.appended, 1);
    assert_eq!(target.len(), 3);
}

#[test]
fn preparable_source_aborts_as_not_ready_and_changes_nothing() {
    let mut target = package(TEMPLATE);
    let before = target.clone();
    let source = package(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n---\napiVersion: topology.nephio.org/v1alpha1\nkind: Site\nmetadata: {name: hq}\n",
    );
    let err = merge_package(&mut target, &source, |o| o.kind == "Site").unwrap_err();
    assert!(err.is_not_ready());
    assert!(err.to_string().contains("Site hq"), "{err}");
    assert_eq!(target, before);
}

#[test]
fn annotations_are_rewritten_on_merged_resources_only() {
    let mut target = package(
        "apiVersion: topology.nephio.org/v1alpha1\nkind: Site\nmetadata:\n  name: own\n  annotations: {nephio.org/prepare: Here}\n",
    );
    let source = package(
        "apiVersion: topology.nephio.org/v1alpha1
kind: Site
metadata:
  name: later
  annotations: {nephio.org/prepare: Postpone}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Site
metadata:
  name: done
  annotations: {nephio.org/prepare: Here, nephio.org/metadata: Postpone}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain}
",
    );
    merge_package(&mut target, &source, |_| false).unwrap();
    let site = Gvk::new("topology.nephio.org", "v1alpha1", "Site");
    assert_eq!(
        target.get(&site, "own").unwrap().annotation(keys::PREPARE),
        Some("Here")
    );
    assert_eq!(
        target
            .get(&site, "later")
            .unwrap()
            .annotation(keys::PREPARE),
        Some("Here")
    );
    let done = target.get(&site, "done").unwrap();
    assert_eq!(done.annotation(keys::PREPARE), Some("Never"));
    assert_eq!(done.annotation(keys::METADATA), Some("Here"));
    let plain = target
        .get(&Gvk::new("", "v1", "ConfigMap"), "plain")
        .unwrap();
    assert_eq!(plain.annotation(keys::PREPARE), None, "absent stays absent");
}

#[test]
fn unknown_merge_mode_and_unnamed_are_errors() {
    let mut target = package(TEMPLATE);
    let bad = package(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations: {nephio.org/merge: Union}\n",
    );
    let err = merge_package(&mut target, &bad, |_| false).unwrap_err();
    assert!(matches!(err, MergeError::UnknownMergeMode { .. }), "{err}");
    assert!(err.to_string().contains("settings"));

    let unnamed = package("apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n");
    let err = merge_package(&mut target, &unnamed, |_| false).unwrap_err();
    assert!(matches!(err, MergeError::Unnamed { index: 0, .. }), "{err}");
}

#[test]
fn two_sources_with_one_identity_combine_in_order() {
    let mut target = package(TEMPLATE);
    let source = package(
        "apiVersion: v1
kind: ConfigMap
metadata: {name: new}
data: {a: '1'}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: new
  annotations: {nephio.org/merge: Override}
data: {b: '2'}
",
    );
    merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(target.len(), 3);
    let new = target.get(&Gvk::new("", "v1", "ConfigMap"), "new").unwrap();
    assert_eq!(new.body.get("data"), Some(&json!({"a": "1", "b": "2"})));
}

#[test]
fn a_target_identity_held_twice_merges_into_the_first() {
    let mut target = package(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\ndata: {at: first}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\ndata: {at: second}\n",
    );
    let source =
        package("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice}\ndata: {at: merged}\n");
    let report = merge_package(&mut target, &source, |_| false).unwrap();
    assert_eq!(report.replaced, 1);
    let data: Vec<_> = target.iter().map(|o| o.body.get("data").cloned()).collect();
    assert_eq!(
        data,
        [Some(json!({"at": "merged"})), Some(json!({"at": "second"}))]
    );
}

#[test]
fn deep_merge_rules() {
    let mut base = json!({"a": {"b": 1, "c": [1, 2]}, "d": "x"});
    deep_merge(
        &mut base,
        json!({"a": {"c": [3], "e": null}, "d": {"f": 1}}),
    );
    assert_eq!(
        base,
        json!({"a": {"b": 1, "c": [3], "e": null}, "d": {"f": 1}})
    );
}

#[test]
fn slot_index_keeps_identities_with_one_hash_apart() {
    /// Every identity hashes alike, as if all of them collided.
    #[derive(Default)]
    struct Collide;
    impl std::hash::Hasher for Collide {
        fn write(&mut self, _: &[u8]) {}
        fn finish(&self) -> u64 {
            7
        }
    }
    let a = ("example.org", "v1", "Tuning", "a");
    let b = ("example.org", "v1", "Tuning", "b");
    let mut slots =
        SlotIndex::with_capacity_and_hasher(1, std::hash::BuildHasherDefault::<Collide>::default());
    assert_eq!(slots.slot_of(a), 0);
    assert_eq!(slots.slot_of(a), 0);
    assert_eq!(slots.get(&b), None, "a collision is not a match");
    assert_eq!(slots.slot_of(b), 1);
    assert_eq!(slots.slot_of(b), 1);
    assert_eq!(slots.get(&b), Some(1));
    assert_eq!(slots.get(&a), Some(0));
    assert_eq!(slots.get(&("example.org", "v1", "Tuning", "c")), None);
}
