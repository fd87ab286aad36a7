use super::*;
use crate::fixture;
use nephrite_krm::Gvk;

fn revision(name: &str, repo: &str, package: &str, revision: &str, lifecycle: &str) -> Object {
    let mut object = Object::new(
        &Gvk::new("porch.kpt.dev", "v1alpha1", "PackageRevision"),
        name,
    )
    .with_namespace("default")
    .with_label("nf-deployment-name", "core");
    let spec = object.spec_mut().unwrap();
    spec.insert("repository".into(), json!(repo));
    spec.insert("packageName".into(), json!(package));
    spec.insert("workspaceName".into(), json!(format!("ws-{revision}")));
    spec.insert("revision".into(), json!(revision));
    spec.insert("lifecycle".into(), json!(lifecycle));
    object
}

fn views(objects: &[Object]) -> Vec<RevisionView> {
    objects.iter().filter_map(RevisionView::read).collect()
}

#[test]
fn package_variant_set_shape() {
    let plan = fixture::planned();
    let pvs = package_variant_set(&plan, 0).unwrap().to_json();
    assert_eq!(pvs["apiVersion"], "config.porch.kpt.dev/v1alpha2");
    assert_eq!(pvs["metadata"]["name"], "core-upf-a");
    assert_eq!(
        pvs["spec"]["upstream"],
        json!({"repo": "catalog", "package": "free5gc-upf", "revision": 3})
    );
    assert_eq!(
        pvs["spec"]["targets"],
        json!([{"repositories": [{"name": "edge-1", "packageNames": ["upf-a"]},
                                 {"name": "edge-2", "packageNames": ["upf-a"]}]}])
    );
    let template = &pvs["spec"]["template"];
    assert_eq!(template["labels"]["nf-deployment-name"], "core");
    assert_eq!(
        template["labels"]["topology.nephio.org/nf-instance"],
        "upf-a"
    );
    assert_eq!(template["annotations"][FLAVOR_ANNOTATION], "small");
    assert_eq!(template["deletionPolicy"], "delete");
    assert_eq!(template["injectors"][0]["kind"], "Capacity");
    assert_eq!(template["injectors"][0]["name"], "core-upf-a");
    // A tag revision stays a string; no capacity, no injector.
    let amf = package_variant_set(&plan, 3).unwrap().to_json();
    assert_eq!(amf["spec"]["upstream"]["revision"], "v2");
    assert!(amf["spec"]["template"].get("injectors").is_none());
    let capacity = capacity(&plan, 0).unwrap();
    assert_eq!(capacity.spec.max_uplink_throughput.unwrap().0, "1G");
    assert!(super::capacity(&plan, 1).is_none());
    assert_eq!(package_variant_sets(&plan).len(), 4);
}

#[test]
fn gates_exist_before_the_upfs_have_revisions_and_open_when_they_publish() {
    let plan = fixture::planned();
    let mut objects = vec![revision("smf-1", "regional", "smf", "0", "Draft")];
    let observation = Observation::new(&plan, views(&objects));
    let updates = observation.gate_updates(&plan);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].readiness_gates.len(), 3);
    assert!(
        updates[0]
            .conditions
            .iter()
            .all(|c| c.status == ConditionStatus::False)
    );
    // Apply it as the controller would: the same observation then decides nothing.
    let patch = updates[0].merge_patch();
    objects[0].spec_mut().unwrap().insert(
        "readinessGates".into(),
        patch["spec"]["readinessGates"].clone(),
    );
    objects[0]
        .body
        .insert("status", patch["status"].clone())
        .unwrap();
    let observation = Observation::new(&plan, views(&objects));
    assert!(observation.gate_updates(&plan).is_empty());
    let statuses = observation.package_statuses(&plan);
    assert_eq!(statuses[3].lifecycle, "Draft");
    assert_eq!(statuses[3].pending_conditions.len(), 3);
    assert_eq!(statuses[0].lifecycle, "Pending");

    // One UPF is published (the placeholder `main` revision is ignored).
    objects.push(revision("upf-a-1", "edge-1", "upf-a", "1", "Published"));
    objects.push(revision(
        "upf-a-main",
        "edge-1",
        "upf-a",
        "main",
        "Published",
    ));
    objects.push(revision("upf-a-2", "edge-2", "upf-a", "-1", "Published"));
    let observation = Observation::new(&plan, views(&objects));
    assert!(observation.is_published(0));
    assert!(!observation.is_published(1));
    let updates = observation.gate_updates(&plan);
    assert_eq!(updates.len(), 1);
    let opened: Vec<&str> = updates[0]
        .conditions
        .iter()
        .filter(|c| c.is_true())
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(opened, ["wait-for-UPF-upf-a-edge-1"]);
}

#[test]
fn latest_published_revision_and_orphans() {
    let plan = fixture::planned();
    let objects = vec![
        revision("a1", "edge-1", "upf-a", "1", "Published"),
        revision("a3", "edge-1", "upf-a", "3", "Draft"),
        revision("a2", "edge-1", "upf-a", "2", "Published"),
        revision("x", "edge-9", "upf-a", "1", "Published"),
    ];
    let observation = Observation::new(&plan, views(&objects));
    assert_eq!(
        observation.latest_published(0).map(|r| r.name.as_str()),
        Some("a2")
    );
    assert_eq!(observation.package_statuses(&plan)[0].lifecycle, "Draft");
    assert_eq!(observation.orphans.len(), 1);
    // Published gated revisions are left alone.
    let smf = vec![revision("s", "regional", "smf", "1", "Published")];
    assert!(
        Observation::new(&plan, views(&smf))
            .gate_updates(&plan)
            .is_empty()
    );
}

#[test]
fn revisions_without_repository_are_not_read() {
    let object = Object::new(
        &Gvk::new("porch.kpt.dev", "v1alpha1", "PackageRevision"),
        "x",
    );
    assert!(RevisionView::read(&object).is_none());
}

#[test]
fn packages_seen_by_the_replan_are_current_children_or_unwanted_ones() {
    use crate::api::DeletionPolicy;
    use crate::replan::{InstanceStatus, desired_children, diff, instance_statuses};
    let plan = fixture::planned();
    let objects = [
        revision("upf-a-e1-v1", "edge-1", "upf-a", "1", "Published"),
        revision("upf-a-e1-v2", "edge-1", "upf-a", "2", "Draft"),
        revision("smf-r-v1", "regional", "smf", "1", "Proposed"),
        revision("gone-1", "edge-9", "upf-a", "1", "Published"),
        revision("gone-2", "edge-9", "upf-a", "2", "Draft"),
    ];
    let observation = Observation::new(&plan, views(&objects));
    let children = observation.existing_children(&plan);
    let summary: Vec<(&str, String, bool, bool)> = children
        .iter()
        .map(|c| (c.id.as_str(), c.key.to_string(), c.prepared, c.approved))
        .collect();
    assert_eq!(
        summary,
        [
            ("upf-a-e1-v2", "core/upf-a@edge-1".to_owned(), false, true),
            ("smf-r-v1", "core/smf@regional".to_owned(), true, false),
            ("gone-2", "core/upf-a@edge-9".to_owned(), false, false),
        ]
    );
    let changes = diff(&children, &desired_children(&plan), DeletionPolicy::Delete);
    assert!(changes.update.is_empty(), "Porch keeps content current");
    assert_eq!(changes.create.len(), 3);
    let rows = instance_statuses(&plan, &children, DeletionPolicy::Delete);
    assert_eq!(rows[0].status, InstanceStatus::Approved);
    assert_eq!(
        rows[3].status,
        InstanceStatus::WaitingFor(vec![
            "wait-for-UPF-upf-a-edge-2".into(),
            "wait-for-UPF-upf-b-edge-3".into()
        ])
    );
    assert_eq!(rows.last().unwrap().status, InstanceStatus::ToBeDeleted);
}
