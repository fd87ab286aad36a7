use super::*;
use crate::fixture;
use std::collections::BTreeMap;

fn child(id: &str, key: &str, approved: bool) -> ObservedChild {
    ObservedChild {
        id: id.into(),
        instance_key: key.into(),
        prepared: true,
        approved,
    }
}

#[test]
fn sites_give_clusters_from_their_site_metadata() {
    let metadata: BTreeMap<String, String> = [
        ("Site.role".to_owned(), "edge".to_owned()),
        ("owner".to_owned(), "ops".to_owned()),
    ]
    .into();
    let clusters = clusters_from_sites([("edge-1", &metadata)]);
    assert_eq!(clusters, [Cluster::new("edge-1", [("role", "edge")])]);
}

#[test]
fn children_carry_template_site_key_and_merges() {
    let plan = fixture::planned();
    let children = child_deployments(&plan);
    assert_eq!(children.len(), 5);
    let smf = &children[3];
    assert_eq!(
        (
            smf.template_id.as_str(),
            smf.site_id.as_str(),
            smf.instance_key.as_str(),
            smf.gated
        ),
        ("free5gc-smf", "regional", "smf-regional", true)
    );
    let deployment = &smf.merge_package.objects()[0];
    assert_eq!(deployment.annotation("nephio.org/approve"), Some("Manual"));
    assert_eq!(smf.merge_metadata["nf-deployment-name"], "core");
    assert_eq!(smf.merge_metadata[DEPLOYED_ID_KEY], "smf-regional");
    let kinds: Vec<&str> = smf.merge_package.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(kinds, ["Deployment", "Interface", "Interface"]);
    let upf = &children[0];
    assert!(!upf.gated);
    assert_eq!(
        upf.merge_package.objects()[0].annotation("nephio.org/approve"),
        None
    );
    let kinds: Vec<&str> = upf.merge_package.iter().map(|o| o.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Deployment",
            "Capacity",
            "Interface",
            "Interface",
            "Interface"
        ]
    );
    let n4 = &upf.merge_package.objects()[3];
    assert_eq!(n4.spec().unwrap()["networkInstance"]["name"], "n4");
}

#[test]
fn a_gated_child_is_approved_once_every_waited_for_child_is() {
    let plan = fixture::planned();
    let mut children = vec![
        child("d-smf", "smf-regional", false),
        child("d-a1", "upf-a-edge-1", true),
        child("d-a2", "upf-a-edge-2", true),
        child("d-b", "upf-b-edge-3", false),
        child("d-x", "gone-edge-9", true),
    ];
    let observation = ChildObservation::new(&plan, children.clone());
    assert!(observation.approvals(&plan).is_empty());
    assert_eq!(observation.orphans.len(), 1);
    let smf = plan.variant_by_id("smf-regional").unwrap();
    assert_eq!(
        observation.pending_gates(&plan, smf),
        ["wait-for-UPF-upf-b-edge-3"]
    );
    assert_eq!(observation.deployed(&plan).published_count(), 2);
    let status = observation.status(&plan, &[], "t1");
    assert_eq!(status.num_nf_deployed, 2);
    let smf_status = status
        .packages
        .iter()
        .find(|p| p.name == "smf-regional")
        .unwrap();
    assert_eq!(
        (
            smf_status.lifecycle.as_str(),
            smf_status.pending_conditions.as_slice()
        ),
        ("Prepared", &["wait-for-UPF-upf-b-edge-3".to_owned()][..])
    );
    let amf = status
        .packages
        .iter()
        .find(|p| p.name == "amf-regional")
        .unwrap();
    assert_eq!(amf.lifecycle, "Pending");
    assert_eq!(
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .reason
            .as_deref(),
        Some("Deploying")
    );
    // The same observation again gives the same status (times kept).
    assert_eq!(observation.status(&plan, &status.conditions, "t2"), status);
    children[3].approved = true;
    let observation = ChildObservation::new(&plan, children.clone());
    assert_eq!(observation.approvals(&plan), ["d-smf"]);
    children[0].approved = true;
    let observation = ChildObservation::new(&plan, children);
    assert!(
        observation.approvals(&plan).is_empty(),
        "approving twice changes nothing"
    );
    assert_eq!(observation.deployed(&plan).published_count(), 4);
}
