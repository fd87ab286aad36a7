use super::*;
use nephrite_vif::{Driver, FailureKind, Vif, VnicType};

fn pod() -> PodRef {
    PodRef {
        namespace: "shop".into(),
        name: "web".into(),
        uid: Some("u1".into()),
    }
}

fn vif(key: &str, ifname: &str, target: Target, network: &str) -> Vif {
    Vif {
        key: key.into(),
        ifname: ifname.into(),
        driver: Driver::Generic,
        target,
        vnic_type: VnicType::Normal,
        network: network.into(),
        addresses: vec!["10.0.0.2/24".into()],
        gateway: None,
        mac: String::new(),
        backend_id: format!("u1/{key}"),
        active: true,
    }
}

fn facts(annotations: &[(&str, String)]) -> PodFacts {
    PodFacts {
        uid: "u1".into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

fn network(name: &str) -> Target {
    Target::Network { name: name.into() }
}

#[test]
fn a_pod_without_vifs_plugs_the_configured_interface() {
    let decision = plan(&pod(), &facts(&[]), "eth0", "pods").expect("plan");
    assert_eq!(
        decision,
        Decision::Plug(vec![Plug {
            ifname: "eth0".into(),
            network: "pods".into(),
            vif: None
        }])
    );
}

#[test]
fn the_record_gives_the_main_vif_and_the_additional_ones() {
    let record = VifRecord::new(vec![
        vif("main", "eth0", Target::PodNetwork, "pods"),
        vif("network/shop/a/0", "eth1", network("net-a"), "net-a"),
        vif("network/shop/b/0", "eth2", network("net-b"), "net-b"),
    ]);
    let annotations = [
        (NETWORKS, "a, b".to_owned()),
        (VIF_ANNOTATION, record.to_json()),
    ];
    let Decision::Plug(plugs) = plan(&pod(), &facts(&annotations), "eth0", "pods").expect("plan")
    else {
        panic!("expected plugs");
    };
    let names: Vec<(&str, &str, &str)> = plugs
        .iter()
        .map(|p| {
            (
                p.ifname.as_str(),
                p.network.as_str(),
                p.vif.as_ref().map_or("", |v| v.key.as_str()),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("eth0", "pods", "main"),
            ("eth1", "net-a", "network/shop/a/0"),
            ("eth2", "net-b", "network/shop/b/0")
        ]
    );
    assert!(
        plugs
            .iter()
            .all(|p| p.vif.as_ref().is_some_and(|v| v.pod_uid == "u1"))
    );
}

#[test]
fn more_networks_asked_than_recorded_waits() {
    let record = VifRecord::new(vec![
        vif("main", "eth0", Target::PodNetwork, "pods"),
        vif("network/shop/a/0", "eth1", network("net-a"), "net-a"),
    ]);
    let asked = [(NETWORKS, r#"[{"name": "a"}, {"name": "b"}]"#.to_owned())];
    assert_eq!(
        plan(&pod(), &facts(&asked), "eth0", "pods").expect("plan"),
        Decision::Wait {
            asked: 2,
            recorded: 0
        }
    );
    let both = [asked[0].clone(), (VIF_ANNOTATION, record.to_json())];
    assert_eq!(
        plan(&pod(), &facts(&both), "eth0", "pods").expect("plan"),
        Decision::Wait {
            asked: 2,
            recorded: 1
        }
    );
}

#[test]
fn bad_annotations_are_code_7_naming_them() {
    let cases = [
        (VIF_ANNOTATION, "{not json".to_owned(), VIF_ANNOTATION),
        (NETWORKS, "[{\"name\": ".to_owned(), NETWORKS),
        (
            VIF_ANNOTATION,
            VifRecord::new(vec![vif("main", "eth0", Target::PodNetwork, "other")]).to_json(),
            "the main VIF is on network other",
        ),
        (
            VIF_ANNOTATION,
            VifRecord::new(vec![vif(
                "subnet/s1/0",
                "eth1",
                Target::Subnet { id: "s1".into() },
                "n1",
            )])
            .to_json(),
            "not on a Nimbess network",
        ),
    ];
    for (key, value, named) in cases {
        let e = plan(&pod(), &facts(&[(key, value.clone())]), "eth0", "pods").expect_err(&value);
        assert_eq!(e.code, ErrorCode::InvalidConfig, "{value}");
        assert!(
            e.msg.contains(named) && e.msg.contains("shop/web"),
            "{}",
            e.msg
        );
    }
}

#[test]
fn a_recorded_failure_fails_add_with_its_kind_and_the_handlers_words() {
    let kept = vec![vif("main", "eth0", Target::PodNetwork, "pods")];
    let short = VifRecord::failed(
        kept.clone(),
        nephrite_vif::Failure {
            kind: FailureKind::Unavailable,
            message: "node node-1 has 0 free VFs on physnet physnet2".into(),
        },
    );
    let e = refused(&pod(), &facts(&[(VIF_ANNOTATION, short.to_json())])).expect_err("short");
    assert_eq!(e.code, ErrorCode::TryAgainLater);
    assert_eq!(
        e.msg,
        "pod shop/web: kuryr-l7 vif-handler: node node-1 has 0 free VFs on physnet physnet2 (openstack.org/kuryr-vif)"
    );
    let wrong = VifRecord::failed(
        kept.clone(),
        nephrite_vif::Failure {
            kind: FailureKind::Invalid,
            message: "network \"ghost\" is not served by the nimbess agent".into(),
        },
    );
    let e = refused(&pod(), &facts(&[(VIF_ANNOTATION, wrong.to_json())])).expect_err("wrong");
    assert_eq!(e.code, ErrorCode::InvalidConfig);
    assert!(e.msg.contains("\"ghost\""), "{}", e.msg);
    // Without a failure, or without a record, nothing is refused; DEL still plans the kept VIFs.
    assert!(
        refused(
            &pod(),
            &facts(&[(VIF_ANNOTATION, VifRecord::new(kept).to_json())])
        )
        .is_ok()
    );
    assert!(refused(&pod(), &facts(&[])).is_ok());
    assert!(matches!(
        plan(
            &pod(),
            &facts(&[(VIF_ANNOTATION, wrong.to_json())]),
            "eth0",
            "pods"
        ),
        Ok(Decision::Plug(_))
    ));
}

#[test]
fn kubeconfig_from_the_configuration_then_the_environment_and_the_timeout() {
    let env = BTreeMap::from([("KUBECONFIG".to_owned(), "/env/kc".to_owned())]);
    let conf = serde_json::json!({"kubeconfig": "/etc/cni/kc"});
    assert_eq!(
        kubeconfig_path(&conf, &env),
        Some(PathBuf::from("/etc/cni/kc"))
    );
    assert_eq!(
        kubeconfig_path(&serde_json::json!({}), &env),
        Some(PathBuf::from("/env/kc"))
    );
    assert_eq!(
        kubeconfig_path(&serde_json::json!({}), &BTreeMap::new()),
        None
    );
    assert_eq!(
        vif_timeout(&serde_json::json!({})).expect("default"),
        DEFAULT_VIF_TIMEOUT
    );
    assert_eq!(
        vif_timeout(&serde_json::json!({"vifTimeout": 2})).expect("2"),
        Duration::from_secs(2)
    );
    let e = vif_timeout(&serde_json::json!({"vifTimeout": "soon"})).expect_err("text");
    assert!(e.msg.contains("vifTimeout"), "{}", e.msg);
    assert_eq!(
        PodRef::from_args(&BTreeMap::from([(
            "K8S_POD_NAME".to_owned(),
            "web".to_owned()
        )])),
        None
    );
}

#[test]
fn merged_results_index_addresses_by_interface_and_keep_one_default_route() {
    let result = |name: &str, address: &str, subnet: &str| CniResult {
        interfaces: vec![nimbess_client::cni::Interface {
            name: name.into(),
            mac: None,
            mtu: None,
            sandbox: Some("/run/netns/p".into()),
        }],
        ips: vec![nimbess_client::cni::IpConfig {
            address: address.parse().expect("cidr"),
            gateway: None,
            interface: Some(0),
        }],
        routes: vec![
            nimbess_client::cni::Route {
                dst: subnet.parse().expect("cidr"),
                gw: None,
            },
            nimbess_client::cni::Route {
                dst: "0.0.0.0/0".parse().expect("cidr"),
                gw: Some(address.split('/').next().expect("ip").parse().expect("ip")),
            },
        ],
        dns: nimbess_client::cni::Dns::default(),
    };
    let merged = merge(vec![
        result("eth0", "10.0.0.2/24", "10.0.0.0/24"),
        result("eth1", "10.1.0.2/24", "10.1.0.0/24"),
    ]);
    let names: Vec<&str> = merged.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["eth0", "eth1"]);
    assert_eq!(merged.ips[1].interface, Some(1));
    assert_eq!(merged.routes.len(), 3);
    assert_eq!(
        merged.routes.iter().filter(|r| r.dst.prefix() == 0).count(),
        1
    );
}
