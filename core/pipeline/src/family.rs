//! Address families: IPv6 prefixes beside the IPv4 ones, a prefix of
//! either family ([`IpCidr`]), and the decisions that depend on the family
//! — which subnets a dual-stack network may declare ([`dual_stack`]) and
//! the lowest free IPv6 host of a subnet ([`lowest_free_v6`]).
//!
//! A prefix never holds an address of the other family: an IPv6 `ipBlock`
//! says nothing about IPv4 peers and the reverse.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;
use crate::addr::Ipv4Cidr;

#[cfg(test)]
mod tests;

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AddressFamily {
    /// IPv4.
    IPv4,
    /// IPv6.
    IPv6,
}

/// An IPv6 address with a prefix length, e.g. `fd00:10::5/64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv6Cidr {
    /// The address (not necessarily the network address).
    pub addr: Ipv6Addr,
    /// Prefix length, 0..=128.
    pub prefix: u8,
}

impl Ipv6Cidr {
    /// A prefix from its parts.
    ///
    /// # Errors
    /// [`Error::InvalidIpv6Cidr`] when `prefix` exceeds 128.
    pub fn new(addr: Ipv6Addr, prefix: u8) -> Result<Self, Error> {
        if prefix > 128 {
            return Err(Error::InvalidIpv6Cidr(format!("{addr}/{prefix}")));
        }
        Ok(Ipv6Cidr { addr, prefix })
    }

    /// The netmask as a number.
    pub fn mask(&self) -> u128 {
        if self.prefix == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.prefix))
        }
    }

    /// The network address (the subnet-router anycast address).
    pub fn network(&self) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.addr) & self.mask())
    }

    /// The last address of the prefix.
    pub fn last(&self) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.addr) | !self.mask())
    }

    /// True when `ip` lies in this prefix.
    pub fn contains(&self, ip: Ipv6Addr) -> bool {
        u128::from(ip) & self.mask() == u128::from(self.network())
    }

    /// The first host (network + 1): the gateway unless one is configured.
    /// `None` for a /128, which has no room for one.
    pub fn first_host(&self) -> Option<Ipv6Addr> {
        (self.prefix < 128).then(|| Ipv6Addr::from(u128::from(self.network()) + 1))
    }
}

impl fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for Ipv6Cidr {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidIpv6Cidr(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv6Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        Ipv6Cidr::new(addr, prefix).map_err(|_| bad())
    }
}

/// A prefix of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpCidr {
    /// IPv4.
    V4(Ipv4Cidr),
    /// IPv6.
    V6(Ipv6Cidr),
}

impl IpCidr {
    /// Its family.
    pub fn family(&self) -> AddressFamily {
        match self {
            IpCidr::V4(_) => AddressFamily::IPv4,
            IpCidr::V6(_) => AddressFamily::IPv6,
        }
    }

    /// Its prefix length.
    pub fn prefix(&self) -> u8 {
        match self {
            IpCidr::V4(c) => c.prefix,
            IpCidr::V6(c) => c.prefix,
        }
    }

    /// The address (not necessarily the network address).
    pub fn addr(&self) -> IpAddr {
        match self {
            IpCidr::V4(c) => IpAddr::V4(c.addr),
            IpCidr::V6(c) => IpAddr::V6(c.addr),
        }
    }

    /// True when `ip` is of this prefix's family and lies in it.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (IpCidr::V4(c), IpAddr::V4(a)) => c.contains(a),
            (IpCidr::V6(c), IpAddr::V6(a)) => c.contains(a),
            _ => false,
        }
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpCidr::V4(c) => c.fmt(f),
            IpCidr::V6(c) => c.fmt(f),
        }
    }
}

impl FromStr for IpCidr {
    type Err = Error;

    /// IPv6 when the text has a `:`, IPv4 otherwise (an IPv4 address
    /// embedded in IPv6 is read as IPv6, as the API's CIDR rule allows one
    /// family per prefix).
    fn from_str(s: &str) -> Result<Self, Error> {
        if s.contains(':') {
            s.parse().map(IpCidr::V6)
        } else {
            s.parse().map(IpCidr::V4)
        }
    }
}

macro_rules! serde_as_text {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

serde_as_text!(Ipv6Cidr);
serde_as_text!(IpCidr);

/// The subnets of a network by family: one or two prefixes, at most one
/// of each family (`subnets: [v4]`, `[v6]` or `[v4, v6]` in either order).
///
/// # Errors
/// [`Error::InvalidNetwork`] naming `network`: no subnet, more than two,
/// or two of one family.
pub fn dual_stack(
    network: &str,
    subnets: &[IpCidr],
) -> Result<(Option<Ipv4Cidr>, Option<Ipv6Cidr>), Error> {
    let bad = |why: String| Error::InvalidNetwork {
        network: network.to_string(),
        why,
    };
    if subnets.is_empty() {
        return Err(bad("no subnet (one IPv4, one IPv6, or one of each)".into()));
    }
    if subnets.len() > 2 {
        return Err(bad(format!(
            "{} subnets (one IPv4, one IPv6, or one of each)",
            subnets.len()
        )));
    }
    let (mut v4, mut v6) = (None, None);
    for s in subnets {
        let twice = match s {
            IpCidr::V4(c) => v4.replace(*c).is_some(),
            IpCidr::V6(c) => v6.replace(*c).is_some(),
        };
        if twice {
            return Err(bad(format!(
                "two {:?} subnets ({} and {}): at most one per family",
                s.family(),
                subnets[0],
                subnets[1]
            )));
        }
    }
    Ok((v4, v6))
}

/// The IPv6 twin of an IPv4 host of `subnet4`: the address of `subnet6`
/// with the same host number (`10.1.0.7` in `10.1.0.0/24` ↔ `fd00::7` in
/// `fd00::/64`). Distinct IPv4 hosts have distinct twins, so a cluster
/// that makes IPv4 addresses unique makes their twins unique too. `None`
/// when `v4` is not in `subnet4` or `subnet6` has fewer host bits.
pub fn mirror_v6(subnet4: Ipv4Cidr, v4: std::net::Ipv4Addr, subnet6: Ipv6Cidr) -> Option<Ipv6Addr> {
    let bits4 = 32 - u32::from(subnet4.prefix);
    let bits6 = 128 - u32::from(subnet6.prefix);
    if !subnet4.contains(v4) || bits6 < bits4 {
        return None;
    }
    let host = u32::from(v4) - u32::from(subnet4.network());
    Some(Ipv6Addr::from(
        u128::from(subnet6.network()) | u128::from(host),
    ))
}

/// The lowest address of `subnet` a pod may take: above the network
/// address (the subnet-router anycast), not the `gateway`, not in `used`.
/// `None` when every address is taken.
pub fn lowest_free_v6(
    subnet: Ipv6Cidr,
    gateway: Ipv6Addr,
    used: &BTreeSet<Ipv6Addr>,
) -> Option<Ipv6Addr> {
    let first = u128::from(subnet.network()).checked_add(1)?;
    let last = u128::from(subnet.last());
    // at most |used| + 1 addresses are skipped before a free one
    let mut n = first;
    while n <= last {
        let a = Ipv6Addr::from(n);
        if a != gateway && !used.contains(&a) {
            return Some(a);
        }
        n = n.checked_add(1)?;
    }
    None
}
