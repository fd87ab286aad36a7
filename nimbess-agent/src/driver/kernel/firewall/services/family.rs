//! The address family a Services table is rendered in: the `ip` table for
//! the IPv4 modules, its `ip6` twin (same name, same chains and maps) for
//! the IPv6 ones. What differs is only where the addresses sit in the
//! header, how long they are, and so which 32-bit registers follow them in
//! a concatenation (`address . protocol . port` starts in register 1; each
//! field takes whole 32-bit words).

use std::net::{Ipv4Addr, Ipv6Addr};

use nephrite_pipeline::ServiceFamily;

use super::super::nftables::{
    ICMP_PORT_UNREACH, ICMPV6_PORT_UNREACH, IPV4_DADDR_OFFSET, IPV4_SADDR_OFFSET,
    IPV6_DADDR_OFFSET, IPV6_SADDR_OFFSET, NFPROTO_IPV4, NFPROTO_IPV6, NFT_REG32_00, TYPE_IP6ADDR,
    TYPE_IPADDR,
};

/// An address family of the Services' tables.
pub trait NatFamily: ServiceFamily {
    /// The nf_tables family (`NFPROTO_*`).
    const NFPROTO: u8;
    /// The family as `nft` names it (`ip`, `ip6`).
    const KEYWORD: &'static str;
    /// The source address's offset in the network header.
    const SADDR_OFFSET: u32;
    /// The destination address's offset in the network header.
    const DADDR_OFFSET: u32;
    /// The address's length in bytes.
    const LEN: u32;
    /// `nft`'s data type of the address.
    const TYPE: u32;
    /// The ICMP code of a `reject` (port unreachable).
    const PORT_UNREACH: u8;

    /// The address in network order.
    fn bytes(&self) -> Vec<u8>;

    /// An address from its first [`Self::LEN`] bytes.
    fn from_bytes(data: &[u8]) -> Option<Self>;

    /// The 32-bit register after an address loaded into register 1: where
    /// a concatenation's next field goes.
    fn after_address() -> u32 {
        NFT_REG32_00 + Self::LEN / 4
    }
}

impl NatFamily for Ipv4Addr {
    const NFPROTO: u8 = NFPROTO_IPV4;
    const KEYWORD: &'static str = "ip";
    const SADDR_OFFSET: u32 = IPV4_SADDR_OFFSET;
    const DADDR_OFFSET: u32 = IPV4_DADDR_OFFSET;
    const LEN: u32 = 4;
    const TYPE: u32 = TYPE_IPADDR;
    const PORT_UNREACH: u8 = ICMP_PORT_UNREACH;

    fn bytes(&self) -> Vec<u8> {
        self.octets().to_vec()
    }

    fn from_bytes(data: &[u8]) -> Option<Self> {
        let a: [u8; 4] = data.get(..4)?.try_into().ok()?;
        Some(a.into())
    }
}

impl NatFamily for Ipv6Addr {
    const NFPROTO: u8 = NFPROTO_IPV6;
    const KEYWORD: &'static str = "ip6";
    const SADDR_OFFSET: u32 = IPV6_SADDR_OFFSET;
    const DADDR_OFFSET: u32 = IPV6_DADDR_OFFSET;
    const LEN: u32 = 16;
    const TYPE: u32 = TYPE_IP6ADDR;
    const PORT_UNREACH: u8 = ICMPV6_PORT_UNREACH;

    fn bytes(&self) -> Vec<u8> {
        self.octets().to_vec()
    }

    fn from_bytes(data: &[u8]) -> Option<Self> {
        let a: [u8; 16] = data.get(..16)?.try_into().ok()?;
        Some(a.into())
    }
}
