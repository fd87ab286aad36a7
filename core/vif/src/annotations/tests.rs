use super::*;

#[test]
fn id_lists_are_json_lists_of_ids() {
    assert_eq!(
        parse_id_list(SPEC_PORTS, r#"[ "a-1", "b_2" ]"#).unwrap(),
        ["a-1", "b_2"]
    );
    assert_eq!(
        parse_id_list(SPEC_PORTS, "[]").unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn the_seeds_own_spec_ports_example_is_refused_naming_annotation_and_position() {
    let seed = "[\n    \"id_of_direct_precreated_port\".\n    \"id_of_normal_precreated_port\"\n]";
    let error = parse_id_list(SPEC_PORTS, seed).unwrap_err();
    assert_eq!(
        error.to_string(),
        "annotation spec-ports: not a JSON list of ids: expected `,` or `]` at line 2 column 35"
    );
}

#[test]
fn ids_that_would_change_a_url_are_refused() {
    for bad in [r#"["a/b"]"#, r#"[""]"#, r#"["a b"]"#, r#"["..%2F"]"#] {
        let error = parse_id_list(ADDITIONAL_SUBNETS, bad).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("annotation openstack.org/kuryr-additional-subnets: "),
            "{error}"
        );
    }
    let too_many = serde_json::to_string(&vec!["a"; MAX_REQUESTS + 1]).unwrap();
    assert_eq!(
        parse_id_list(SPEC_PORTS, &too_many)
            .unwrap_err()
            .to_string(),
        "annotation spec-ports: 33 ids (at most 32)"
    );
}

#[test]
fn networks_read_both_the_text_and_the_json_forms() {
    let text = parse_networks("shop", "net-a, other/net-b@vlan7 ,net-a").unwrap();
    let json = parse_networks(
        "shop",
        r#"[{"name": "net-a"}, {"name": "net-b", "namespace": "other", "interface": "vlan7", "ips": ["10.0.0.1/24"]}, {"name": "net-a"}]"#,
    )
    .unwrap();
    assert_eq!(text, json);
    assert_eq!(
        text[1],
        NetworkSelection {
            namespace: "other".into(),
            name: "net-b".into(),
            interface: Some("vlan7".into()),
        }
    );
    assert_eq!(text[0].namespace, "shop");
    assert!(parse_networks("shop", "").unwrap().is_empty());
}

#[test]
fn bad_network_selections_name_what_is_wrong() {
    let cases = [
        ("a,,b", "empty entry in \"a,,b\""),
        (
            "Net_A",
            "\"shop/Net_A\" is not a namespace/name of a NetworkAttachmentDefinition",
        ),
        ("a@eth0", "interface eth0 is the pod's main VIF"),
        ("a@x,b@x", "interface x is asked for twice"),
        (
            "a@this-is-too-long-for-linux",
            "\"this-is-too-long-for-linux\" is not an interface name (1-15 bytes, no / : or spaces)",
        ),
        (
            "[{\"nam\": \"a\"}]",
            "not a JSON list of networks: missing field `name` at line 1 column 13",
        ),
    ];
    for (value, error) in cases {
        assert_eq!(
            parse_networks("shop", value).unwrap_err().to_string(),
            format!("annotation k8s.v1.cni.cncf.io/networks: {error}"),
            "{value}"
        );
    }
}

#[test]
fn kuryr_config_gives_the_subnet_and_whether_ports_are_sriov() {
    assert_eq!(
        parse_kuryr_config("ns/n", r#"{"subnetId": "s1"}"#).unwrap(),
        KuryrNetworkConfig {
            subnet_id: "s1".into(),
            sriov: false
        }
    );
    assert!(
        parse_kuryr_config("ns/n", r#"{"subnetId": "s1", "driverType": "sriov"}"#)
            .unwrap()
            .sriov
    );
    assert_eq!(
        parse_kuryr_config("ns/n", r#"{"subnetId": "s1", "driverType": "macvtap"}"#)
            .unwrap_err()
            .to_string(),
        "NetworkAttachmentDefinition ns/n: openstack.org/kuryr-config: driverType \"macvtap\" (expected kuryr-kubernetes or sriov)"
    );
}

#[test]
fn a_nimbess_config_names_its_network() {
    assert_eq!(
        parse_nimbess_config(
            "ns/n",
            r#"{"cniVersion": "1.0.0", "name": "blue", "type": "nimbess-cni"}"#
        )
        .unwrap(),
        "blue"
    );
    assert!(
        parse_nimbess_config("ns/n", r#"{"type": "nimbess-cni"}"#)
            .unwrap_err()
            .to_string()
            .starts_with("NetworkAttachmentDefinition ns/n: spec.config: not a CNI configuration with a name: missing field `name`")
    );
}

#[test]
fn vf_counts_are_small_whole_numbers() {
    assert_eq!(parse_vf_count("c", "r", "2").unwrap(), 2);
    assert_eq!(parse_vf_count("c", "r", "0").unwrap(), 0);
    for bad in ["", "-1", "1.5", "2k", "99999999999999999999999"] {
        assert!(
            parse_vf_count("c", "r", bad)
                .unwrap_err()
                .to_string()
                .starts_with("container \"c\": resource r: quantity"),
            "{bad}"
        );
    }
}
