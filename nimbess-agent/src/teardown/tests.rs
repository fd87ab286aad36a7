use super::*;
use crate::driver::kernel::firewall::nftables::{EGRESS_TABLE, POLICY_TABLE, SERVICES_TABLE};
use crate::driver::kernel::routed::route_table;
use crate::naming::{bridge_name, host_veth_name, miss_sink_name, miss_sink_peer_name, vxlan_name};

const NETWORKS: [&str; 5] = ["pods", "blue", "a-very-long-network-name", "x", "routed"];

#[test]
fn every_name_the_agent_gives_a_link_is_recognised_with_its_kind() {
    for net in NETWORKS {
        assert_eq!(
            agent_link_kind(&bridge_name(net)),
            Some(AgentLinkKind::Bridge)
        );
        assert_eq!(
            agent_link_kind(&vxlan_name(net)),
            Some(AgentLinkKind::Vxlan)
        );
        assert_eq!(
            agent_link_kind(&miss_sink_name(net)),
            Some(AgentLinkKind::Veth)
        );
        assert_eq!(
            agent_link_kind(&miss_sink_peer_name(net)),
            Some(AgentLinkKind::Veth)
        );
        let port = format!("{net}/container-1/eth0");
        assert_eq!(
            agent_link_kind(&host_veth_name(&port)),
            Some(AgentLinkKind::Veth)
        );
    }
}

#[test]
fn names_that_only_look_like_the_agents_are_not_its() {
    for name in [
        "eth0",
        "nb0",
        "nbfoo",
        "nb0123456789a",  // one digit too many for a bridge
        "nv0123456789",   // a bridge's length, a veth's prefix
        "nb0123456789AB", // upper case: never the agent's
        "nbABCDEF0123",
        "nx01234567g9",
        "docker0",
        "n",
        "",
    ] {
        assert_eq!(agent_link_kind(name), None, "{name}");
    }
}

#[test]
fn the_routed_networks_tables_are_in_the_agents_range_and_the_kernels_are_not() {
    for net in NETWORKS {
        assert!(is_agent_table(route_table(net)), "{net}");
    }
    for table in [0, 253, 254, 255, 100, 0x0fff_ffff, 0x2000_0000, u32::MAX] {
        assert!(!is_agent_table(table), "{table}");
    }
}

#[test]
fn the_agents_nftables_tables_are_recognised_and_no_other() {
    for name in [SERVICES_TABLE, POLICY_TABLE, EGRESS_TABLE] {
        assert!(is_agent_nft_table("ip", name), "{name}");
    }
    assert!(is_agent_nft_table("ip6", "nimbess"));
    assert!(is_agent_nft_table("netdev", &host_veth_name("pods/c/eth0")));
    for (family, name) in [
        ("ip", "filter"),
        ("ip", "nimbessx"),
        ("inet", "firewalld"),
        ("netdev", "eth0"),
        ("netdev", &bridge_name("pods")),
        ("bridge", "nimbess"),
        ("arp", "nimbess"),
    ] {
        assert!(!is_agent_nft_table(family, name), "{family} {name}");
    }
}

#[test]
fn what_was_removed_reads_as_a_person_would_say_it() {
    let removed = Removed::Link {
        name: "nb0123456789".into(),
        kind: AgentLinkKind::Bridge,
    };
    assert_eq!(removed.to_string(), "link nb0123456789 (bridge)");
    let json = serde_json::to_value(&removed).expect("json");
    assert_eq!(json["object"], "link");
    assert_eq!(json["kind"], "bridge");
    let table = Removed::NftTable {
        family: "ip".into(),
        name: "nimbess-svc".into(),
    };
    assert_eq!(table.to_string(), "nftables table ip nimbess-svc");
}
