use super::*;

fn result() -> CniResult {
    CniResult {
        interfaces: vec![Interface {
            name: "eth0".into(),
            mac: Some("02:00:00:00:00:01".parse().expect("mac")),
            mtu: Some(1450),
            sandbox: Some("/run/netns/a".into()),
        }],
        ips: vec![
            IpConfig {
                address: "10.0.0.2/24".parse().expect("cidr"),
                gateway: Some("10.0.0.1".parse().expect("ip")),
                interface: Some(0),
            },
            IpConfig {
                address: "fd00:10::2/64".parse().expect("cidr6"),
                gateway: Some("fd00:10::1".parse().expect("ip6")),
                interface: Some(0),
            },
        ],
        routes: vec![
            Route {
                dst: "0.0.0.0/0".parse().expect("cidr"),
                gw: Some("10.0.0.1".parse().expect("ip")),
            },
            Route {
                dst: "::/0".parse().expect("cidr6"),
                gw: Some("fd00:10::1".parse().expect("ip6")),
            },
        ],
        dns: Dns::default(),
    }
}

#[test]
fn results_and_errors_round_trip_through_the_reply() {
    let ok = Ok(Some(result()));
    assert_eq!(outcome(reply(&ok)).expect("parses"), ok);
    let none = Ok(None);
    assert_eq!(outcome(reply(&none)).expect("parses"), none);
    let err = Err(CniError::new(ErrorCode::DriverFailure, "veth").with_details("gone"));
    assert_eq!(outcome(reply(&err)).expect("parses"), err);
}

#[test]
fn requests_round_trip() {
    let req = CniRequest {
        cni_version: "1.0.0".into(),
        container_id: "c".into(),
        netns: "/run/netns/c".into(),
        ifname: "eth0".into(),
        args: [("K8S_POD_NAME".to_string(), "web".to_string())].into(),
        network: "blue".into(),
        network_config: serde_json::json!({"name": "blue"}),
        prev_result: Some(serde_json::json!({"ips": []})),
        pod_name: Some("web".into()),
        pod_namespace: None,
        valid_attachments: vec![Attachment {
            container_id: "c".into(),
            ifname: "eth0".into(),
        }],
        vif: Some(VifRef {
            pod_uid: "u".into(),
            key: "network/ns/a/0".into(),
        }),
    };
    let back = CniRequest::try_from(pb::CniRequest::from(&req)).expect("parses");
    assert_eq!(back, req);
}

#[test]
fn a_bad_field_is_named() {
    let mut wire = pb::CniResult::from(&result());
    wire.ips[0].address = "10.0.0.300/24".into();
    let e = CniResult::try_from(wire).expect_err("bad address");
    assert!(e.to_string().contains("ips.address"), "{e}");
    let wire = pb::CniRequest {
        prev_result_json: "{".into(),
        ..Default::default()
    };
    let e = CniRequest::try_from(wire).expect_err("bad json");
    assert!(e.to_string().contains("prev_result_json"), "{e}");
    let e = CniError::try_from(pb::CniError {
        code: 42,
        ..Default::default()
    })
    .expect_err("unknown code");
    assert!(e.to_string().contains("42"), "{e}");
}
