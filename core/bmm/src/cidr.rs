//! IPv4 prefixes (`10.0.1.0/24`) and the smallest prefix that covers a set of them.
//!
//! A cluster without a user-supplied IP block gets one the provider creates; it must be the
//! smallest block that holds every subnet of the cluster, so [`covering_prefix`] computes the
//! longest common prefix of the subnets.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// A refused CIDR, naming the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// No `/` separating address and prefix length.
    #[error("CIDR {0:?} has no '/<prefix-length>'")]
    MissingLength(String),
    /// The address part is not a dotted-quad IPv4 address.
    #[error("CIDR {0:?} does not start with an IPv4 address")]
    BadAddress(String),
    /// The prefix length is not a number from 0 to 32.
    #[error("CIDR {0:?} has a prefix length that is not 0..=32")]
    BadLength(String),
    /// Bits are set after the prefix (`10.0.1.5/24`).
    #[error("CIDR {input:?} has host bits set; the network is {network}")]
    HostBitsSet {
        /// The refused input.
        input: String,
        /// The network it probably meant.
        network: String,
    },
    /// [`covering_prefix`] was given no prefix at all.
    #[error("no subnets to cover")]
    Empty,
}

/// An IPv4 network: an address with no host bits set and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Cidr {
    network: u32,
    len: u8,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

impl Ipv4Cidr {
    /// A network from an address (host bits are cleared) and a prefix length (clamped to 32).
    pub fn new(address: Ipv4Addr, len: u8) -> Self {
        let len = len.min(32);
        Ipv4Cidr {
            network: u32::from(address) & mask(len),
            len,
        }
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.network)
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// Whether `other` lies entirely inside this network.
    pub fn contains(&self, other: &Ipv4Cidr) -> bool {
        other.len >= self.len && (other.network & mask(self.len)) == self.network
    }

    /// Whether the address lies inside this network.
    pub fn contains_addr(&self, address: Ipv4Addr) -> bool {
        (u32::from(address) & mask(self.len)) == self.network
    }

    /// The `n`-th host address (`n = 1` is the first after the network address), if it fits.
    pub fn host(&self, n: u32) -> Option<Ipv4Addr> {
        let size = if self.len == 0 {
            u64::from(u32::MAX) + 1
        } else {
            1u64 << (32 - self.len)
        };
        (u64::from(n) < size).then(|| Ipv4Addr::from(self.network.wrapping_add(n)))
    }
}

impl FromStr for Ipv4Cidr {
    type Err = CidrError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (address, len) = input
            .split_once('/')
            .ok_or_else(|| CidrError::MissingLength(input.to_string()))?;
        let address: Ipv4Addr = address
            .parse()
            .map_err(|_| CidrError::BadAddress(input.to_string()))?;
        let len: u8 = match len.parse::<u8>() {
            Ok(parsed) if parsed <= 32 && parsed.to_string() == len => parsed,
            _ => return Err(CidrError::BadLength(input.to_string())),
        };
        let cidr = Ipv4Cidr::new(address, len);
        if cidr.network() != address {
            return Err(CidrError::HostBitsSet {
                input: input.to_string(),
                network: cidr.to_string(),
            });
        }
        Ok(cidr)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.len)
    }
}

/// The smallest network (longest prefix) that contains every one of `cidrs`.
pub fn covering_prefix<'a>(
    cidrs: impl IntoIterator<Item = &'a Ipv4Cidr>,
) -> Result<Ipv4Cidr, CidrError> {
    let mut iter = cidrs.into_iter();
    let first = *iter.next().ok_or(CidrError::Empty)?;
    let mut len = first.len;
    let mut network = first.network;
    for cidr in iter {
        len = len.min(cidr.len);
        // The leading zeros of the xor are the leading bits both networks share.
        let shared = (network ^ cidr.network).leading_zeros().min(32) as u8;
        len = len.min(shared);
        network &= mask(len);
    }
    Ok(Ipv4Cidr::new(Ipv4Addr::from(network), len))
}

#[cfg(test)]
mod tests;
