//! Addresses the model speaks in: MAC addresses and IPv4 prefixes.
//!
//! Small hand-written types so the pure crate needs no address library; both
//! parse from and print to the usual text forms and serialize as those strings.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;

/// An Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: Mac = Mac([0xff; 6]);

    /// True for group (multicast and broadcast) addresses.
    pub fn is_group(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for Mac {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidMac(s.to_string());
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or_else(bad)?;
            if part.len() != 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Mac(out))
    }
}

impl Serialize for Mac {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mac {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An IPv4 address with a prefix length, e.g. `10.1.0.5/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv4Cidr {
    /// The address (not necessarily the network address).
    pub addr: Ipv4Addr,
    /// Prefix length, 0..=32.
    pub prefix: u8,
}

impl Ipv4Cidr {
    /// A prefix from its parts.
    ///
    /// # Errors
    /// [`Error::InvalidCidr`] when `prefix` exceeds 32.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Result<Self, Error> {
        if prefix > 32 {
            return Err(Error::InvalidCidr(format!("{addr}/{prefix}")));
        }
        Ok(Ipv4Cidr { addr, prefix })
    }

    /// The netmask as a number.
    pub fn mask(&self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        }
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & self.mask())
    }

    /// The broadcast address.
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !self.mask())
    }

    /// True when `ip` lies in this prefix.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.network())
    }

    /// The first usable host address (network + 1), if the prefix has hosts.
    pub fn first_host(&self) -> Option<Ipv4Addr> {
        self.host_range().map(|(first, _)| Ipv4Addr::from(first))
    }

    /// Usable host addresses as an inclusive range of numbers (a /31 and a
    /// /32 have none here: they cannot hold a gateway and a pod).
    pub fn host_range(&self) -> Option<(u32, u32)> {
        if self.prefix > 30 {
            return None;
        }
        let net = u32::from(self.network());
        let bcast = u32::from(self.broadcast());
        Some((net + 1, bcast - 1))
    }

    /// The same prefix with another address in it.
    pub fn with_addr(&self, addr: Ipv4Addr) -> Ipv4Cidr {
        Ipv4Cidr {
            addr,
            prefix: self.prefix,
        }
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidCidr(s.to_string());
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        Ipv4Cidr::new(addr, prefix).map_err(|_| bad())
    }
}

impl Serialize for Ipv4Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ipv4Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
