//! Taking the kernel data plane down on purpose (`nimbess-agent teardown`,
//! `serve --teardown-on-exit`): every object the kernel driver makes in this
//! network namespace, found by the agent's own names and numbers, and
//! nothing else.
//!
//! | object | how it is known to be the agent's |
//! |---|---|
//! | bridge `nb…`, VXLAN device `nx…` | the name (`nb`/`nx` + 10 hex digits, [`crate::naming`]) and the link kind (`bridge`, `vxlan`) |
//! | veth `nv…` (a pod's host end), `nd…`/`ne…` (a bridge's FIB-miss sink) | the name (`nv` + 12, `nd`/`ne` + 10 hex digits) and the kind `veth`; the pod's end goes with it |
//! | a routed network's routes | their routing table, in the agent's range (`0x1000_0000 ..= 0x1fff_ffff`, [`crate::driver::kernel::routed::route_table`]) |
//! | a routed network's ip rules | the table they look up, in the same range |
//! | nftables `ip`/`ip6`/`inet` tables | named `nimbess` or `nimbess-…` |
//! | nftables `netdev` tables (a port's ACL) | named like a host veth (`nv` + 12 hex digits) |
//!
//! Addresses, neighbour and FDB entries go with their links. Left alone:
//! `net.ipv4.ip_forward` (another user of the host may need it), the pods'
//! network namespaces (the runtime's), the state directory (an agent started
//! again renders its pods anew) and the fabric's store.

use std::fmt;

use futures::TryStreamExt as _;
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};
use netlink_packet_route::route::{RouteAttribute, RouteMessage};
use netlink_packet_route::rule::{RuleAttribute, RuleMessage};
use rtnetlink::{Handle, IpVersion, RouteMessageBuilder};
use serde::Serialize;

use crate::driver::DriverError;
use crate::driver::kernel::firewall::acl::tables;

/// The first routing table of the agent's range (see the module's table).
pub const FIRST_TABLE: u32 = 0x1000_0000;
/// The last routing table of the agent's range.
pub const LAST_TABLE: u32 = 0x1fff_ffff;

/// The link kinds the agent makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentLinkKind {
    /// A network's bridge (`nb…`).
    Bridge,
    /// A veth end (`nv…`, `nd…`, `ne…`).
    Veth,
    /// A network's VXLAN device (`nx…`).
    Vxlan,
}

/// The kind a link of this name has when the agent made it: `None` when
/// the name is not one the agent gives.
pub fn agent_link_kind(name: &str) -> Option<AgentLinkKind> {
    let hex = |rest: &str, len: usize| {
        rest.len() == len
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let (prefix, rest) = (name.get(..2)?, name.get(2..)?);
    match prefix {
        "nb" if hex(rest, 10) => Some(AgentLinkKind::Bridge),
        "nx" if hex(rest, 10) => Some(AgentLinkKind::Vxlan),
        "nd" | "ne" if hex(rest, 10) => Some(AgentLinkKind::Veth),
        "nv" if hex(rest, 12) => Some(AgentLinkKind::Veth),
        _ => None,
    }
}

/// True for a routing table in the agent's range.
pub fn is_agent_table(table: u32) -> bool {
    (FIRST_TABLE..=LAST_TABLE).contains(&table)
}

/// True for an nftables table the agent makes: `family` is `nft`'s name.
pub fn is_agent_nft_table(family: &str, name: &str) -> bool {
    match family {
        "ip" | "ip6" | "inet" => name == "nimbess" || name.starts_with("nimbess-"),
        "netdev" => name.starts_with("nv") && agent_link_kind(name) == Some(AgentLinkKind::Veth),
        _ => false,
    }
}

/// One object the teardown removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "object", rename_all = "snake_case")]
pub enum Removed {
    /// An nftables table.
    NftTable {
        /// Its family as `nft` names it.
        family: String,
        /// Its name.
        name: String,
    },
    /// An ip rule.
    Rule {
        /// `4` or `6`.
        family: u8,
        /// Its priority.
        priority: u32,
        /// The table it looks up.
        table: u32,
    },
    /// A route of a routed network's table.
    Route {
        /// `4` or `6`.
        family: u8,
        /// Its table.
        table: u32,
        /// Its destination prefix.
        destination: String,
    },
    /// A link.
    Link {
        /// Its name.
        name: String,
        /// Its kind.
        kind: AgentLinkKind,
    },
}

impl fmt::Display for Removed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Removed::NftTable { family, name } => write!(f, "nftables table {family} {name}"),
            Removed::Rule {
                family,
                priority,
                table,
            } => write!(f, "ipv{family} rule priority {priority} lookup {table}"),
            Removed::Route {
                family,
                table,
                destination,
            } => write!(f, "ipv{family} route {destination} table {table}"),
            Removed::Link { name, kind } => {
                let kind = match kind {
                    AgentLinkKind::Bridge => "bridge",
                    AgentLinkKind::Veth => "veth",
                    AgentLinkKind::Vxlan => "vxlan",
                };
                write!(f, "link {name} ({kind})")
            }
        }
    }
}

fn nl(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> DriverError {
    let what = what.into();
    move |source| DriverError::Netlink { what, source }
}

/// "No such device / file / process": gone already (a veth's peer, a
/// route that went with its link).
fn is_gone(e: &rtnetlink::Error) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m)
        if m.code.is_some_and(|c| matches!(-c.get(), 2 | 3 | 19)))
}

/// Remove every object of the agent in this network namespace, nftables
/// tables first (nothing is filtered or translated while links go), then
/// rules, routes and links. Returns what was removed, in that order; an
/// empty list when there was nothing.
///
/// # Errors
/// A netlink socket could not be opened, a dump failed, or the kernel
/// refused a removal (named, with what was removed before it left removed).
pub async fn teardown() -> Result<Vec<Removed>, DriverError> {
    let mut removed = nft_tables()?;
    let (connection, handle, _) =
        rtnetlink::new_connection().map_err(|source| DriverError::Os {
            what: "open a netlink socket".into(),
            source,
        })?;
    let connection = tokio::spawn(connection);
    let result = async {
        removed.extend(rules(&handle).await?);
        removed.extend(routes(&handle).await?);
        removed.extend(links(&handle).await?);
        Ok(removed)
    }
    .await;
    connection.abort();
    result
}

fn nft_tables() -> Result<Vec<Removed>, DriverError> {
    let mut out = Vec::new();
    for (family, family_name) in tables::FAMILIES {
        for name in tables::names(family)? {
            if is_agent_nft_table(family_name, &name) {
                tables::delete(family, &name)?;
                out.push(Removed::NftTable {
                    family: family_name.to_string(),
                    name,
                });
            }
        }
    }
    Ok(out)
}

fn rule_table(msg: &RuleMessage) -> u32 {
    msg.attributes
        .iter()
        .find_map(|a| match a {
            RuleAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(msg.header.table))
}

async fn rules(handle: &Handle) -> Result<Vec<Removed>, DriverError> {
    let mut out = Vec::new();
    for (version, family) in [(IpVersion::V4, 4u8), (IpVersion::V6, 6)] {
        let mut found = Vec::new();
        let mut dump = handle.rule().get(version).execute();
        while let Some(msg) = dump
            .try_next()
            .await
            .map_err(nl(format!("dump the ipv{family} rules")))?
        {
            if is_agent_table(rule_table(&msg)) {
                found.push(msg);
            }
        }
        for msg in found {
            let table = rule_table(&msg);
            let priority = msg
                .attributes
                .iter()
                .find_map(|a| match a {
                    RuleAttribute::Priority(p) => Some(*p),
                    _ => None,
                })
                .unwrap_or(0);
            match handle.rule().del(msg).execute().await {
                Ok(()) => {}
                Err(e) if is_gone(&e) => continue,
                Err(e) => {
                    return Err(nl(format!(
                        "remove ipv{family} rule priority {priority} lookup {table}"
                    ))(e));
                }
            }
            out.push(Removed::Rule {
                family,
                priority,
                table,
            });
        }
    }
    Ok(out)
}

fn route_table(msg: &RouteMessage) -> u32 {
    msg.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(msg.header.table))
}

fn route_destination(msg: &RouteMessage) -> String {
    use netlink_packet_route::route::RouteAddress;
    let len = msg.header.destination_prefix_length;
    msg.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Destination(RouteAddress::Inet(ip)) => Some(format!("{ip}/{len}")),
            RouteAttribute::Destination(RouteAddress::Inet6(ip)) => Some(format!("{ip}/{len}")),
            _ => None,
        })
        .unwrap_or_else(|| "default".to_string())
}

async fn routes(handle: &Handle) -> Result<Vec<Removed>, DriverError> {
    let mut out = Vec::new();
    let filters = [
        (
            RouteMessageBuilder::<std::net::Ipv4Addr>::new().build(),
            4u8,
        ),
        (RouteMessageBuilder::<std::net::Ipv6Addr>::new().build(), 6),
    ];
    for (filter, family) in filters {
        let mut found = Vec::new();
        let mut dump = handle.route().get(filter).execute();
        while let Some(msg) = dump
            .try_next()
            .await
            .map_err(nl(format!("dump the ipv{family} routes")))?
        {
            if is_agent_table(route_table(&msg)) {
                found.push(msg);
            }
        }
        for msg in found {
            let (table, destination) = (route_table(&msg), route_destination(&msg));
            match handle.route().del(msg).execute().await {
                Ok(()) => {}
                Err(e) if is_gone(&e) => continue,
                Err(e) => {
                    return Err(nl(format!(
                        "remove ipv{family} route {destination} table {table}"
                    ))(e));
                }
            }
            out.push(Removed::Route {
                family,
                table,
                destination,
            });
        }
    }
    Ok(out)
}

/// The link's name and kind as the kernel reports them.
fn name_and_kind(msg: &LinkMessage) -> (Option<&str>, Option<&InfoKind>) {
    let name = msg.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfName(n) => Some(n.as_str()),
        _ => None,
    });
    let kind = msg.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos.iter().find_map(|i| match i {
            LinkInfo::Kind(k) => Some(k),
            _ => None,
        }),
        _ => None,
    });
    (name, kind)
}

/// The link is the agent's: its name says so and its kind agrees.
fn agent_link(msg: &LinkMessage) -> Option<(String, AgentLinkKind)> {
    let (name, kind) = name_and_kind(msg);
    let name = name?;
    let expected = agent_link_kind(name)?;
    let matches = matches!(
        (expected, kind?),
        (AgentLinkKind::Bridge, InfoKind::Bridge)
            | (AgentLinkKind::Veth, InfoKind::Veth)
            | (AgentLinkKind::Vxlan, InfoKind::Vxlan)
    );
    matches.then(|| (name.to_string(), expected))
}

async fn links(handle: &Handle) -> Result<Vec<Removed>, DriverError> {
    let mut found = Vec::new();
    let mut dump = handle.link().get().execute();
    while let Some(msg) = dump.try_next().await.map_err(nl("dump the links"))? {
        if let Some((name, kind)) = agent_link(&msg) {
            found.push((msg.header.index, name, kind));
        }
    }
    // the ports' veths and the VXLAN devices before the bridges they are on
    found.sort_by_key(|(_, _, kind)| *kind == AgentLinkKind::Bridge);
    let mut out = Vec::new();
    for (index, name, kind) in found {
        match handle.link().del(index).execute().await {
            Ok(()) => {}
            // the peer of a veth removed a moment ago
            Err(e) if is_gone(&e) => continue,
            Err(e) => return Err(nl(format!("remove link {name}"))(e)),
        }
        out.push(Removed::Link { name, kind });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
