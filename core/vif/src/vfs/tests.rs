//! The VF count, physnet by physnet.

use std::collections::BTreeMap;

use super::*;
use crate::{Driver, EnabledDrivers, VifRequest, VnicType};

fn config() -> Config {
    Config {
        drivers: EnabledDrivers::parse("sriov").unwrap(),
        sriov_resources: BTreeMap::from([
            ("intel.com/sriov_a".to_owned(), "physnet2".to_owned()),
            ("intel.com/sriov_b".to_owned(), "physnet2".to_owned()),
            ("intel.com/sriov_c".to_owned(), "physnet3".to_owned()),
        ]),
        ..Config::default()
    }
}

fn node(allocatable: &[(&str, &str)]) -> Node {
    Node {
        name: "node-1".into(),
        allocatable: allocatable
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn vf(physnet: &str, n: usize) -> Vif {
    Vif {
        key: format!("sriov/{physnet}/{n}"),
        ifname: format!("eth{}", n + 1),
        driver: Driver::Sriov,
        target: Target::Physnet {
            physnet: physnet.into(),
        },
        vnic_type: VnicType::Direct,
        network: "net".into(),
        addresses: Vec::new(),
        gateway: None,
        mac: String::new(),
        backend_id: format!("port-{physnet}-{n}"),
        active: true,
    }
}

fn want(physnet: &str, count: usize) -> Vec<Allocation> {
    (0..count)
        .map(|n| Allocation {
            request: VifRequest {
                key: format!("sriov/{physnet}/{n}"),
                driver: Driver::Sriov,
                target: Target::Physnet {
                    physnet: physnet.into(),
                },
                vnic_type: Some(VnicType::Direct),
                interface: None,
                attachment: None,
            },
            ifname: format!("eth{}", n + 1),
        })
        .collect()
}

#[test]
fn a_physnet_advertises_the_sum_of_its_resources_in_both_forms() {
    let n = node(&[
        ("intel.com/sriov_a", "2"),
        ("intel.com/sriov_b", "3"),
        ("intel.com/sriov_c", "7"),
        (
            "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2",
            "1",
        ),
        ("cpu", "4"),
    ]);
    let vfs = advertised(&n, &config(), "physnet2").unwrap();
    assert_eq!(vfs.allocatable, 6);
    assert_eq!(
        vfs.resources,
        [
            "intel.com/sriov_a",
            "intel.com/sriov_b",
            "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2"
        ]
    );
    assert_eq!(
        advertised(&n, &config(), "physnet9").unwrap().allocatable,
        0
    );
}

#[test]
fn new_vfs_fit_only_in_what_the_nodes_pods_leave_free() {
    let n = node(&[("intel.com/sriov_a", "2")]);
    let c = config();
    assert_eq!(check(Some(&n), &c, &[], &want("physnet2", 2)), Ok(()));
    let one = [vf("physnet2", 0)];
    assert_eq!(check(Some(&n), &c, &one, &want("physnet2", 1)), Ok(()));
    let both = [vf("physnet2", 0), vf("physnet2", 1)];
    let short = check(Some(&n), &c, &both, &want("physnet2", 1)).unwrap_err();
    assert_eq!(
        short.to_string(),
        "node node-1 has 0 free VFs on physnet physnet2 (intel.com/sriov_a, intel.com/sriov_b: 2 allocatable, 2 held by its pods); the pod wants 1 more"
    );
    // VFs on another physnet do not count against this one.
    let elsewhere = [vf("physnet3", 0), vf("physnet3", 1)];
    assert_eq!(
        check(Some(&n), &c, &elsewhere, &want("physnet2", 2)),
        Ok(())
    );
}

#[test]
fn a_node_without_the_resource_has_no_vf_and_an_update_without_vfs_always_fits() {
    let bare = node(&[("cpu", "4")]);
    let c = config();
    assert_eq!(
        check(Some(&bare), &c, &[], &want("physnet3", 1))
            .unwrap_err()
            .to_string(),
        "node node-1 has 0 free VFs on physnet physnet3 (intel.com/sriov_c: 0 allocatable, 0 held by its pods); the pod wants 1 more"
    );
    assert_eq!(
        check(Some(&bare), &c, &[], &want("physnet7", 1))
            .unwrap_err()
            .to_string(),
        "node node-1 has 0 free VFs on physnet physnet7 (no resource maps to it: 0 allocatable, 0 held by its pods); the pod wants 1 more"
    );
    let full = [vf("physnet2", 0)];
    assert_eq!(check(Some(&bare), &c, &full, &[]), Ok(()));
    assert_eq!(check(None, &c, &full, &[]), Ok(()));
}

#[test]
fn an_unreadable_quantity_and_an_unscheduled_pod_are_named() {
    let c = config();
    let odd = node(&[("intel.com/sriov_a", "2Gi")]);
    assert_eq!(
        check(Some(&odd), &c, &[], &want("physnet2", 1))
            .unwrap_err()
            .to_string(),
        "node node-1: status.allocatable intel.com/sriov_a: \"2Gi\" is not a whole number of VFs"
    );
    assert_eq!(
        check(None, &c, &[], &want("physnet2", 2)),
        Err(VfShortage::Unscheduled {
            physnet: "physnet2".into(),
            wanted: 2
        })
    );
}

#[test]
fn held_and_wanted_count_only_vfs() {
    let mut main = vf("physnet2", 0);
    main.target = Target::PodNetwork;
    main.vnic_type = VnicType::Normal;
    let mut port = vf("physnet2", 1);
    port.target = Target::Port { id: "p".into() };
    let vifs = [main, port, vf("physnet2", 2), vf("physnet3", 0)];
    assert_eq!(
        held(&vifs),
        BTreeMap::from([("physnet2".to_owned(), 1), ("physnet3".to_owned(), 1)])
    );
    assert_eq!(
        wanted(&want("physnet2", 3)),
        BTreeMap::from([("physnet2".to_owned(), 3)])
    );
}
