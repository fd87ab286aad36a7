//! Unit tests of the kernel object names.

use super::*;
use nephrite_pipeline::port_id;
use proptest::prelude::*;

proptest! {
    #[test]
    fn names_fit_and_are_ours(network in ".{0,300}", container in "[0-9a-f]{64}", ifname in "[a-z0-9]{1,15}") {
        let b = bridge_name(&network);
        let d = miss_sink_name(&network);
        prop_assert!(d.len() <= IFNAMSIZ_MAX && is_agent_device(&d));
        let x = vxlan_name(&network);
        prop_assert!(x.len() <= IFNAMSIZ_MAX && is_agent_device(&x));
        let mut spec = nephrite_pipeline::NetworkSpec::l2(&network, "10.0.0.0/24".parse().expect("cidr"));
        prop_assert!((4096..1 << 24).contains(&vxlan_vni(&spec)));
        spec.vlan = Some(100);
        prop_assert_eq!(vxlan_vni(&spec), 100);
        let v = host_veth_name(&port_id(&container, &ifname));
        prop_assert!(b.len() <= IFNAMSIZ_MAX && v.len() <= IFNAMSIZ_MAX);
        prop_assert!(is_agent_device(&b) && is_agent_device(&v));
    }
}

#[test]
fn names_are_stable() {
    assert_eq!(bridge_name("blue"), bridge_name("blue"));
    assert_ne!(bridge_name("blue"), bridge_name("red"));
    assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
}

proptest! {
    #[test]
    fn vxlan_macs_are_unicast_local_and_per_host(network in ".{0,64}", a in any::<u32>()) {
        let a = std::net::Ipv4Addr::from(a);
        let mac = vxlan_mac(&network, a);
        prop_assert_eq!(mac.0[0] & 0x03, 0x02, "locally administered unicast");
        prop_assert_eq!(vxlan_mac(&network, a), mac, "every host derives the same MAC");
        prop_assert_ne!(vxlan_mac(&format!("{network}x"), a), mac, "another network, another MAC");
    }
}
