use super::nft::{AddressField, RuleVerdict, parse_table};
use super::parse_port;
use nephrite_pipeline::{Ipv4Cidr, Protocol};

#[test]
fn a_port_takes_an_optional_protocol_and_bad_ones_are_named() {
    assert_eq!(parse_port("8080").unwrap(), (8080, None));
    assert_eq!(parse_port("53/UDP").unwrap(), (53, Some(Protocol::Udp)));
    let e = parse_port("53/icmp").unwrap_err().to_string();
    assert!(e.contains("\"icmp\""), "{e}");
    let e = parse_port("0").unwrap_err().to_string();
    assert!(e.contains("PORT \"0\""), "{e}");
}

/// What `nft -j list table` prints for a pod's chain (nft 1.0.6).
const TABLE: &str = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
 {"table": {"family": "ip", "name": "t", "handle": 1}},
 {"chain": {"family": "ip", "table": "t", "name": "in.10.0.0.2", "handle": 2}},
 {"rule": {"family": "ip", "table": "t", "chain": "forward", "handle": 4, "expr": [
   {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "10.0.0.2"}},
   {"jump": {"target": "in.10.0.0.2"}}]}},
 {"rule": {"family": "ip", "table": "t", "chain": "in.10.0.0.2", "handle": 5, "expr": [
   {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "10.0.0.3"}},
   {"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 80}},
   {"counter": {"packets": 7, "bytes": 420}}, {"drop": null}]}},
 {"rule": {"family": "ip", "table": "t", "chain": "in.10.0.0.2.pass", "handle": 7, "expr": [
   {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "10.0.0.0", "len": 24}}}},
   {"match": {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "10.0.0.9"}},
   {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "udp"}},
   {"match": {"op": "==", "left": {"payload": {"protocol": "th", "field": "dport"}}, "right": {"range": [80, 90]}}},
   {"return": null}]}}]}"#;

#[test]
fn every_spelling_of_a_rule_lands_in_the_same_fields() {
    let t = parse_table(TABLE).expect("parses");
    assert_eq!(t.chains, ["in.10.0.0.2"]);
    let jump = &t.rules[0];
    assert_eq!(
        jump.peer,
        Some((AddressField::Destination, "10.0.0.2/32".parse().unwrap()))
    );
    assert_eq!(jump.verdict, Some(RuleVerdict::Jump("in.10.0.0.2".into())));
    let drop = &t.rules[1];
    assert_eq!((drop.handle, drop.packets), (5, Some(7)));
    assert_eq!(drop.protocol, Some(Protocol::Tcp));
    assert_eq!(drop.ports, Some((80, 80)));
    assert_eq!(drop.verdict, Some(RuleVerdict::Drop));
    let allow = &t.rules[2];
    let net: Ipv4Cidr = "10.0.0.0/24".parse().unwrap();
    assert_eq!(allow.peer, Some((AddressField::Source, net)));
    assert_eq!(allow.except, ["10.0.0.9/32".parse::<Ipv4Cidr>().unwrap()]);
    assert_eq!(
        (allow.protocol, allow.ports),
        (Some(Protocol::Udp), Some((80, 90)))
    );
    assert_eq!(allow.verdict, Some(RuleVerdict::Return));
}

#[test]
fn output_that_is_not_nftables_json_is_refused() {
    assert!(parse_table("{}").unwrap_err().contains("nftables"));
    assert!(parse_table("table ip t {").is_err());
}
