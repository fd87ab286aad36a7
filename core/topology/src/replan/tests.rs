use super::*;
use crate::api::{Cluster, DeletionPolicy, NFTopology};
use crate::fixture;
use crate::plan::{Plan, plan};
use crate::policy::RolloutPolicy;
use crate::tko;
use serde_json::json;

fn planned_with(topology: &NFTopology, clusters: &[Cluster]) -> Plan {
    plan(
        topology,
        &fixture::classes(),
        clusters,
        &RolloutPolicy::default(),
    )
    .expect("plan")
}

/// The children `plan` wants, as if they existed with ids `d-<deployed id>`, approved when
/// their deployed id is in `approved`.
fn existing(plan: &Plan, approved: &[&str]) -> Vec<ExistingChild> {
    desired_children(plan)
        .into_iter()
        .map(|c| ExistingChild {
            id: format!("d-{}", c.spec.deployed_id),
            approved: approved.contains(&c.spec.deployed_id.as_str()),
            prepared: true,
            key: c.key,
            fingerprint: Some(c.fingerprint),
        })
        .collect()
}

fn keys(children: &[PlannedChild]) -> Vec<String> {
    children.iter().map(|c| c.key.to_string()).collect()
}

fn ids(children: &[ExistingChild]) -> Vec<&str> {
    children.iter().map(|c| c.id.as_str()).collect()
}

#[test]
fn desired_children_are_keyed_by_topology_instance_and_site() {
    let plan = fixture::planned();
    let children = desired_children(&plan);
    assert_eq!(
        keys(&children),
        [
            "core/upf-a@edge-1",
            "core/upf-a@edge-2",
            "core/upf-b@edge-3",
            "core/smf@regional",
            "core/amf@regional"
        ]
    );
    let upf = &children[0];
    assert_eq!(upf.spec.package_ref.package_name, "free5gc-upf");
    assert_eq!(upf.spec.flavor.as_deref(), Some("small"));
    // The two copies of upf-a differ only in their deployed id.
    assert_ne!(children[0].fingerprint, children[1].fingerprint);
    assert_eq!(
        desired_children(&fixture::planned())[0].fingerprint,
        upf.fingerprint,
        "a fingerprint depends only on the spec"
    );
}

#[test]
fn a_fingerprint_reads_back_and_a_garbled_one_is_refused_by_name() {
    let fingerprint = desired_children(&fixture::planned())[0].fingerprint;
    let text = fingerprint.to_string();
    assert_eq!(text.len(), 33);
    assert_eq!(text.parse::<Fingerprint>(), Ok(fingerprint));
    for bad in [
        "",
        "abc",
        "0123456789abcdef",
        "0123456789abcdef.0123",
        "0123456789abcdeg.0123456789abcdef",
    ] {
        assert_eq!(
            bad.parse::<Fingerprint>().unwrap_err().to_string(),
            format!("spec fingerprint {bad:?} is not <16 hex digits>.<16 hex digits>")
        );
    }
}

#[test]
fn nothing_observed_creates_everything_and_a_second_pass_changes_nothing() {
    let plan = fixture::planned();
    let desired = desired_children(&plan);
    let changes = diff(&[], &desired, DeletionPolicy::Delete);
    assert_eq!(keys(&changes.create), keys(&desired));
    assert!(changes.update.is_empty() && changes.delete.is_empty() && changes.orphan.is_empty());
    assert_eq!(changes.action_count(), 5);
    let again = diff(&existing(&plan, &[]), &desired, DeletionPolicy::Delete);
    assert!(again.is_noop());
    assert_eq!(again, ChildChanges::default());
}

#[test]
fn a_capacity_edit_updates_only_that_instances_children_in_place() {
    let before = fixture::planned();
    let mut topology = fixture::topology();
    topology.spec.nf_instances[0].nf_template.capacity =
        serde_json::from_value(json!({"maxUplinkThroughput": "2G", "maxDownlinkThroughput": "5G"}))
            .unwrap();
    let after = planned_with(&topology, &fixture::clusters());
    let changes = diff(
        &existing(&before, &["upf-a-edge-1"]),
        &desired_children(&after),
        DeletionPolicy::Delete,
    );
    assert!(changes.create.is_empty() && changes.delete.is_empty());
    let updated: Vec<(&str, &str, bool)> = changes
        .update
        .iter()
        .map(|u| (u.id.as_str(), u.child.spec.deployed_id.as_str(), u.recreate))
        .collect();
    assert_eq!(
        updated,
        [
            ("d-upf-a-edge-1", "upf-a-edge-1", false),
            ("d-upf-a-edge-2", "upf-a-edge-2", false)
        ]
    );
}

#[test]
fn a_relabelled_site_moves_its_child_between_instances() {
    let before = fixture::planned();
    // edge-3 moves from zone b to zone a: upf-b loses it, upf-a gains it; upf-b is unplaced.
    let mut clusters = fixture::clusters();
    clusters[3] = Cluster::new("edge-3", [("role", "edge"), ("zone", "a")]);
    let after = planned_with(&fixture::topology(), &clusters);
    let old = existing(&before, &[]);
    let changes = diff(&old, &desired_children(&after), DeletionPolicy::Delete);
    assert_eq!(keys(&changes.create), ["core/upf-a@edge-3"]);
    assert_eq!(ids(&changes.delete), ["d-upf-b-edge-3"]);
    assert!(changes.update.is_empty() && changes.orphan.is_empty());

    let orphaning = diff(&old, &desired_children(&after), DeletionPolicy::Orphan);
    assert_eq!(keys(&orphaning.create), ["core/upf-a@edge-3"]);
    assert!(orphaning.delete.is_empty());
    assert_eq!(ids(&orphaning.orphan), ["d-upf-b-edge-3"]);
    let applied = apply(&old, &orphaning);
    assert_eq!(applied.orphaned, [ChildKey::new("core", "upf-b", "edge-3")]);

    // Relabelled back, the orphan is upf-b's child again: kept, not created a second time.
    let back = diff(&old, &desired_children(&before), DeletionPolicy::Orphan);
    assert_eq!(back, ChildChanges::default());
}

#[test]
fn a_new_template_or_deployed_id_is_a_recreation_and_an_unknown_fingerprint_an_update() {
    let before = fixture::planned();
    let mut classes = fixture::classes();
    classes[2].spec.package_ref.package_name = "other-amf".into();
    let after = plan(
        &fixture::topology(),
        &classes,
        &fixture::clusters(),
        &RolloutPolicy::default(),
    )
    .unwrap();
    let mut old = existing(&before, &[]);
    old[0].fingerprint = None;
    let changes = diff(&old, &desired_children(&after), DeletionPolicy::Delete);
    let updated: Vec<(&str, bool)> = changes
        .update
        .iter()
        .map(|u| (u.id.as_str(), u.recreate))
        .collect();
    assert_eq!(
        updated,
        [("d-upf-a-edge-1", false), ("d-amf-regional", true)]
    );
}

#[test]
fn of_two_copies_the_right_or_approved_one_is_kept() {
    let plan = fixture::planned();
    let desired = desired_children(&plan);
    let mut old = existing(&plan, &[]);
    let mut stale = old[3].clone();
    stale.id = "d-smf-old".into();
    stale.fingerprint = None;
    stale.approved = true;
    old.push(stale);
    let changes = diff(&old, &desired, DeletionPolicy::Delete);
    assert!(changes.update.is_empty() && changes.create.is_empty());
    assert_eq!(ids(&changes.delete), ["d-smf-old"]);
    // Neither right: the approved one stays and is updated.
    old[3].fingerprint = None;
    let changes = diff(&old, &desired, DeletionPolicy::Orphan);
    assert_eq!(changes.update[0].id, "d-smf-old");
    assert_eq!(ids(&changes.orphan), ["d-smf-regional"]);
}

#[test]
fn a_child_without_identity_metadata_is_named_in_the_error() {
    let metadata: std::collections::BTreeMap<String, String> =
        [("nf-deployment-name".to_owned(), "core".to_owned())].into();
    let err = ChildKey::from_metadata("dep-7", "edge-1", &metadata).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"child "dep-7" on site "edge-1" has no "topology.nephio.org/nf-instance" metadata: cannot tell which NF instance it is for"#
    );
}

#[test]
fn a_stamped_tko_child_reads_back_as_the_same_child() {
    let plan = fixture::planned();
    let desired = desired_children(&plan);
    let smf = &desired[3];
    let child = tko::stamped_child_deployment(&plan, smf);
    let plain = tko::child_deployment(&plan, 3);
    assert_eq!(child.template_id, plain.template_id);
    assert_eq!(child.instance_key, plain.instance_key);
    let fingerprint = smf.fingerprint.to_string();
    assert_eq!(child.merge_metadata[SPEC_FINGERPRINT_KEY], fingerprint);
    assert_eq!(
        tko::package_fingerprint(&child.merge_package),
        Some(smf.fingerprint)
    );
    assert_eq!(tko::package_fingerprint(&plain.merge_package), None);
    let metadata: std::collections::BTreeMap<String, String> =
        child.merge_metadata.clone().into_iter().collect();
    let observed = tko::existing_child("d-1", &child.site_id, &metadata, true, false).unwrap();
    assert_eq!(observed.key, smf.key);
    assert_eq!(observed.fingerprint, Some(smf.fingerprint));
    assert!(diff(&[observed], &desired[3..4], DeletionPolicy::Delete).is_noop());
}

fn two_new_sites() -> Vec<Cluster> {
    let mut clusters = fixture::clusters();
    clusters.push(Cluster::new("edge-4", [("role", "edge"), ("zone", "b")]));
    clusters.push(Cluster::new("regional-2", [("role", "regional")]));
    clusters
}

#[test]
fn an_smf_on_a_new_site_waits_for_its_upfs_including_those_created_with_it() {
    let before = fixture::planned();
    let after = planned_with(&fixture::topology(), &two_new_sites());
    let old = existing(&before, &["upf-a-edge-1", "upf-a-edge-2"]);
    let changes = diff(&old, &desired_children(&after), DeletionPolicy::Delete);
    assert_eq!(
        keys(&changes.create),
        [
            "core/upf-b@edge-4",
            "core/smf@regional-2",
            "core/amf@regional-2"
        ]
    );
    let gates = new_child_gates(&after, &old, &changes);
    let smf = gates
        .iter()
        .find(|g| g.deployed_id == "smf-regional-2")
        .unwrap();
    let waits: Vec<(&str, GateState)> = smf
        .waits
        .iter()
        .map(|w| (w.condition_type.as_str(), w.state))
        .collect();
    assert_eq!(
        waits,
        [
            ("wait-for-UPF-upf-a-edge-1", GateState::Open),
            ("wait-for-UPF-upf-a-edge-2", GateState::Open),
            ("wait-for-UPF-upf-b-edge-3", GateState::AwaitingApproval),
            ("wait-for-UPF-upf-b-edge-4", GateState::AwaitingCreation),
        ]
    );
    assert!(!smf.is_open());
    assert_eq!(
        smf.closed(),
        ["wait-for-UPF-upf-b-edge-3", "wait-for-UPF-upf-b-edge-4"]
    );
    // The new UPF and AMF wait for nothing.
    for other in gates.iter().filter(|g| g.deployed_id != "smf-regional-2") {
        assert!(other.waits.is_empty() && other.is_open(), "{other:?}");
    }
}

#[test]
fn a_recreated_upf_is_awaited_again_and_a_deleted_one_not_at_all() {
    let before = fixture::planned();
    let mut classes = fixture::classes();
    classes[0].spec.package_ref.package_name = "other-upf".into();
    let mut clusters = two_new_sites();
    clusters.retain(|c| c.name != "regional");
    let after = plan(
        &fixture::topology(),
        &classes,
        &clusters,
        &RolloutPolicy::default(),
    )
    .unwrap();
    let old = existing(&before, &["upf-a-edge-1", "upf-a-edge-2", "upf-b-edge-3"]);
    let changes = diff(&old, &desired_children(&after), DeletionPolicy::Delete);
    assert!(changes.update.iter().all(|u| u.recreate));
    let gates = new_child_gates(&after, &old, &changes);
    let smf = gates
        .iter()
        .find(|g| g.deployed_id == "smf-regional-2")
        .unwrap();
    assert!(
        smf.waits
            .iter()
            .all(|w| w.state == GateState::AwaitingCreation)
    );
    assert_eq!(smf.waits.len(), 4);
    // The recreated UPFs are listed as new children too.
    assert!(gates.iter().any(|g| g.deployed_id == "upf-a-edge-1"));
}

#[test]
fn the_status_view_names_each_instance_and_site_and_what_it_waits_for() {
    let before = fixture::planned();
    let mut topology = fixture::topology();
    topology.spec.nf_instances[1].nf_template.capacity =
        serde_json::from_value(json!({"maxSessions": 10})).unwrap();
    topology.spec.nf_instances.push(
        serde_json::from_value(json!({
            "name": "nrf", "clusterSelector": {"matchLabels": {"role": "core-dc"}},
            "nfTemplate": {"nfType": "nrf", "className": "amf-class"}
        }))
        .unwrap(),
    );
    let mut clusters = fixture::clusters();
    clusters[1] = Cluster::new("edge-2", [("role", "gone")]);
    let after = planned_with(&topology, &clusters);
    let mut old = existing(&before, &["upf-a-edge-1"]);
    old[4].prepared = false; // amf-regional
    let rows = instance_statuses(&after, &old, DeletionPolicy::Delete);
    let table = render_table(&rows);
    assert_eq!(
        table,
        "\
INSTANCE  SITE      ID            TYPE  CHILD           STATUS       DETAIL
upf-a     edge-1    upf-a-edge-1  upf   d-upf-a-edge-1  Approved     -
upf-b     edge-3    upf-b-edge-3  upf   d-upf-b-edge-3  Prepared     update pending
smf       regional  smf-regional  smf   d-smf-regional  Waiting      for wait-for-UPF-upf-b-edge-3
amf       regional  amf-regional  amf   d-amf-regional  Created      -
nrf       -         -             nrf   -               Unplaced     no site matches its selector
upf-a     edge-2    -             -     d-upf-a-edge-2  ToBeDeleted  -
"
    );
    let orphaned = instance_statuses(&after, &old, DeletionPolicy::Orphan);
    assert_eq!(orphaned.last().unwrap().status, InstanceStatus::Orphaned);
    // Nothing created yet: every placed row is Planned.
    let fresh = instance_statuses(&before, &[], DeletionPolicy::Delete);
    assert!(fresh.iter().all(|r| r.status == InstanceStatus::Planned));
    assert_eq!(
        serde_json::to_value(&rows[2]).unwrap(),
        json!({"instance": "smf", "site": "regional", "deployedId": "smf-regional",
               "nfType": "smf", "child": "d-smf-regional",
               "status": {"state": "waitingFor", "gates": ["wait-for-UPF-upf-b-edge-3"]}})
    );
}

#[test]
fn control_characters_in_names_do_not_reach_the_terminal() {
    let rows = [StatusRow {
        instance: "evil\u{1b}[2J".into(),
        site: Some("a\nb".into()),
        deployed_id: None,
        nf_type: None,
        child: None,
        status: InstanceStatus::Planned,
        pending: None,
    }];
    let table = render_table(&rows);
    assert_eq!(
        table.lines().nth(1).unwrap(),
        "evil?[2J  a?b   -   -     -      Planned  -"
    );
    assert_eq!(table.lines().count(), 2);
}

#[test]
fn the_deletion_policy_reads_writes_and_reaches_the_package_variant_sets() {
    assert_eq!(
        " Orphan ".parse::<DeletionPolicy>(),
        Ok(DeletionPolicy::Orphan)
    );
    assert_eq!(
        "keep".parse::<DeletionPolicy>().unwrap_err().to_string(),
        r#"unknown deletion policy "keep": expected `delete` or `orphan`"#
    );
    let mut topology = fixture::topology();
    assert!(
        serde_json::to_value(&topology.spec)
            .unwrap()
            .get("deletionPolicy")
            .is_none()
    );
    topology.spec = serde_json::from_value(json!({
        "deletionPolicy": "orphan",
        "nfInstances": serde_json::to_value(&topology.spec.nf_instances).unwrap()
    }))
    .unwrap();
    let plan = planned_with(&topology, &fixture::clusters());
    assert_eq!(plan.deletion_policy(), DeletionPolicy::Orphan);
    let pvs = crate::porch::package_variant_set(&plan, 0)
        .unwrap()
        .to_json();
    assert_eq!(pvs["spec"]["template"]["deletionPolicy"], "orphan");
    assert!(
        serde_json::from_value::<crate::api::NFTopologySpec>(json!({"deletionPolicy": "keep"}))
            .is_err()
    );
}

#[test]
fn an_update_prunes_only_what_ntc_rendered_and_no_longer_renders() {
    let before = fixture::planned();
    let mut topology = fixture::topology();
    // upf-a drops its n3 interface and its capacity.
    let template = &mut topology.spec.nf_instances[0].nf_template;
    template.nf_interfaces.remove(0);
    template.capacity = None;
    let after = planned_with(&topology, &fixture::clusters());
    let old = tko::stamped_child_deployment(&before, &desired_children(&before)[0]);
    let new = tko::stamped_child_deployment(&after, &desired_children(&after)[0]);
    assert!(
        old.merge_package
            .iter()
            .all(|o| o.annotation(SPEC_FINGERPRINT_KEY).is_some())
    );
    // The current package: the template's own resources, then the old rendering merged in.
    let mut current = nephrite_krm::Package::new();
    current.push(nephrite_krm::Object::new(
        &nephrite_krm::Gvk::new("", "v1", "ConfigMap"),
        "upf-config",
    ));
    current.push(nephrite_krm::Object::new(
        &nephrite_krm::Gvk::new("req.nephio.org", "v1alpha1", "Interface"),
        "n9",
    ));
    for object in old.merge_package.iter() {
        current.insert(object.clone());
    }
    let removed = tko::prune_for_update(&mut current, &new);
    assert_eq!(removed, ["Capacity/core-upf-a", "Interface/n3"]);
    let left: Vec<String> = current
        .iter()
        .map(|o| format!("{}/{}", o.kind, o.name().unwrap_or_default()))
        .collect();
    assert_eq!(
        left,
        [
            "ConfigMap/upf-config",
            "Interface/n9",
            "Deployment/deployment",
            "Interface/n4",
            "Interface/n6"
        ]
    );
}
