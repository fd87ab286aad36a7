use super::*;
use crate::fixture;
use serde_json::json;

fn ids(plan: &Plan) -> Vec<&str> {
    plan.variants().iter().map(|v| v.id.as_str()).collect()
}

#[test]
fn one_variant_per_instance_and_matching_cluster_in_order() {
    let plan = fixture::planned();
    assert_eq!(
        ids(&plan),
        [
            "upf-a-edge-1",
            "upf-a-edge-2",
            "upf-b-edge-3",
            "smf-regional",
            "amf-regional"
        ]
    );
    assert_eq!(plan.instances()[0].clusters, ["edge-1", "edge-2"]);
    assert_eq!(plan.variant_for("upf-a", "edge-2"), Some(1));
    assert_eq!(plan.variant_for("upf-a", "edge-3"), None);
    assert_eq!(plan.variant_by_id("smf-regional"), Some(3));
    assert!(plan.unplaced().is_empty());
    let labels = plan.labels(2);
    assert_eq!(labels["nf-deployment-name"], "core");
    assert_eq!(labels[NF_INSTANCE_LABEL], "smf");
    assert_eq!(labels[NF_TYPE_LABEL], "smf");
}

#[test]
fn smf_waits_for_every_connected_upf_copy() {
    let plan = fixture::planned();
    let smf = plan.variant_by_id("smf-regional").unwrap();
    let gates: Vec<String> = plan
        .gates(smf)
        .into_iter()
        .map(|g| g.condition_type)
        .collect();
    assert_eq!(
        gates,
        [
            "wait-for-UPF-upf-a-edge-1",
            "wait-for-UPF-upf-a-edge-2",
            "wait-for-UPF-upf-b-edge-3"
        ]
    );
    // UPFs and AMF wait for nothing under the default policy.
    for id in ["upf-a-edge-1", "amf-regional"] {
        assert!(
            plan.gates(plan.variant_by_id(id).unwrap()).is_empty(),
            "{id}"
        );
    }
    // Neighbours: the UPFs see each other (N4, N6) and the SMF, never a copy of themselves.
    let upf = plan.variant_by_id("upf-a-edge-1").unwrap();
    let neighbours: Vec<&str> = plan
        .neighbours(upf)
        .map(|n| plan.variants()[n].id.as_str())
        .collect();
    assert_eq!(neighbours, ["upf-b-edge-3", "smf-regional"]);
    let order: Vec<Vec<String>> = plan
        .rollout_order()
        .into_iter()
        .map(|s| s.into_iter().map(|t| t.to_string()).collect())
        .collect();
    assert_eq!(order, [vec!["amf", "upf"], vec!["smf"]]);
}

#[test]
fn another_policy_gates_other_types() {
    let policy = RolloutPolicy::parse(&["amf:smf", "smf:upf"]).unwrap();
    let plan = plan(
        &fixture::topology(),
        &fixture::classes(),
        &fixture::clusters(),
        &policy,
    )
    .unwrap();
    let amf = plan.variant_by_id("amf-regional").unwrap();
    let gates: Vec<String> = plan
        .gates(amf)
        .into_iter()
        .map(|g| g.condition_type)
        .collect();
    assert_eq!(gates, ["wait-for-SMF-smf-regional"]);
    let counts = plan.counts();
    assert_eq!(counts.variants, 5);
    assert_eq!(counts.gates, 4);
    assert_eq!(counts.network_instances, 4);
    // upf-a x2: {upf-b, smf}; upf-b: {upf-a x2, smf}; smf: {upf x3, amf}; amf: {smf}
    assert_eq!(counts.connectivities, 2 * 2 + 3 + 4 + 1);
}

#[test]
fn colliding_ids_are_disambiguated_by_pair() {
    let topology: NFTopology = serde_json::from_value(json!({
        "metadata": {"name": "t"},
        "spec": {"nfInstances": [
            {"name": "a-b", "clusterSelector": {"matchLabels": {"x": "c"}},
             "nfTemplate": {"nfType": "upf", "className": "k"}},
            {"name": "a", "clusterSelector": {"matchLabels": {"x": "bc"}},
             "nfTemplate": {"nfType": "upf", "className": "k"}},
            {"name": "z", "nfTemplate": {"nfType": "upf", "className": "k"}}
        ]}
    }))
    .unwrap();
    let class: NFClass = serde_json::from_value(json!({
        "metadata": {"name": "k"}, "spec": {"packageRef": {"repository": "r", "packageName": "p"}}
    }))
    .unwrap();
    let clusters = [
        Cluster::new("c", [("x", "c")]),
        Cluster::new("b-c", [("x", "bc")]),
    ];
    let plan = plan(&topology, &[class], &clusters, &RolloutPolicy::none()).unwrap();
    let ids = ids(&plan);
    assert_eq!(ids.len(), 4);
    assert!(
        ids[0].starts_with("a-b-c-") && ids[1].starts_with("a-b-c-"),
        "{ids:?}"
    );
    assert_ne!(ids[0], ids[1]);
    assert_eq!(&ids[2..], ["z-b-c", "z-c"]);
}

#[test]
fn unknown_class_and_unplaced_instances() {
    let mut classes = fixture::classes();
    classes.retain(|c| c.name() != "smf-class");
    let err = plan(
        &fixture::topology(),
        &classes,
        &fixture::clusters(),
        &RolloutPolicy::default(),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "class smf-class not found (instance smf)");

    let mut clusters = fixture::clusters();
    clusters.retain(|c| c.name != "edge-3");
    let plan = plan(
        &fixture::topology(),
        &fixture::classes(),
        &clusters,
        &RolloutPolicy::default(),
    )
    .unwrap();
    assert_eq!(plan.unplaced(), ["upf-b"]);
    assert!(plan.variants_of(1).is_empty());
    let smf = plan.variant_by_id("smf-regional").unwrap();
    assert_eq!(plan.gates(smf).len(), 2);
}

#[test]
fn duplicate_clusters_and_bad_selectors_are_refused() {
    let mut clusters = fixture::clusters();
    clusters.push(Cluster::new("edge-1", [("role", "edge")]));
    let err = plan(
        &fixture::topology(),
        &fixture::classes(),
        &clusters,
        &RolloutPolicy::default(),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), r#"duplicate cluster name "edge-1""#);
    let mut topology = fixture::topology();
    topology.spec.nf_instances[0].cluster_selector =
        nephrite_krm::LabelSelector::new().with_label("bad key", "x");
    let err = plan(
        &topology,
        &fixture::classes(),
        &fixture::clusters(),
        &RolloutPolicy::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("instance upf-a: invalid cluster selector"),
        "{err}"
    );
}

#[test]
fn expressions_without_match_labels_scan_every_cluster() {
    let mut topology = fixture::topology();
    topology.spec.nf_instances[1].cluster_selector = "role=edge,zone notin (a)".parse().unwrap();
    topology.spec.nf_instances[3].cluster_selector = "zone in (a,b)".parse().unwrap();
    let plan = plan(
        &topology,
        &fixture::classes(),
        &fixture::clusters(),
        &RolloutPolicy::default(),
    )
    .unwrap();
    assert_eq!(plan.instances()[1].clusters, ["edge-3"]);
    assert_eq!(plan.instances()[3].clusters, ["edge-1", "edge-2", "edge-3"]);
}
