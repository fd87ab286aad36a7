use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn environment_errors_are_code_4_naming_the_variable() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "CNI_COMMAND"),
        (&[("CNI_COMMAND", "FROB")], "FROB"),
        (
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_IFNAME", "eth0"),
                ("CNI_NETNS", "/x"),
            ],
            "CNI_CONTAINERID",
        ),
        (
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "c"),
                ("CNI_NETNS", "/x"),
            ],
            "CNI_IFNAME",
        ),
        (
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "c"),
                ("CNI_IFNAME", "eth0"),
            ],
            "CNI_NETNS",
        ),
        (
            &[
                ("CNI_COMMAND", "CHECK"),
                ("CNI_CONTAINERID", "c"),
                ("CNI_IFNAME", "eth0"),
            ],
            "CNI_NETNS",
        ),
        (
            &[
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", "c"),
                ("CNI_IFNAME", "a/b"),
            ],
            "CNI_IFNAME",
        ),
        (
            &[
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", "c"),
                ("CNI_IFNAME", "e"),
                ("CNI_ARGS", "novalue"),
            ],
            "novalue",
        ),
    ];
    for (vars, named) in cases {
        let err = Invocation::from_env(&env(vars)).expect_err("must fail");
        assert_eq!(err.code, code::INVALID_ENVIRONMENT, "{vars:?}");
        assert!(err.msg.contains(named), "{vars:?}: {}", err.msg);
    }
}

#[test]
fn del_needs_no_netns_and_cni_path_is_optional() {
    let inv = Invocation::from_env(&env(&[
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_ARGS", "K8S_POD_NAME=web;K8S_POD_NAMESPACE=prod"),
    ]))
    .expect("valid");
    assert_eq!(inv.command, Command::Del);
    assert_eq!(inv.netns, "");
    assert_eq!(inv.args["K8S_POD_NAME"], "web");
    for cmd in ["STATUS", "GC", "VERSION"] {
        assert!(
            Invocation::from_env(&env(&[("CNI_COMMAND", cmd)])).is_ok(),
            "{cmd}"
        );
    }
}

#[test]
fn config_errors() {
    assert_eq!(
        NetConf::parse(b"{not json").expect_err("6").code,
        code::DECODE
    );
    assert_eq!(NetConf::parse(b"[1]").expect_err("6").code, code::DECODE);
    let e = NetConf::parse(br#"{"cniVersion":"1.1.0","type":"nimbess-cni"}"#).expect_err("7");
    assert_eq!(e.code, code::INVALID_CONFIG);
    assert!(e.msg.contains("name"));
    let e = NetConf::parse(br#"{"cniVersion":"9.9.9","name":"n","type":"t"}"#).expect_err("1");
    assert_eq!(e.code, code::INCOMPATIBLE_VERSION);
    let e = NetConf::parse(br#"{"cniVersion":"1.1.0","name":"n","type":"t","agentSocket":5}"#)
        .expect_err("7");
    assert_eq!(e.code, code::INVALID_CONFIG);
}

#[test]
fn config_fields() {
    let c = NetConf::parse(
        br#"{"cniVersion":"1.1.0","name":"blue","type":"nimbess-cni",
            "cni.dev/attachments":[{"containerID":"c1","ifname":"eth0"}],
            "prevResult":{"ips":[]}}"#,
    )
    .expect("valid");
    assert_eq!(c.agent_socket, DEFAULT_AGENT_SOCKET);
    assert_eq!(
        c.valid_attachments,
        Some(vec![("c1".into(), "eth0".into())])
    );
    assert!(c.prev_result.is_some());
    let c = NetConf::parse(
        br#"{"cniVersion":"1.0.0","name":"b","type":"t","cni.dev/valid-attachments":[]}"#,
    )
    .expect("valid");
    assert_eq!(
        c.valid_attachments,
        Some(vec![]),
        "an empty list is meaningful"
    );
}

#[test]
fn result_documents_follow_the_version() {
    let r = pb::CniResult {
        interfaces: vec![pb::Interface {
            name: "eth0".into(),
            mac: "02:00:00:00:00:01".into(),
            mtu: 1500,
            sandbox: "/var/run/netns/x".into(),
        }],
        ips: vec![pb::IpConfig {
            address: "10.0.0.2/24".into(),
            gateway: "10.0.0.1".into(),
            interface: 0,
        }],
        routes: vec![pb::Route {
            dst: "10.0.0.0/24".into(),
            gw: String::new(),
        }],
        dns: None,
    };
    let v = result_json(&r, "1.1.0");
    assert_eq!(v["cniVersion"], "1.1.0");
    assert_eq!(v["interfaces"][0]["mtu"], 1500);
    assert_eq!(v["ips"][0]["gateway"], "10.0.0.1");
    assert!(v["ips"][0].get("version").is_none());
    let v = result_json(&r, "0.4.0");
    assert_eq!(v["ips"][0]["version"], "4");
    assert_eq!(version_json("1.0.0")["supportedVersions"][2], "1.1.0");
    let e = CniFailure::new(7, "bad").to_json("1.0.0");
    assert_eq!(
        e,
        json!({"cniVersion":"1.0.0","code":7,"msg":"bad","details":""})
    );
}
