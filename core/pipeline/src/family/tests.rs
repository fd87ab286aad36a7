//! IPv6 prefixes against bit arithmetic written here, family rules, and
//! the lowest free host against a plain scan.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

proptest! {
    /// Twins of distinct IPv4 hosts are distinct, lie in the IPv6 subnet,
    /// keep the host number, and exist exactly when the IPv6 subnet has as
    /// many host bits.
    #[test]
    fn v6_twins_keep_the_host_number_and_stay_distinct(
        p4 in 16u8..=30, p6 in 64u8..=124, a in any::<u32>(), b in any::<u32>()
    ) {
        let subnet4 = Ipv4Cidr::new(Ipv4Addr::new(10, 20, 0, 0), p4).expect("v4");
        let subnet6 = Ipv6Cidr::new("fd00:20::".parse().expect("v6"), p6).expect("v6");
        let host = |x: u32| Ipv4Addr::from(u32::from(subnet4.network()) | (x & !subnet4.mask()));
        let (ha, hb) = (host(a), host(b));
        let (ta, tb) = (mirror_v6(subnet4, ha, subnet6), mirror_v6(subnet4, hb, subnet6));
        let fits = 128 - u32::from(p6) >= 32 - u32::from(p4);
        prop_assert_eq!(ta.is_some(), fits);
        if let (Some(ta), Some(tb)) = (ta, tb) {
            prop_assert!(subnet6.contains(ta));
            prop_assert_eq!(u128::from(ta) - u128::from(subnet6.network()),
                u128::from(u32::from(ha) - u32::from(subnet4.network())));
            prop_assert_eq!(ta == tb, ha == hb);
        }
        prop_assert_eq!(mirror_v6(subnet4, Ipv4Addr::new(192, 168, 0, 1), subnet6), None);
    }

    /// `contains` agrees with comparing the first `prefix` bits, and the
    /// text form round-trips.
    #[test]
    fn v6_prefixes_contain_what_shares_their_first_bits(
        a in any::<u128>(), b in any::<u128>(), prefix in 0u8..=128
    ) {
        let c = Ipv6Cidr::new(Ipv6Addr::from(a), prefix).expect("prefix");
        let same_bits = (0..u32::from(prefix)).all(|i| (a >> (127 - i)) & 1 == (b >> (127 - i)) & 1);
        prop_assert_eq!(c.contains(Ipv6Addr::from(b)), same_bits);
        prop_assert!(c.contains(c.network()) && c.contains(c.last()));
        let back: Ipv6Cidr = c.to_string().parse().expect("parse");
        prop_assert_eq!(back, c);
        let either: IpCidr = c.to_string().parse().expect("either");
        prop_assert_eq!(either, IpCidr::V6(c));
        prop_assert!(!either.contains(IpAddr::V4(Ipv4Addr::from((a >> 96) as u32))),
            "no IPv4 address is in an IPv6 prefix");
    }

    /// The lowest free host is the first address above the network that is
    /// neither the gateway nor used.
    #[test]
    fn the_lowest_free_v6_host_is_the_first_unused(
        prefix in 120u8..=128, used in proptest::collection::btree_set(0u128..300, 0..40),
        gw in 0u128..20
    ) {
        let subnet = Ipv6Cidr::new("fd00:1::".parse().expect("addr"), prefix).expect("prefix");
        let base = u128::from(subnet.network());
        let used: BTreeSet<Ipv6Addr> = used.into_iter().map(|n| Ipv6Addr::from(base + n)).collect();
        let gateway = Ipv6Addr::from(base + gw);
        let size = 1u128 << (128 - u32::from(prefix));
        let want = (1..size).map(|n| Ipv6Addr::from(base + n))
            .find(|a| *a != gateway && !used.contains(a));
        prop_assert_eq!(lowest_free_v6(subnet, gateway, &used), want);
    }
}

#[test]
fn families_do_not_mix() {
    let v4: IpCidr = "10.0.0.0/8".parse().expect("v4");
    let v6: IpCidr = "fd00::/8".parse().expect("v6");
    assert_eq!(v4.family(), AddressFamily::IPv4);
    assert_eq!(v6.family(), AddressFamily::IPv6);
    assert!(v4.contains("10.1.2.3".parse().expect("ip")));
    assert!(!v4.contains("fd00::1".parse().expect("ip")));
    assert!(v6.contains("fd00::1".parse().expect("ip")));
    assert!(!v6.contains("10.1.2.3".parse().expect("ip")));
    assert!(
        !"::/0"
            .parse::<IpCidr>()
            .expect("all v6")
            .contains("10.0.0.1".parse().expect("ip")),
        "::/0 is every IPv6 address and no IPv4 one"
    );
    assert!(matches!(
        "fd00::/129".parse::<IpCidr>(),
        Err(Error::InvalidIpv6Cidr(_))
    ));
    assert!(matches!(
        "10.0.0.0/33".parse::<IpCidr>(),
        Err(Error::InvalidCidr(_))
    ));
    let json = serde_json::to_string(&vec![v4, v6]).expect("json");
    assert_eq!(json, r#"["10.0.0.0/8","fd00::/8"]"#);
    let back: Vec<IpCidr> = serde_json::from_str(&json).expect("back");
    assert_eq!(back, vec![v4, v6]);
}

#[test]
fn a_network_has_one_subnet_per_family() {
    let v4: IpCidr = "10.1.0.0/24".parse().expect("v4");
    let v6: IpCidr = "fd00:1::/64".parse().expect("v6");
    let (a, b) = dual_stack("n", &[v6, v4]).expect("dual");
    assert_eq!(a.map(IpCidr::V4), Some(v4));
    assert_eq!(b.map(IpCidr::V6), Some(v6));
    assert_eq!(dual_stack("n", &[v6]).expect("v6 only"), (None, b));
    let err = dual_stack("n", &[v4, "10.2.0.0/24".parse().expect("v4")]).expect_err("two v4");
    assert_eq!(
        err.to_string(),
        "network n: two IPv4 subnets (10.1.0.0/24 and 10.2.0.0/24): at most one per family"
    );
    assert!(dual_stack("n", &[]).is_err());
    assert!(dual_stack("n", &[v4, v6, v6]).is_err());
}

#[test]
fn a_v6_host_is_never_the_anycast_address_and_a_full_subnet_has_none() {
    let subnet: Ipv6Cidr = "fd00:1::/126".parse().expect("subnet");
    let gateway = subnet.first_host().expect("gateway");
    assert_eq!(gateway, "fd00:1::1".parse::<Ipv6Addr>().expect("gw"));
    let mut used = BTreeSet::new();
    let mut got = Vec::new();
    while let Some(a) = lowest_free_v6(subnet, gateway, &used) {
        used.insert(a);
        got.push(a.to_string());
    }
    assert_eq!(got, vec!["fd00:1::2", "fd00:1::3"]);
    let host: Ipv6Cidr = "fd00:1::5/128".parse().expect("host");
    assert_eq!(host.first_host(), None);
    assert_eq!(lowest_free_v6(host, gateway, &BTreeSet::new()), None);
}
