//! IPAM per family on a dual-stack network, against a plain reference:
//! every owner holds one address of each family or none, no address twice,
//! never the gateway nor the subnet-router anycast, the lowest free one
//! first, and an exhausted family takes nothing of the other.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use nephrite_pipeline::{Error, Ipam, Model, NetworkSpec, Owner, PortRequest};
use proptest::prelude::*;

/// A /28 (13 addresses besides the gateway) beside a /125 (6 besides the
/// anycast and the gateway): the IPv6 pool runs out first.
fn spec() -> NetworkSpec {
    NetworkSpec::l2("dual", "10.9.0.0/28".parse().expect("v4"))
        .with_v6("fd00:9::/125".parse().expect("v6"))
}

fn owner(k: u8) -> Owner {
    Owner {
        container_id: format!("c{k}"),
        ifname: "eth0".into(),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Allocate(u8),
    Release(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..12).prop_map(Op::Allocate),
        1 => (0u8..12).prop_map(Op::Release),
    ]
}

/// The reference: holders by address, lowest free by a scan of the numbers.
#[derive(Default)]
struct Reference {
    v4: BTreeMap<u8, Ipv4Addr>,
    v6: BTreeMap<u8, Ipv6Addr>,
}

impl Reference {
    fn lowest4(&self) -> Option<Ipv4Addr> {
        // hosts .1..=.14; .1 is the gateway
        (2u8..=14)
            .map(|h| Ipv4Addr::new(10, 9, 0, h))
            .find(|a| !self.v4.values().any(|b| b == a))
    }
    fn lowest6(&self) -> Option<Ipv6Addr> {
        // fd00:9::0 is the anycast, ::1 the gateway, ::2..=::7 for pods
        (2u16..=7)
            .map(|h| Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, h))
            .find(|a| !self.v6.values().any(|b| b == a))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn both_families_or_neither_lowest_free_first(ops in prop::collection::vec(op(), 1..60)) {
        let mut ipam = Ipam::new();
        ipam.sync_networks(&[spec()]).expect("pools");
        let mut reference = Reference::default();
        for op in &ops {
            match *op {
                Op::Allocate(k) => {
                    let got = ipam.allocate_dual("dual", &owner(k));
                    match (reference.v4.get(&k), reference.v6.get(&k)) {
                        (Some(a4), Some(a6)) => {
                            let (v4, v6) = got.expect("idempotent");
                            prop_assert_eq!((v4.addr, v6.map(|a| a.addr)), (*a4, Some(*a6)));
                        }
                        _ => match (reference.lowest4(), reference.lowest6()) {
                            (Some(a4), Some(a6)) => {
                                let (v4, v6) = got.expect("room in both");
                                prop_assert_eq!(v4.to_string(), format!("{a4}/28"));
                                prop_assert_eq!(v6.map(|a| a.to_string()), Some(format!("{a6}/125")));
                                reference.v4.insert(k, a4);
                                reference.v6.insert(k, a6);
                            }
                            _ => prop_assert_eq!(got, Err(Error::PoolExhausted("dual".into()))),
                        },
                    }
                }
                Op::Release(k) => {
                    let freed = ipam.release("dual", &owner(k));
                    prop_assert_eq!(freed, reference.v4.remove(&k));
                    reference.v6.remove(&k);
                }
            }
            // the pools hold exactly what the reference does
            let pool = ipam.pool("dual").expect("v4 pool");
            let pool6 = ipam.pool6("dual").expect("v6 pool");
            let held4: BTreeMap<Ipv4Addr, String> =
                pool.held.iter().map(|(a, o)| (*a, o.container_id.clone())).collect();
            let want4: BTreeMap<Ipv4Addr, String> =
                reference.v4.iter().map(|(k, a)| (*a, format!("c{k}"))).collect();
            prop_assert_eq!(held4, want4);
            let held6: BTreeMap<Ipv6Addr, String> =
                pool6.held.iter().map(|(a, o)| (*a, o.container_id.clone())).collect();
            let want6: BTreeMap<Ipv6Addr, String> =
                reference.v6.iter().map(|(k, a)| (*a, format!("c{k}"))).collect();
            prop_assert_eq!(held6, want6);
            let owners4: BTreeSet<&Owner> = pool.held.values().collect();
            let owners6: BTreeSet<&Owner> = pool6.held.values().collect();
            prop_assert_eq!(owners4, owners6, "one address of each family or none");
            prop_assert_eq!(pool6.free_addresses(), 6 - reference.v6.len() as u64);
            prop_assert_eq!(ipam.is_full("dual"), reference.v6.len() == 6);
        }
    }

    /// What the IPAM hands out, the model takes; the model refuses an IPv6
    /// address another port holds, outside the subnet, or missing.
    #[test]
    fn the_model_takes_what_ipam_gives(n in 1u8..6) {
        let mut ipam = Ipam::new();
        ipam.sync_networks(&[spec()]).expect("pools");
        let mut model = Model::new();
        model.apply_networks(&[spec()]).expect("network");
        let request = |k: u8, address, address6| PortRequest {
            container_id: format!("c{k}"),
            ifname: "eth0".into(),
            netns: String::new(),
            network: "dual".into(),
            address,
            address6,
            pod: None,
            mac: None,
        };
        let mut first6 = None;
        for k in 0..n {
            let (v4, v6) = ipam.allocate_dual("dual", &owner(k)).expect("room");
            first6.get_or_insert(v6.expect("dual"));
            let plan = model.add_port(request(k, v4, v6)).expect("add");
            prop_assert_eq!(plan.addresses6.values().copied().collect::<Vec<_>>(), vec![v6.expect("dual")]);
        }
        let (v4, _) = ipam.allocate_dual("dual", &owner(99)).expect("room");
        for (address6, why) in [
            (first6, "held by port port_c0_eth0"),
            (Some("fd00:8::2/125".parse().expect("v6")), "not in the IPv6 subnet"),
            (Some("fd00:9::1/125".parse().expect("v6")), "is the IPv6 gateway"),
            (Some("fd00:9::/125".parse().expect("v6")), "subnet-router anycast"),
            (Some("fd00:9::6/64".parse().expect("v6")), "not in the IPv6 subnet"),
            (None, "a port needs an IPv6 address"),
        ] {
            let err = model.add_port(request(99, v4, address6)).expect_err(why).to_string();
            prop_assert!(err.contains(why) && err.contains("dual"), "{}", err);
        }
    }
}

#[test]
fn older_state_without_ipv6_pools_reads_and_a_network_keeps_its_v6_while_held() {
    let mut ipam = Ipam::new();
    ipam.sync_networks(&[NetworkSpec::l2("v4", "10.1.0.0/24".parse().expect("v4"))])
        .expect("v4 only");
    let json = serde_json::to_string(&ipam).expect("serialize");
    assert!(!json.contains("pools6"), "{json}");
    let back: Ipam = serde_json::from_str(&json).expect("read");
    assert_eq!(back, ipam);

    let mut ipam = Ipam::new();
    ipam.sync_networks(&[spec()]).expect("dual");
    ipam.allocate_dual("dual", &owner(1)).expect("room");
    let json = serde_json::to_string(&ipam).expect("serialize");
    let back: Ipam = serde_json::from_str(&json).expect("read");
    assert_eq!(back, ipam);
    let v4_only = NetworkSpec::l2("dual", "10.9.0.0/28".parse().expect("v4"));
    let err = ipam
        .sync_networks(std::slice::from_ref(&v4_only))
        .expect_err("v6 held");
    assert!(
        err.to_string()
            .contains("network dual: the IPv6 subnet cannot go"),
        "{err}"
    );
    ipam.release("dual", &owner(1));
    ipam.sync_networks(&[v4_only]).expect("nothing held");
    assert!(ipam.pool6("dual").is_none());
    let mut moved = spec();
    moved.gateway6 = Some("fd00:9::2".parse().expect("v6"));
    ipam.sync_networks(&[spec()]).expect("dual again");
    ipam.allocate_dual("dual", &owner(2)).expect("::2");
    let err = ipam.sync_networks(&[moved]).expect_err("gateway held");
    assert!(
        err.to_string().contains("gateway6 fd00:9::2 is held"),
        "{err}"
    );
}

#[test]
fn hold6_replays_and_refuses_what_it_must() {
    let mut ipam = Ipam::new();
    ipam.sync_networks(&[spec()]).expect("pools");
    let a: Ipv6Addr = "fd00:9::5".parse().expect("v6");
    ipam.hold6("dual", a, &owner(1)).expect("hold");
    assert_eq!(ipam.held_by6("dual", &owner(1)).map(|c| c.addr), Some(a));
    for (addr, who, why) in [
        ("fd00:9::5", 2, "held by another container"),
        ("fd00:9::1", 2, "is the gateway"),
        ("fd00:9::", 2, "not a host address"),
        ("fd00:9::8", 2, "not a host address"),
    ] {
        let err = ipam
            .hold6("dual", addr.parse().expect("v6"), &owner(who))
            .expect_err(why)
            .to_string();
        assert!(err.contains(why) && err.contains(addr), "{err}");
    }
    ipam.hold6("dual", "fd00:9::6".parse().expect("v6"), &owner(1))
        .expect("move");
    assert_eq!(ipam.pool6("dual").map(|p| p.held.len()), Some(1));
}
