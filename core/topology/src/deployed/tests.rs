use super::*;
use crate::fixture;

fn neighbours(builder: &DeployedTopologyBuilder<'_>, id: &str) -> Vec<String> {
    builder
        .instance(id)
        .map(|i| {
            i.connectivities
                .iter()
                .map(|c| c.neighbor_name.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn publishing_and_removing_updates_neighbours_incrementally() {
    let plan = fixture::planned();
    let mut builder = DeployedTopologyBuilder::new(&plan);
    assert_eq!(builder.publish("smf-regional"), Change::Changed);
    assert!(neighbours(&builder, "smf-regional").is_empty());
    assert_eq!(builder.publish("upf-a-edge-1"), Change::Changed);
    assert_eq!(builder.publish("upf-a-edge-1"), Change::Unchanged);
    assert_eq!(builder.publish("nope"), Change::Unknown);
    assert_eq!(neighbours(&builder, "smf-regional"), ["upf-a-edge-1"]);
    assert_eq!(neighbours(&builder, "upf-a-edge-1"), ["smf-regional"]);
    builder.publish("upf-a-edge-2");
    builder.publish("amf-regional");
    assert_eq!(
        neighbours(&builder, "smf-regional"),
        ["amf-regional", "upf-a-edge-1", "upf-a-edge-2"]
    );
    // Copies of one instance are not neighbours.
    assert_eq!(neighbours(&builder, "upf-a-edge-2"), ["smf-regional"]);

    assert_eq!(builder.remove("upf-a-edge-1"), Change::Changed);
    assert_eq!(builder.remove("upf-a-edge-1"), Change::Unchanged);
    assert_eq!(
        neighbours(&builder, "smf-regional"),
        ["amf-regional", "upf-a-edge-2"]
    );
    let spec = builder.spec();
    assert_eq!(spec.nf_instances.len(), 3);
    let upf = builder.instance("upf-a-edge-2").unwrap();
    assert_eq!(
        (
            upf.cluster_name.as_str(),
            upf.nf_type.as_str(),
            upf.nf_flavor.as_str(),
            upf.nf_vendor.as_str(),
            upf.nf_version.as_str()
        ),
        ("edge-2", "upf", "small", "free5gc", "v3.2.1")
    );
    assert_eq!(builder.resource().metadata.name.as_deref(), Some("core"));
}

#[test]
fn all_published_is_the_end_state() {
    let plan = fixture::planned();
    let all = DeployedTopologyBuilder::all_published(&plan);
    assert_eq!(all.published_count(), 5);
    let total: usize = all
        .spec()
        .nf_instances
        .iter()
        .map(|i| i.connectivities.len())
        .sum();
    assert_eq!(total, plan.counts().connectivities);
}
