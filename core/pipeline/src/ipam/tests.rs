use super::*;

fn owner(c: &str) -> Owner {
    Owner {
        container_id: c.into(),
        ifname: "eth0".into(),
    }
}

fn ipam(subnet: &str) -> Ipam {
    let mut i = Ipam::new();
    i.sync_networks(&[NetworkSpec::l2("n", subnet.parse().expect("cidr"))])
        .expect("sync");
    i
}

#[test]
fn gateway_is_first_host_and_never_handed_out() {
    let mut i = ipam("10.0.0.0/29");
    let got: Vec<String> = (0..5)
        .map(|k| {
            i.allocate("n", &owner(&k.to_string()))
                .expect("alloc")
                .to_string()
        })
        .collect();
    assert_eq!(
        got,
        [
            "10.0.0.2/29",
            "10.0.0.3/29",
            "10.0.0.4/29",
            "10.0.0.5/29",
            "10.0.0.6/29"
        ]
    );
    assert_eq!(
        i.allocate("n", &owner("x")),
        Err(Error::PoolExhausted("n".into()))
    );
}

#[test]
fn explicit_gateway_is_skipped_and_allocation_is_idempotent() {
    let mut i = Ipam::new();
    let mut spec = NetworkSpec::l2("n", "10.0.0.0/24".parse().expect("cidr"));
    spec.gateway = Some("10.0.0.2".parse().expect("ip"));
    i.sync_networks(&[spec]).expect("sync");
    let a = i.allocate("n", &owner("a")).expect("a");
    let b = i.allocate("n", &owner("b")).expect("b");
    assert_eq!(a.to_string(), "10.0.0.1/24");
    assert_eq!(b.to_string(), "10.0.0.3/24");
    assert_eq!(i.allocate("n", &owner("a")).expect("again"), a);
    assert_eq!(i.release("n", &owner("a")), Some(a.addr));
    assert_eq!(i.release("n", &owner("a")), None);
    assert_eq!(i.allocate("n", &owner("c")).expect("reuse"), a);
}

#[test]
fn pools_with_holders_survive_and_round_trip() {
    let mut i = ipam("10.0.0.0/24");
    i.allocate("n", &owner("a")).expect("a");
    i.sync_networks(&[]).expect("sync");
    assert!(i.pool("n").is_some(), "held addresses are kept");
    let json = serde_json::to_string(&i).expect("ser");
    let back: Ipam = serde_json::from_str(&json).expect("de");
    assert_eq!(back, i);
    assert!(
        i.sync_networks(&[NetworkSpec::l2("n", "10.5.0.0/24".parse().expect("cidr"))])
            .is_err()
    );
    assert_eq!(
        i.allocate("zzz", &owner("a")),
        Err(Error::UnknownNetwork("zzz".into()))
    );
}

#[test]
fn hold_records_a_given_address_once() {
    let mut i = ipam("10.0.0.0/29");
    let gw: Ipv4Addr = "10.0.0.1".parse().expect("ip");
    let five: Ipv4Addr = "10.0.0.5".parse().expect("ip");
    i.hold("n", five, &owner("a")).expect("hold");
    i.hold("n", five, &owner("a")).expect("idempotent");
    assert_eq!(i.held_by("n", &owner("a")).map(|c| c.addr), Some(five));
    assert!(i.hold("n", five, &owner("b")).is_err(), "held by a");
    assert!(i.hold("n", gw, &owner("b")).is_err(), "gateway");
    assert!(
        i.hold("n", "10.0.0.7".parse().expect("ip"), &owner("b"))
            .is_err(),
        "broadcast"
    );
    assert!(i.hold("x", five, &owner("b")).is_err(), "unknown network");
    // moving a holder releases its old address
    i.hold("n", "10.0.0.6".parse().expect("ip"), &owner("a"))
        .expect("move");
    assert_eq!(i.pool("n").expect("pool").held.len(), 1);
    // allocation skips held addresses
    assert_eq!(
        i.allocate("n", &owner("c")).expect("c").to_string(),
        "10.0.0.2/29"
    );
}

proptest::proptest! {
    /// The pool's count of free addresses is exactly how many more
    /// allocations succeed, whatever was held or released before.
    #[test]
    fn free_addresses_count_the_allocations_left(
        prefix in 26u8..=30,
        gateway_offset in proptest::option::of(1u32..3),
        held in proptest::collection::vec(0u8..64, 0..20),
        released in proptest::collection::vec(0u8..64, 0..10),
    ) {
        let subnet: crate::Ipv4Cidr = format!("10.0.0.0/{prefix}").parse().expect("cidr");
        let mut spec = NetworkSpec::l2("n", subnet);
        spec.gateway = gateway_offset.map(|o| Ipv4Addr::from(u32::from(subnet.network()) + o));
        let mut i = Ipam::new();
        i.sync_networks(&[spec]).expect("sync");
        for k in &held {
            let _ = i.allocate("n", &owner(&format!("h{k}")));
        }
        for k in &released {
            i.release("n", &owner(&format!("h{k}")));
        }
        let free = i.pool("n").expect("pool").free_addresses();
        let mut granted = 0u64;
        while i.allocate("n", &owner(&format!("new{granted}"))).is_ok() {
            granted += 1;
            proptest::prop_assert!(granted <= free, "more allocations than free addresses");
        }
        proptest::prop_assert_eq!(granted, free);
        proptest::prop_assert!(i.pool("n").expect("pool").is_full());
    }
}
