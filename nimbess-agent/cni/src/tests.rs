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
        assert_eq!(err.code, ErrorCode::InvalidEnvironment, "{vars:?}");
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
        ErrorCode::Decode
    );
    assert_eq!(
        NetConf::parse(b"[1]").expect_err("6").code,
        ErrorCode::Decode
    );
    let e = NetConf::parse(br#"{"cniVersion":"1.1.0","type":"nimbess-cni"}"#).expect_err("7");
    assert_eq!(e.code, ErrorCode::InvalidConfig);
    assert!(e.msg.contains("name"));
    let e = NetConf::parse(br#"{"cniVersion":"9.9.9","name":"n","type":"t"}"#).expect_err("1");
    assert_eq!(e.code, ErrorCode::IncompatibleVersion);
    let e = NetConf::parse(br#"{"cniVersion":"1.1.0","name":"n","type":"t","agentSocket":5}"#)
        .expect_err("7");
    assert_eq!(e.code, ErrorCode::InvalidConfig);
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
        Some(vec![Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into()
        }])
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
fn attachments_that_are_not_a_list_of_pairs_are_code_7() {
    for bad in [
        r#"{"cniVersion":"1.1.0","name":"b","type":"t","cni.dev/valid-attachments":{}}"#,
        r#"{"cniVersion":"1.1.0","name":"b","type":"t","cni.dev/valid-attachments":[{"ifname":"eth0"}]}"#,
    ] {
        let e = NetConf::parse(bad.as_bytes()).expect_err("7");
        assert_eq!(e.code, ErrorCode::InvalidConfig, "{bad}");
        assert!(e.msg.contains("valid-attachments"), "{}", e.msg);
    }
}

#[test]
fn the_request_carries_the_pod_from_cni_args() {
    let inv = Invocation::from_env(&env(&[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "c1"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_NETNS", "/run/netns/x"),
        ("CNI_ARGS", "K8S_POD_NAME=web;K8S_POD_NAMESPACE=prod"),
    ]))
    .expect("valid");
    let conf = NetConf::parse(br#"{"cniVersion":"1.0.0","name":"blue","type":"nimbess-cni"}"#)
        .expect("valid");
    let req = request(&inv, &conf);
    assert_eq!(req.pod_name.as_deref(), Some("web"));
    assert_eq!(req.pod_namespace.as_deref(), Some("prod"));
    assert_eq!(req.network, "blue");
    assert_eq!(req.network_config["type"], "nimbess-cni");
    assert!(req.prev_result.is_none());
}

#[test]
fn stdin_is_read_up_to_the_limit_only() {
    let ok = read_config(&b"{}"[..], 2).expect("within the limit");
    assert_eq!(ok, b"{}");
    // an endless stdin is not buffered: reading stops one byte past the limit
    let e = read_config(std::io::repeat(b' '), 1024).expect_err("too large");
    assert_eq!(e.code, ErrorCode::Decode);
    assert!(e.msg.contains("1024"), "{}", e.msg);
}
