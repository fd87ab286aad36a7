//! Whole nftables tables by family, for the teardown ([`crate::teardown`]):
//! list the names a family holds and delete one table with everything in it.
//! They sit beside the ACLs because the per-port `netdev` tables are the
//! ones a teardown finds most of; the `ip` tables' names are in
//! [`super::super::nftables`].

use super::super::expr;
use super::super::netlink::{Batch, attribute, dump, send_batch, text};
use super::super::nftables::{NFT_MSG_DELTABLE, NFT_MSG_GETTABLE, NFTA_TABLE_NAME};
use crate::driver::DriverError;

/// `NFPROTO_INET`: the `inet` family.
pub const NFPROTO_INET: u8 = 1;
/// `NFPROTO_IPV4`: the `ip` family.
pub const NFPROTO_IPV4: u8 = super::super::nftables::NFPROTO_IPV4;
/// `NFPROTO_ARP`: the `arp` family.
pub const NFPROTO_ARP: u8 = 3;
/// `NFPROTO_NETDEV`: the `netdev` family.
pub const NFPROTO_NETDEV: u8 = super::super::nftables::NFPROTO_NETDEV;
/// `NFPROTO_BRIDGE`: the `bridge` family.
pub const NFPROTO_BRIDGE: u8 = 7;
/// `NFPROTO_IPV6`: the `ip6` family.
pub const NFPROTO_IPV6: u8 = 10;

/// Every family a table can belong to, with the name `nft` gives it.
pub const FAMILIES: [(u8, &str); 6] = [
    (NFPROTO_INET, "inet"),
    (NFPROTO_IPV4, "ip"),
    (NFPROTO_ARP, "arp"),
    (NFPROTO_NETDEV, "netdev"),
    (NFPROTO_BRIDGE, "bridge"),
    (NFPROTO_IPV6, "ip6"),
];

/// The names of the tables of `family` in this network namespace.
///
/// # Errors
/// The socket failed or the kernel refused the dump.
pub fn names(family: u8) -> Result<Vec<String>, DriverError> {
    let answers = dump(
        family,
        NFT_MSG_GETTABLE,
        &Default::default(),
        &format!("list the nftables tables of family {family}"),
    )?;
    Ok(answers
        .iter()
        .filter_map(|a| attribute(a, NFTA_TABLE_NAME).map(text))
        .collect())
}

/// Delete the table `name` of `family` with its chains, rules and sets.
///
/// # Errors
/// The kernel refused (a table that is gone meanwhile included).
pub fn delete(family: u8, name: &str) -> Result<(), DriverError> {
    let mut batch = Batch::new();
    batch.nft(family, NFT_MSG_DELTABLE, 0, &expr::table(name));
    send_batch(
        batch,
        &format!("delete nftables table {name} (family {family})"),
    )
}
