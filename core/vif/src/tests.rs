//! Plans, updates and the record, driver by driver.

use std::collections::BTreeMap;

use super::*;

fn pod(annotations: &[(&str, &str)]) -> Pod {
    Pod {
        namespace: "shop".into(),
        name: "web".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        containers: Vec::new(),
    }
}

fn config(drivers: &str) -> Config {
    Config {
        drivers: EnabledDrivers::parse(drivers).unwrap(),
        ..Config::default()
    }
}

fn keys(requests: &[VifRequest]) -> Vec<&str> {
    requests.iter().map(|r| r.key.as_str()).collect()
}

/// The VIFs a backend would give for `update`'s allocations.
fn allocated(update: &Update) -> Vec<Vif> {
    let mut vifs = update.keep.clone();
    vifs.extend(update.allocate.iter().map(|a| Vif {
        key: a.request.key.clone(),
        ifname: a.ifname.clone(),
        driver: a.request.driver,
        target: a.request.target.clone(),
        vnic_type: a.request.vnic_type.unwrap_or(VnicType::Normal),
        network: "net".into(),
        addresses: vec!["10.0.0.2/24".into()],
        gateway: None,
        mac: "fa:16:3e:00:00:01".into(),
        backend_id: format!("port-{}", a.request.key),
        active: false,
    }));
    vifs
}

#[test]
fn enabled_vif_drivers_refuses_unknown_names_and_always_has_specific_ports() {
    let drivers = EnabledDrivers::parse(" sriov, additional_subnets ,,noop").unwrap();
    assert_eq!(
        drivers.order(),
        [
            Driver::Sriov,
            Driver::AdditionalSubnets,
            Driver::SpecificPorts
        ]
    );
    assert!(drivers.contains(Driver::Generic));
    assert!(!drivers.contains(Driver::NpwgMultipleInterfaces));
    assert_eq!(
        EnabledDrivers::parse("sriov, additonal_subnets")
            .unwrap_err()
            .to_string(),
        "unknown VIF driver \"additonal_subnets\" (expected additional_subnets, sriov, specific_ports, npwg_multiple_interfaces, noop)"
    );
    assert_eq!(
        EnabledDrivers::parse("").unwrap(),
        EnabledDrivers::default()
    );
}

#[test]
fn a_pod_without_annotations_gets_only_its_main_vif() {
    let all = config("additional_subnets, sriov, npwg_multiple_interfaces");
    let requests = desired(&pod(&[]), &all, &[]).unwrap();
    assert_eq!(
        requests,
        [VifRequest {
            key: "main".into(),
            driver: Driver::Generic,
            target: Target::PodNetwork,
            vnic_type: Some(VnicType::Normal),
            interface: Some("eth0".into()),
            attachment: None,
        }]
    );
}

#[test]
fn additional_subnets_give_one_vif_per_subnet_only_when_enabled() {
    let p = pod(&[(annotations::ADDITIONAL_SUBNETS, r#"["s1", "s2", "s1"]"#)]);
    let requests = desired(&p, &config("additional_subnets"), &[]).unwrap();
    assert_eq!(
        keys(&requests),
        ["main", "subnet/s1/0", "subnet/s2/0", "subnet/s1/1"]
    );
    assert_eq!(requests[2].target, Target::Subnet { id: "s2".into() });
    assert_eq!(keys(&desired(&p, &config(""), &[]).unwrap()), ["main"]);
}

#[test]
fn specific_ports_are_always_on_and_refused_when_invalid() {
    let p = pod(&[(annotations::SPEC_PORTS, r#"["p1", "p2"]"#)]);
    let requests = desired(&p, &config(""), &[]).unwrap();
    assert_eq!(keys(&requests), ["main", "port/p1", "port/p2"]);
    assert_eq!(requests[1].vnic_type, None);
    let twice = pod(&[(annotations::SPEC_PORTS, r#"["p1", "p1"]"#)]);
    assert_eq!(
        desired(&twice, &config(""), &[]).unwrap_err().to_string(),
        "annotation spec-ports: port p1 is listed twice (a port plugs into one interface)"
    );
    assert_eq!(
        VnicType::driver_of_port("p1", "direct").unwrap(),
        (Driver::Sriov, VnicType::Direct)
    );
    assert_eq!(
        VnicType::driver_of_port("p1", "normal").unwrap(),
        (Driver::Generic, VnicType::Normal)
    );
    assert_eq!(
        VnicType::driver_of_port("p1", "macvtap")
            .unwrap_err()
            .to_string(),
        "annotation spec-ports: port p1 has binding:vnic_type \"macvtap\" (expected normal or direct)"
    );
}

#[test]
fn sriov_counts_vfs_from_both_resource_forms_over_all_containers() {
    let mut p = pod(&[]);
    p.containers = vec![
        ContainerResources {
            name: "a".into(),
            requests: BTreeMap::from([
                (
                    "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2".into(),
                    "1".into(),
                ),
                ("cpu".into(), "500m".into()),
            ]),
            limits: BTreeMap::new(),
        },
        ContainerResources {
            name: "b".into(),
            requests: BTreeMap::new(),
            limits: BTreeMap::from([("intel.com/sriov_a".into(), "2".into())]),
        },
    ];
    let mut cfg = config("sriov");
    cfg.sriov_resources = BTreeMap::from([("intel.com/sriov_a".into(), "physnet1".into())]);
    let requests = desired(&p, &cfg, &[]).unwrap();
    assert_eq!(
        keys(&requests),
        [
            "main",
            "sriov/physnet1/0",
            "sriov/physnet1/1",
            "sriov/physnet2/0"
        ]
    );
    assert!(
        requests[1..]
            .iter()
            .all(|r| r.vnic_type == Some(VnicType::Direct))
    );
    // Unmapped device-plugin resources are not VFs.
    assert_eq!(keys(&desired(&p, &config("sriov"), &[]).unwrap()).len(), 2);
    p.containers[0].requests.insert(
        "pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2".into(),
        "lots".into(),
    );
    assert_eq!(
        desired(&p, &cfg, &[]).unwrap_err().to_string(),
        "container \"a\": resource pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-physnet2: quantity \"lots\" is not a whole number of VFs"
    );
}

fn nad(name: &str, annotation: Option<&str>, config: Option<&str>) -> NetworkAttachment {
    NetworkAttachment {
        namespace: "shop".into(),
        name: name.into(),
        annotations: annotation
            .map(|a| BTreeMap::from([(annotations::KURYR_CONFIG.to_owned(), a.to_owned())]))
            .unwrap_or_default(),
        config: config.map(str::to_owned),
    }
}

#[test]
fn npwg_networks_resolve_through_attachments_per_backend() {
    let nads = [
        nad(
            "blue",
            Some(r#"{"subnetId": "sub-blue"}"#),
            Some(r#"{"name": "blue-net", "type": "nimbess-cni"}"#),
        ),
        nad(
            "red",
            Some(r#"{"subnetId": "sub-red", "driverType": "sriov"}"#),
            None,
        ),
    ];
    let p = pod(&[(annotations::NETWORKS, "blue, red@vf0, blue")]);
    let mut cfg = config("npwg_multiple_interfaces");
    cfg.attachments = AttachmentFlavor::Neutron;
    let requests = desired(&p, &cfg, &nads).unwrap();
    assert_eq!(
        keys(&requests),
        [
            "main",
            "network/shop/blue/0",
            "network/shop/red@vf0",
            "network/shop/blue/1"
        ]
    );
    assert_eq!(
        requests[2].target,
        Target::Subnet {
            id: "sub-red".into()
        }
    );
    assert_eq!(requests[2].vnic_type, Some(VnicType::Direct));
    assert_eq!(requests[2].interface.as_deref(), Some("vf0"));

    cfg.attachments = AttachmentFlavor::Nimbess;
    let only_blue = pod(&[(annotations::NETWORKS, "blue")]);
    assert_eq!(
        desired(&only_blue, &cfg, &nads).unwrap()[1].target,
        Target::Network {
            name: "blue-net".into()
        }
    );
    assert_eq!(
        desired(&p, &cfg, &nads).unwrap_err().to_string(),
        "NetworkAttachmentDefinition shop/red: no spec.config naming its Nimbess network"
    );
    let unknown = pod(&[(annotations::NETWORKS, "green")]);
    assert_eq!(
        desired(&unknown, &cfg, &nads).unwrap_err().to_string(),
        "annotation k8s.v1.cni.cncf.io/networks: NetworkAttachmentDefinition shop/green not found"
    );
}

#[test]
fn every_bad_annotation_of_a_pod_is_reported_at_once() {
    let p = pod(&[
        (annotations::ADDITIONAL_SUBNETS, "s1"),
        (annotations::SPEC_PORTS, "[\"a\". \"b\"]"),
    ]);
    let error = desired(&p, &config("additional_subnets"), &[]).unwrap_err();
    assert_eq!(error.0.len(), 2);
    let text = error.to_string();
    assert!(text.contains("annotation openstack.org/kuryr-additional-subnets: not a JSON list of ids: expected value at line 1 column 1"), "{text}");
    assert!(text.contains("; annotation spec-ports: "), "{text}");
}

#[test]
fn new_vifs_take_the_lowest_free_names_and_kept_vifs_keep_theirs() {
    let cfg = config("additional_subnets");
    let three = pod(&[(annotations::ADDITIONAL_SUBNETS, r#"["a", "b", "c"]"#)]);
    let first = update(&[], &desired(&three, &cfg, &[]).unwrap()).unwrap();
    let names: Vec<_> = first.allocate.iter().map(|a| a.ifname.as_str()).collect();
    assert_eq!(names, ["eth0", "eth1", "eth2", "eth3"]);
    let vifs = allocated(&first);

    // Dropping b releases eth2 only; a and c stay where they are.
    let two = pod(&[(annotations::ADDITIONAL_SUBNETS, r#"["a", "c"]"#)]);
    let second = update(&vifs, &desired(&two, &cfg, &[]).unwrap()).unwrap();
    assert_eq!(second.release.len(), 1);
    assert_eq!(second.release[0].ifname, "eth2");
    assert!(second.allocate.is_empty());
    let vifs = allocated(&second);

    // A new subnet fills the hole.
    let again = pod(&[(annotations::ADDITIONAL_SUBNETS, r#"["a", "c", "d"]"#)]);
    let third = update(&vifs, &desired(&again, &cfg, &[]).unwrap()).unwrap();
    assert_eq!(third.allocate.len(), 1);
    assert_eq!(third.allocate[0].ifname, "eth2");
    assert_eq!(
        third.allocate[0].request.target,
        Target::Subnet { id: "d".into() }
    );

    // Nothing changed: nothing to do.
    let vifs = allocated(&third);
    assert!(
        update(&vifs, &desired(&again, &cfg, &[]).unwrap())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_changed_target_is_replaced_and_a_taken_interface_is_refused() {
    let mut cfg = config("npwg_multiple_interfaces, additional_subnets");
    cfg.attachments = AttachmentFlavor::Neutron;
    let before = [nad("blue", Some(r#"{"subnetId": "s1"}"#), None)];
    let after = [nad("blue", Some(r#"{"subnetId": "s2"}"#), None)];
    let p = pod(&[(annotations::NETWORKS, "blue")]);
    let vifs = allocated(&update(&[], &desired(&p, &cfg, &before).unwrap()).unwrap());
    let moved = update(&vifs, &desired(&p, &cfg, &after).unwrap()).unwrap();
    assert_eq!(moved.release.len(), 1);
    assert_eq!(moved.allocate.len(), 1);
    assert_eq!(moved.allocate[0].ifname, "eth1");

    let subnets = pod(&[(annotations::ADDITIONAL_SUBNETS, r#"["s9"]"#)]);
    let vifs = allocated(&update(&[], &desired(&subnets, &cfg, &[]).unwrap()).unwrap());
    let both = pod(&[
        (annotations::ADDITIONAL_SUBNETS, r#"["s9"]"#),
        (annotations::NETWORKS, "blue@eth1"),
    ]);
    assert_eq!(
        update(&vifs, &desired(&both, &cfg, &after).unwrap())
            .unwrap_err()
            .to_string(),
        "interface eth1 asked for by network/shop/blue@eth1 is already used by subnet/s9/0"
    );
}

#[test]
fn the_record_round_trips_and_refuses_other_versions_by_name() {
    let p = pod(&[(annotations::SPEC_PORTS, r#"["p1"]"#)]);
    let mut vifs = allocated(&update(&[], &desired(&p, &config(""), &[]).unwrap()).unwrap());
    vifs[1].active = true;
    let record = VifRecord::new(vifs);
    let text = record.to_json();
    assert!(text.starts_with(r#"{"version":1,"vifs":[{"key":"main","ifname":"eth0","driver":"generic","target":{"kind":"pod_network"}"#), "{text}");
    assert_eq!(VifRecord::parse(&text).unwrap(), record);
    assert!(!record.all_active());
    assert_eq!(
        record.vif("eth1").unwrap().target,
        Target::Port { id: "p1".into() }
    );
    assert_eq!(
        VifRecord::parse(r#"{"version": 2, "vifs": []}"#)
            .unwrap_err()
            .to_string(),
        "annotation openstack.org/kuryr-vif: version 2, this handler reads 1"
    );
    assert!(
        VifRecord::parse(r#"{"version": 1, "vifs": [{"key": "main"}]}"#)
            .unwrap_err()
            .to_string()
            .starts_with("annotation openstack.org/kuryr-vif: version 1: missing field `ifname`")
    );
}

#[test]
fn a_failure_is_recorded_beside_the_kept_vifs_and_left_out_when_there_is_none() {
    let p = pod(&[]);
    let vifs = allocated(&update(&[], &desired(&p, &config(""), &[]).unwrap()).unwrap());
    assert!(!VifRecord::new(vifs.clone()).to_json().contains("failure"));
    let failed = VifRecord::failed(
        vifs,
        Failure {
            kind: FailureKind::Unavailable,
            message: "node node-1 has 0 free VFs on physnet physnet2".into(),
        },
    );
    let text = failed.to_json();
    assert!(
        text.ends_with(r#""failure":{"kind":"unavailable","message":"node node-1 has 0 free VFs on physnet physnet2"}}"#),
        "{text}"
    );
    assert_eq!(VifRecord::parse(&text).unwrap(), failed);
    assert_eq!(failed.vifs.len(), 1);
}

#[test]
fn a_request_names_what_asks_for_it() {
    let p = pod(&[
        (annotations::ADDITIONAL_SUBNETS, r#"["s1"]"#),
        (annotations::SPEC_PORTS, r#"["p1"]"#),
        (annotations::NETWORKS, "red@net1"),
    ]);
    let attachments = [nad("red", None, Some(r#"{"name": "red-net"}"#))];
    let requests = desired(
        &p,
        &config("additional_subnets, npwg_multiple_interfaces"),
        &attachments,
    )
    .unwrap();
    let origins: Vec<String> = requests.iter().map(VifRequest::origin).collect();
    assert_eq!(
        origins,
        [
            "the pod's main VIF",
            "annotation openstack.org/kuryr-additional-subnets",
            "annotation k8s.v1.cni.cncf.io/networks: NetworkAttachmentDefinition shop/red",
            "annotation spec-ports",
        ]
    );
}
