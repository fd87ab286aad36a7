use serde_json::json;

use super::*;

fn result() -> CniResult {
    CniResult {
        interfaces: vec![Interface {
            name: "eth0".into(),
            mac: Some("02:00:00:00:00:01".parse().expect("mac")),
            mtu: Some(1500),
            sandbox: Some("/var/run/netns/x".into()),
        }],
        ips: vec![IpConfig {
            address: "10.0.0.2/24".parse().expect("cidr"),
            gateway: Some("10.0.0.1".parse().expect("ip")),
            interface: Some(0),
        }],
        routes: vec![Route {
            dst: "10.0.0.0/24".parse().expect("cidr"),
            gw: None,
        }],
        dns: Dns::default(),
    }
}

#[test]
fn result_documents_follow_the_version() {
    let r = result();
    assert_eq!(
        r.to_json("1.1.0"),
        json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "eth0", "mac": "02:00:00:00:00:01", "mtu": 1500, "sandbox": "/var/run/netns/x"}],
            "ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0}],
            "routes": [{"dst": "10.0.0.0/24"}],
            "dns": {},
        })
    );
    assert_eq!(
        r.to_json("0.4.0"),
        json!({
            "cniVersion": "0.4.0",
            "interfaces": [{"name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": "/var/run/netns/x"}],
            "ips": [{"version": "4", "address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0}],
            "routes": [{"dst": "10.0.0.0/24"}],
            "dns": {},
        })
    );
    assert_eq!(version_json("1.0.0")["supportedVersions"][2], "1.1.0");
}

#[test]
fn error_documents_carry_the_spec_number() {
    let e = CniError::new(ErrorCode::InvalidConfig, "bad").to_json("1.0.0");
    assert_eq!(
        e,
        json!({"cniVersion":"1.0.0","code":7,"msg":"bad","details":""})
    );
    let e = CniError::new(ErrorCode::DriverFailure, "veth").with_details("gone");
    assert_eq!(e.to_json("1.1.0")["code"], 101);
    assert_eq!(e.to_json("1.1.0")["details"], "gone");
}

#[test]
fn error_codes_round_trip_through_their_numbers() {
    for (code, number) in ErrorCode::NUMBERS {
        assert_eq!(code.number(), number);
        assert_eq!(ErrorCode::try_from(number), Ok(code));
    }
    assert_eq!(ErrorCode::try_from(2), Err(UnknownErrorCode(2)));
    assert_eq!(ErrorCode::try_from(0), Err(UnknownErrorCode(0)));
}

#[test]
fn commands_parse_their_own_spelling_only() {
    for c in Command::ALL {
        assert_eq!(Command::parse(c.as_str()), Some(c));
    }
    assert_eq!(Command::parse("add"), None);
    assert_eq!(Command::parse(""), None);
}

#[test]
fn attachments_use_the_spec_field_names() {
    let a: Vec<Attachment> =
        serde_json::from_value(json!([{"containerID": "c1", "ifname": "eth0"}])).expect("parse");
    assert_eq!(
        a,
        [Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into()
        }]
    );
}
