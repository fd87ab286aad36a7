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

/// The host record lives on the lease, address claims do not; a lease that
/// expired (revoked here) is replaced on the next renewal, host record back.
#[tokio::test]
async fn the_lease_carries_the_host_record_but_not_the_claims() {
    let etcd = match nephrite_test_services::Etcd::start() {
        Ok(etcd) => etcd,
        Err(e) => return e.skip("the_lease_carries_the_host_record_but_not_the_claims"),
    };
    let url = format!("etcd://{}", etcd.client_addr());
    let fabric = Fabric::join(&url, "h1", Some(Ipv4Addr::LOCALHOST), 30)
        .await
        .expect("join");
    let owner = Owner {
        container_id: "c1".into(),
        ifname: "eth0".into(),
    };
    let address = Ipv4Addr::new(10, 0, 0, 2);
    assert_eq!(
        fabric.claim("blue", address, &owner).await.expect("claim"),
        Claimed::Ours
    );
    let view = |f: &Fabric| {
        let f = f.clone();
        async move { f.read().await.expect("read").0 }
    };
    assert!(view(&fabric).await.hosts.contains_key("h1"));
    assert_eq!(fabric.renew().await.expect("renew"), Renewal::Alive);

    let first = fabric.lease.load(Ordering::SeqCst);
    fabric.etcd.revoke(first).await.expect("revoke");
    let after = view(&fabric).await;
    assert!(
        !after.hosts.contains_key("h1"),
        "the host record went with the lease"
    );
    assert!(
        after.addresses.contains_key(&("blue".to_string(), address)),
        "the claim outlives the lease"
    );

    assert_eq!(fabric.renew().await.expect("renew"), Renewal::Regranted);
    assert_ne!(fabric.lease.load(Ordering::SeqCst), first);
    assert!(
        view(&fabric).await.hosts.contains_key("h1"),
        "host record back"
    );

    // a host with a live lease is not forgotten; once it is gone, its claims are released
    assert!(matches!(
        forget_host(&url, "h1").await,
        Err(ForgetError::Alive(h)) if h == "h1"
    ));
    fabric
        .etcd
        .revoke(fabric.lease.load(Ordering::SeqCst))
        .await
        .expect("revoke");
    let forgotten = forget_host(&url, "h1").await.expect("forget");
    assert_eq!(forgotten.addresses, 1);
    assert!(view(&fabric).await.addresses.is_empty());
}
