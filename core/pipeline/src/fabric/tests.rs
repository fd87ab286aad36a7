use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;
use crate::addr::{Ipv4Cidr, Mac};
use crate::module::{RemoteHost, RenderFacts, port_id};

fn network(name: String, octet: u8, mtu: Option<u32>) -> NetworkSpec {
    let mut spec = NetworkSpec::l2(&name, format!("10.{octet}.0.0/24").parse().expect("cidr"));
    spec.mtu = mtu;
    spec
}

fn networks() -> impl Strategy<Value = Vec<NetworkSpec>> {
    proptest::collection::vec(
        (
            "[a-d]",
            0u8..3,
            proptest::option::of(prop_oneof![Just(1400u32), Just(9000u32)]),
        )
            .prop_map(|(n, o, m)| network(n, o, m)),
        0..5,
    )
}

proptest! {
    #[test]
    fn an_encapsulated_port_frame_fits_the_network_mtu(
        mtu in proptest::option::of(576u32..=65535),
        in_fabric in any::<bool>(),
    ) {
        let spec = network("n".into(), 0, mtu);
        let port = port_mtu(&spec, in_fabric);
        let overhead = if in_fabric { VXLAN_OVERHEAD } else { 0 };
        prop_assert_eq!(port + overhead, spec.mtu());
    }

    #[test]
    fn effective_networks_are_the_union_with_the_config_winning(
        configured in networks(),
        published in networks(),
    ) {
        let published: BTreeMap<String, NetworkSpec> =
            published.into_iter().map(|s| (s.name.clone(), s)).collect();
        let effective = effective_networks(&configured, &published);
        let names: Vec<&str> = effective.networks.iter().map(|s| s.name.as_str()).collect();
        let mut expected: Vec<&str> = configured
            .iter()
            .map(|s| s.name.as_str())
            .chain(published.keys().map(String::as_str))
            .collect();
        expected.sort_unstable();
        expected.dedup();
        prop_assert_eq!(names, expected, "one network per name, sorted");
        for spec in &effective.networks {
            // the last declaration of a name in the config wins, else the fabric's
            let want = configured
                .iter()
                .rev()
                .find(|c| c.name == spec.name)
                .or_else(|| published.get(&spec.name));
            prop_assert_eq!(Some(spec), want);
        }
        for name in &effective.overridden {
            let theirs = &published[name];
            prop_assert!(configured.iter().any(|c| &c.name == name && c != theirs));
        }
        for c in &configured {
            if published.get(&c.name).is_some_and(|p| p != c) {
                prop_assert!(effective.overridden.contains(&c.name));
            }
        }
    }

    #[test]
    fn remote_records_match_whatever_their_slots(
        slot_a in 0u32..64,
        slot_b in 0u32..64,
        change in 0usize..7,
    ) {
        let a = remote_port(slot_a);
        let mut b = remote_port(slot_b);
        prop_assert!(same_remote_port(&a, &b));
        prop_assert!(same_remote_port(&b, &a));
        match change {
            0 => b.network = "other".into(),
            1 => b.address = "10.0.0.9/24".parse().expect("cidr"),
            2 => if let Some(f) = &mut b.facts { f.mac = "02:00:00:00:00:09".parse().expect("mac") },
            3 => b.remote = Some(RemoteHost { host: "h2".into(), underlay: Ipv4Addr::new(192, 0, 2, 9) }),
            4 => b.container_id = "other".into(),
            5 => b.ifname = "net1".into(),
            _ => b.facts = None,
        }
        prop_assert!(!same_remote_port(&a, &b), "change {} must be seen", change);
    }
}

fn remote_port(slot: u32) -> Port {
    let address: Ipv4Cidr = "10.0.0.5/24".parse().expect("cidr");
    let mac: Mac = "02:00:00:00:00:05".parse().expect("mac");
    Port {
        id: port_id("c1", "eth0"),
        network: "blue".into(),
        container_id: "c1".into(),
        ifname: "eth0".into(),
        netns: String::new(),
        address,
        slot,
        facts: Some(RenderFacts {
            mac,
            ifindex: 0,
            modules: BTreeMap::new(),
        }),
        remote: Some(RemoteHost {
            host: "h1".into(),
            underlay: Ipv4Addr::new(192, 0, 2, 1),
        }),
        pod: None,
        requested_mac: None,
    }
}
