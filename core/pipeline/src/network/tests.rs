//! Network declarations: one subnet (as before), dual-stack, and what is refused.

use super::*;

fn parse(yaml: &str) -> Result<NetworkSpec, String> {
    serde_norway::from_str::<NetworkSpec>(yaml).map_err(|e| e.to_string())
}

#[test]
fn a_single_ipv4_subnet_still_reads() {
    let spec = parse("name: pods\nsubnet: 10.1.0.0/24\n").expect("parse");
    assert_eq!(
        spec,
        NetworkSpec::l2("pods", "10.1.0.0/24".parse().unwrap())
    );
    assert_eq!(spec.families(), [crate::AddressFamily::IPv4]);
    assert_eq!(spec.gateway6(), None);
}

#[test]
fn subnets_in_either_order_give_one_per_family() {
    let a = parse("name: d\nsubnets: [10.1.0.0/24, 'fd00:10::/64']\n").expect("v4 first");
    let b = parse("name: d\nsubnets: ['fd00:10::/64', 10.1.0.0/24]\n").expect("v6 first");
    assert_eq!(a, b);
    assert_eq!(a.subnet.to_string(), "10.1.0.0/24");
    assert_eq!(
        a.subnet6.map(|s| s.to_string()).as_deref(),
        Some("fd00:10::/64")
    );
    assert_eq!(a.gateway6(), Some("fd00:10::1".parse().unwrap()));
    assert_eq!(a.egress6, Egress6::Masquerade);
    a.validate().expect("valid");
}

#[test]
fn the_serialized_form_reads_back() {
    let spec = parse(
        "name: d\nsubnets: [10.1.0.0/24, 'fd00:10::/64']\ngateway6: 'fd00:10::fe'\negress6: routed\n",
    )
    .expect("parse");
    let json = serde_json::to_string(&spec).expect("serialize");
    assert!(json.contains("\"subnet6\":\"fd00:10::/64\""), "{json}");
    let back: NetworkSpec = serde_json::from_str(&json).expect("read back");
    assert_eq!(back, spec);
    assert_eq!(back.gateway6(), Some("fd00:10::fe".parse().unwrap()));
    assert_eq!(back.egress6, Egress6::Routed);
}

#[test]
fn bad_declarations_name_the_network_and_the_problem() {
    for (yaml, want) in [
        ("name: x\n", "network x: no subnet"),
        (
            "name: x\nsubnet: 10.1.0.0/24\nsubnets: [10.2.0.0/24]\n",
            "network x: `subnets` replaces",
        ),
        (
            "name: x\nsubnets: [10.1.0.0/24, 10.2.0.0/24]\n",
            "network x: two IPv4 subnets",
        ),
        (
            "name: x\nsubnets: ['fd00::/64']\n",
            "network x: an IPv6-only network (fd00::/64) is not supported",
        ),
        (
            "name: x\nsubnets: [10.1.0.0/24, 'fd00::/64', 10.3.0.0/24]\n",
            "3 subnets",
        ),
        ("name: x\nsubnets: ['fd00::/200']\n", "invalid IPv6 prefix"),
        (
            "name: x\nsubnet: 10.1.0.0/24\nsubnet7: 1\n",
            "unknown field `subnet7`",
        ),
    ] {
        let err = parse(yaml).expect_err(yaml);
        assert!(err.contains(want), "{yaml}: {err}");
    }
}

#[test]
fn validate_refuses_unusable_ipv6_subnets_and_gateways() {
    let v4: Ipv4Cidr = "10.1.0.0/24".parse().unwrap();
    let with = |subnet6: &str, gw: Option<&str>| {
        let mut s = NetworkSpec::l2("n", v4).with_v6(subnet6.parse().unwrap());
        s.gateway6 = gw.map(|g| g.parse().unwrap());
        s.validate().map_err(|e| e.to_string())
    };
    with("fd00::/64", None).expect("plain");
    with("fd00::/126", Some("fd00::3")).expect("smallest");
    for (subnet6, gw, want) in [
        ("fd00::/127", None, "no room for hosts"),
        ("fd00::5/64", None, "host bits set"),
        (
            "fd00::/64",
            Some("fd01::1"),
            "gateway6 fd01::1 is not a host",
        ),
        ("fd00::/64", Some("fd00::"), "gateway6 fd00:: is not a host"),
    ] {
        let err = with(subnet6, gw).expect_err(subnet6);
        assert!(
            err.starts_with("network n: ") && err.contains(want),
            "{err}"
        );
    }
    let mut s = NetworkSpec::l2("n", v4);
    s.gateway6 = Some("fd00::1".parse().unwrap());
    assert!(
        s.validate()
            .unwrap_err()
            .to_string()
            .contains("without an IPv6 subnet")
    );
}
