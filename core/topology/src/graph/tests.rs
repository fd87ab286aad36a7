use super::*;
use crate::api::{NFInterface, NFTemplate, NfType};

fn instance(name: &str, networks: &[&str]) -> NFInstance {
    NFInstance {
        name: name.into(),
        cluster_selector: Default::default(),
        nf_template: NFTemplate {
            nf_type: NfType::new("upf"),
            class_name: "c".into(),
            capacity: None,
            nf_interfaces: networks
                .iter()
                .enumerate()
                .map(|(i, n)| NFInterface {
                    name: format!("if{i}"),
                    network_instance_name: (*n).into(),
                })
                .collect(),
        },
    }
}

#[test]
fn neighbours_share_a_network_and_never_include_self() {
    let spec = NFTopologySpec {
        nf_instances: vec![
            instance("a", &["n3", "n4", "n4"]),
            instance("b", &["n4"]),
            instance("c", &["n6"]),
            instance("d", &["n3", "n4"]),
        ],
        ..NFTopologySpec::default()
    };
    let graph = TopologyGraph::build("t", &spec).unwrap();
    assert_eq!(graph.neighbours(0), &[1, 3]);
    assert_eq!(graph.neighbours(1), &[0, 3]);
    assert!(graph.neighbours(2).is_empty());
    assert_eq!(graph.network_count(), 3);
    assert_eq!(graph.networks_of(0), ["n3", "n4"]);
    assert!(graph.connected(3, 0));
    assert_eq!(
        neighbour_names(&spec, &graph, &spec.nf_instances[3]),
        ["a", "b"]
    );
}

#[test]
fn duplicate_and_unnamed_instances_are_refused() {
    let spec = NFTopologySpec {
        nf_instances: vec![instance("a", &[]), instance("a", &[])],
        ..NFTopologySpec::default()
    };
    let err = TopologyGraph::build("t", &spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"duplicate NF instance name "a" in topology "t""#
    );
    let spec = NFTopologySpec {
        nf_instances: vec![instance("", &[])],
        ..NFTopologySpec::default()
    };
    assert!(matches!(
        TopologyGraph::build("t", &spec),
        Err(TopologyError::UnnamedInstance { index: 0, .. })
    ));
}
