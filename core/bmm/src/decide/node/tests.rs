use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::crd::MachineAddressType;

fn instance(addresses: Vec<String>) -> CloudInstance {
    CloudInstance {
        id: "i-1".into(),
        name: "node-a".into(),
        vpc_id: "v".into(),
        status: "Ready".into(),
        labels: BTreeMap::new(),
        machine_id: None,
        addresses,
    }
}

#[test]
fn a_found_instance_labels_the_node_with_its_site_and_type() {
    let i = instance(vec!["10.0.0.5".into()]);
    let action = decide_node(&InstanceLookup::Found {
        instance: &i,
        site_id: "site-1",
        instance_type: Some("gb200"),
    });
    let NodeAction::Update { labels, addresses } = action else {
        panic!("expected an update, got {action:?}");
    };
    assert_eq!(labels[REGION_LABEL], "site-1");
    assert_eq!(labels[ZONE_LABEL], "site-1");
    assert_eq!(labels[INSTANCE_TYPE_LABEL], "gb200");
    assert_eq!(addresses[0].type_, MachineAddressType::InternalIP);
    assert_eq!(addresses[0].address, "10.0.0.5");
    assert_eq!(addresses[1].type_, MachineAddressType::Hostname);
    assert_eq!(addresses[1].address, "node-a");
}

#[test]
fn only_a_404_deletes_the_node() {
    assert_eq!(decide_node(&InstanceLookup::NotFound), NodeAction::Delete);
    assert_eq!(decide_node(&InstanceLookup::Unavailable), NodeAction::Retry);
}

proptest! {
    /// Whatever the instance looks like, a found instance never deletes the Node.
    #[test]
    fn a_found_instance_never_deletes(
        addresses in proptest::collection::vec("[0-9.]{1,15}", 0..4),
        status in "[A-Za-z]{0,12}",
        instance_type in proptest::option::of("[a-z0-9.]{1,12}"),
    ) {
        let mut i = instance(addresses);
        i.status = status;
        let action = decide_node(&InstanceLookup::Found {
            instance: &i,
            site_id: "s",
            instance_type: instance_type.as_deref(),
        });
        prop_assert_ne!(action, NodeAction::Delete);
    }
}
