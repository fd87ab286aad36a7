use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::*;

fn cidr(s: &str) -> Ipv4Cidr {
    s.parse().expect("test CIDR")
}

#[test]
fn parses_and_prints() {
    assert_eq!(cidr("10.0.1.0/24").to_string(), "10.0.1.0/24");
    assert_eq!(cidr("0.0.0.0/0").prefix_len(), 0);
    assert_eq!(
        cidr("10.0.0.7/32").host(0),
        Some(Ipv4Addr::new(10, 0, 0, 7))
    );
}

#[test]
fn refuses_bad_cidrs_naming_them() {
    assert_eq!(
        "10.0.0.0".parse::<Ipv4Cidr>(),
        Err(CidrError::MissingLength("10.0.0.0".into()))
    );
    assert_eq!(
        "10.0.0/8".parse::<Ipv4Cidr>(),
        Err(CidrError::BadAddress("10.0.0/8".into()))
    );
    assert_eq!(
        "10.0.0.0/33".parse::<Ipv4Cidr>(),
        Err(CidrError::BadLength("10.0.0.0/33".into()))
    );
    assert_eq!(
        "10.0.0.0/024".parse::<Ipv4Cidr>(),
        Err(CidrError::BadLength("10.0.0.0/024".into()))
    );
    assert_eq!(
        "10.0.1.5/24".parse::<Ipv4Cidr>(),
        Err(CidrError::HostBitsSet {
            input: "10.0.1.5/24".into(),
            network: "10.0.1.0/24".into()
        })
    );
}

#[test]
fn covering_prefix_of_two_neighbours_is_one_bit_shorter() {
    let subnets = [cidr("10.0.0.0/24"), cidr("10.0.1.0/24")];
    assert_eq!(covering_prefix(&subnets), Ok(cidr("10.0.0.0/23")));
    let spread = [cidr("10.0.0.0/24"), cidr("10.0.4.0/24")];
    assert_eq!(covering_prefix(&spread), Ok(cidr("10.0.0.0/21")));
    assert_eq!(
        covering_prefix(&[cidr("192.168.7.0/26")]),
        Ok(cidr("192.168.7.0/26"))
    );
    assert_eq!(covering_prefix(&[]), Err(CidrError::Empty));
}

fn any_cidr() -> impl Strategy<Value = Ipv4Cidr> {
    (any::<u32>(), 8u8..=30).prop_map(|(a, l)| Ipv4Cidr::new(Ipv4Addr::from(a), l))
}

proptest! {
    #[test]
    fn covering_prefix_covers_all_and_is_smallest(subnets in prop::collection::vec(any_cidr(), 1..6)) {
        let cover = covering_prefix(&subnets).expect("non-empty");
        for s in &subnets {
            prop_assert!(cover.contains(s), "{cover} does not contain {s}");
        }
        // One bit longer no longer covers them all.
        if cover.prefix_len() < 32 {
            let longer = Ipv4Cidr::new(cover.network(), cover.prefix_len() + 1);
            let upper = Ipv4Cidr::new(
                Ipv4Addr::from(u32::from(cover.network()) | (1u32 << (31 - u32::from(cover.prefix_len())))),
                cover.prefix_len() + 1,
            );
            prop_assert!(!subnets.iter().all(|s| longer.contains(s)));
            prop_assert!(!subnets.iter().all(|s| upper.contains(s)));
        }
    }

    #[test]
    fn display_parse_round_trip(c in any_cidr()) {
        prop_assert_eq!(c.to_string().parse::<Ipv4Cidr>(), Ok(c));
    }
}
