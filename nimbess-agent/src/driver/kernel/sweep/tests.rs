//! What a network's VXLAN device should hold: exactly the entries the
//! model's remote ports need (local ports need none).

use super::*;
use nephrite_pipeline::{Ipv4Cidr, NetworkSpec, Port, RemoteHost, RenderFacts};

fn port(model: &Model, network: &str, n: u8, host: Option<Ipv4Addr>) -> Port {
    Port {
        id: format!("c{n}-eth0"),
        network: network.to_string(),
        container_id: format!("c{n}"),
        ifname: "eth0".into(),
        netns: "/nonexistent".into(),
        address: Ipv4Cidr {
            addr: Ipv4Addr::new(10, 1, 0, n),
            prefix: 24,
        },
        slot: model.free_slot(network),
        facts: Some(RenderFacts {
            mac: Mac([2, 0, 0, 0, 0, n]),
            ifindex: 0,
            modules: Default::default(),
        }),
        remote: host.map(|underlay| RemoteHost {
            host: underlay.to_string(),
            underlay,
        }),
        pod: None,
        requested_mac: None,
    }
}

#[test]
fn expected_entries_follow_the_remote_ports() {
    let subnet = "10.1.0.0/24".parse().expect("cidr");
    let mut routed = NetworkSpec::l2("red", subnet);
    routed.kind = NetworkKind::L3;
    let mut model = Model::new();
    model
        .apply_networks(&[NetworkSpec::l2("blue", subnet), routed])
        .expect("networks");
    let (u1, u2) = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
    for (network, n, host) in [
        ("blue", 2, Some(u1)),
        ("blue", 3, Some(u1)),
        ("blue", 4, Some(u2)),
        ("blue", 5, None),
        ("red", 6, Some(u1)),
        ("red", 7, None),
    ] {
        let p = port(&model, network, n, host);
        model.insert_port(p).expect("port");
    }
    let mac = |n| Mac([2, 0, 0, 0, 0, n]);

    let blue = expected(&model, "blue", NetworkKind::L2);
    assert_eq!(blue.bridge, BTreeSet::from([mac(2), mac(3), mac(4)]));
    assert_eq!(
        blue.vxlan,
        BTreeSet::from([
            (Mac([0; 6]), u1),
            (Mac([0; 6]), u2),
            (mac(2), u1),
            (mac(3), u1),
            (mac(4), u2),
        ])
    );
    assert!(blue.ips.is_empty());

    let red = expected(&model, "red", NetworkKind::L3);
    assert!(red.bridge.is_empty());
    assert_eq!(red.vxlan, BTreeSet::from([(vxlan_mac("red", u1), u1)]));
    assert_eq!(red.ips, BTreeSet::from([Ipv4Addr::new(10, 1, 0, 6)]));

    // the last remote port gone: nothing is expected any more
    model.remove_port("c6-eth0").expect("remove");
    let red = expected(&model, "red", NetworkKind::L3);
    assert!(red.vxlan.is_empty() && red.ips.is_empty());
}
