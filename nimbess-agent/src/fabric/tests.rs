use super::*;
use etcd::Entry;
use proptest::prelude::*;

proptest! {
    #[test]
    fn keys_round_trip(
        host in "[a-z0-9][a-z0-9.-]{0,20}",
        network in "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,30}",
        container in "[0-9a-f]{64}",
        ip in any::<u32>(),
    ) {
        let keys = [
            FabricKey::Host(host.clone()),
            FabricKey::Network(network.clone()),
            FabricKey::Address { network: network.clone(), address: Ipv4Addr::from(ip) },
            FabricKey::Port { host: host.clone(), id: nephrite_pipeline::port_id(&container, "eth0") },
        ];
        for k in keys {
            prop_assert_eq!(FabricKey::parse(&k.key()), Some(k));
        }
    }
}

#[test]
fn foreign_keys_are_ignored() {
    assert_eq!(FabricKey::parse("/other/hosts/a"), None);
    assert_eq!(FabricKey::parse("/nimbess/hosts/"), None);
    assert_eq!(FabricKey::parse("/nimbess/addresses/blue/not-an-ip"), None);
    assert_eq!(FabricKey::parse("/nimbess/unknown/x"), None);
}

#[test]
fn view_follows_puts_and_deletes_and_skips_garbage() {
    let mut view = FabricView::default();
    let key = FabricKey::Address {
        network: "blue".into(),
        address: Ipv4Addr::new(10, 0, 0, 2),
    }
    .key();
    let record = AddressRecord {
        host: "a".into(),
        container_id: "c1".into(),
        ifname: "eth0".into(),
    };
    view.apply(&Change::Put(Entry {
        key: key.clone(),
        value: serde_json::to_vec(&record).expect("json"),
    }));
    assert_eq!(
        view.addresses
            .get(&("blue".to_string(), Ipv4Addr::new(10, 0, 0, 2))),
        Some(&record)
    );
    view.apply(&Change::Put(Entry {
        key: FabricKey::Host("b".into()).key(),
        value: b"not json".to_vec(),
    }));
    assert!(view.hosts.is_empty());
    view.apply(&Change::Delete(key));
    assert!(view.addresses.is_empty());
}
