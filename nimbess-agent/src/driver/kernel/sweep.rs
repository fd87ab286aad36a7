//! Overlay leftovers: kernel entries for ports of other hosts that the
//! model no longer holds. They appear when a remote port goes away while
//! this agent is down (the watch that would have withdrawn them was not
//! running), so an agent in a fabric sweeps them at start and after every
//! full re-read of the fabric, and `verify` names them as drift.
//!
//! Per network with a VXLAN device `nx…`, an entry is expected exactly when
//! a remote port of the model needs it:
//!
//! | entry | expected for |
//! |---|---|
//! | bridge FDB `MAC dev nx… master` (static) | an L2 remote port's MAC |
//! | VXLAN FDB `MAC dev nx… dst U self` | an L2 remote port's MAC at its host's underlay U |
//! | VXLAN FDB `00:00:00:00:00:00 dev nx… dst U` | an L2 network with a port on host U (broadcast) |
//! | VXLAN FDB `<U's device MAC> dev nx… dst U` | an L3 network with a port on host U |
//! | route `IP/32 dev nx…` in the network's table, neighbour `IP dev nx…` | an L3 remote port's address |

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

use futures::TryStreamExt as _;
use nephrite_pipeline::{Mac, Model, NetworkKind};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};

use super::overlay::bridge_fdb_message;
use super::{KernelDriver, find_link, nl, routed};
use crate::driver::DriverError;
use crate::naming::{vxlan_mac, vxlan_name};

/// One kernel entry no remote port of the model needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Leftover {
    /// A static entry of the bridge's FDB on the VXLAN port.
    BridgeFdb {
        /// The VXLAN device.
        device: String,
        /// Its ifindex.
        index: u32,
        /// The MAC.
        mac: Mac,
    },
    /// An entry of the VXLAN device's own FDB.
    VxlanFdb {
        /// The VXLAN device.
        device: String,
        /// Its ifindex.
        index: u32,
        /// The MAC (all-zero: broadcast replication).
        mac: Mac,
        /// The remote underlay address.
        dst: Ipv4Addr,
    },
    /// A route or neighbour entry of a routed network through its VXLAN device.
    Routed {
        /// The network.
        network: String,
        /// The VXLAN device.
        device: String,
        /// Its ifindex.
        index: u32,
        /// The address.
        ip: Ipv4Addr,
        /// True for the route, false for the neighbour entry.
        route: bool,
    },
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leftover::BridgeFdb { device, mac, .. } => write!(
                f,
                "FDB entry {mac} on {device} belongs to no port of another host"
            ),
            Leftover::VxlanFdb {
                device, mac, dst, ..
            } => write!(
                f,
                "VXLAN FDB entry {mac} dst {dst} on {device} belongs to no port of another host"
            ),
            Leftover::Routed {
                network,
                device,
                ip,
                route,
                ..
            } => write!(
                f,
                "{} {ip} on {device} (network {network}, table {}) belongs to no port of another host",
                if *route { "route" } else { "neighbour" },
                routed::route_table(network)
            ),
        }
    }
}

/// What a network's VXLAN device should hold for the model's remote ports.
#[derive(Debug, Default)]
struct Expected {
    bridge: BTreeSet<Mac>,
    vxlan: BTreeSet<(Mac, Ipv4Addr)>,
    ips: BTreeSet<Ipv4Addr>,
}

fn expected(model: &Model, network: &str, kind: NetworkKind) -> Expected {
    let mut out = Expected::default();
    for port in model.ports().values().filter(|p| p.network == network) {
        let Some(remote) = &port.remote else {
            continue;
        };
        match kind {
            NetworkKind::L2 => {
                out.vxlan.insert((Mac([0; 6]), remote.underlay));
                if let Some(mac) = port.mac() {
                    out.bridge.insert(mac);
                    out.vxlan.insert((mac, remote.underlay));
                }
            }
            NetworkKind::L3 => {
                out.vxlan
                    .insert((vxlan_mac(network, remote.underlay), remote.underlay));
                out.ips.insert(port.address.addr);
            }
        }
    }
    out
}

fn mac_of(msg: &NeighbourMessage) -> Option<Mac> {
    msg.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
            let mut m = [0u8; 6];
            m.copy_from_slice(l);
            Some(Mac(m))
        }
        _ => None,
    })
}

fn destination(msg: &NeighbourMessage) -> Option<Ipv4Addr> {
    msg.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => Some(*ip),
        // in a bridge-family (FDB) message the address comes unparsed
        NeighbourAttribute::Destination(NeighbourAddress::Other(b)) => {
            <[u8; 4]>::try_from(b.as_slice()).ok().map(Ipv4Addr::from)
        }
        _ => None,
    })
}

impl KernelDriver {
    async fn neighbours_of(
        &self,
        family: AddressFamily,
        index: u32,
    ) -> Result<Vec<NeighbourMessage>, DriverError> {
        let mut out = Vec::new();
        let mut dump = self
            .handle
            .neighbours()
            .get()
            .set_address_family(family)
            .execute();
        while let Some(msg) = dump
            .try_next()
            .await
            .map_err(nl(format!("dump the neighbours of ifindex {index}")))?
        {
            if msg.header.ifindex == index {
                out.push(msg);
            }
        }
        Ok(out)
    }

    /// Every overlay entry in the kernel that no remote port of `model` needs.
    pub(super) async fn overlay_leftovers(
        &self,
        model: &Model,
    ) -> Result<Vec<Leftover>, DriverError> {
        let mut out = Vec::new();
        for net in model.networks().values() {
            let (name, kind) = (&net.spec.name, net.spec.kind);
            let device = vxlan_name(name);
            let Some(link) = find_link(&self.handle, &device).await? else {
                continue;
            };
            let index = link.index;
            let want = expected(model, name, kind);
            for msg in self.neighbours_of(AddressFamily::Bridge, index).await? {
                let Some(mac) = mac_of(&msg) else {
                    continue;
                };
                match destination(&msg) {
                    Some(dst) if !want.vxlan.contains(&(mac, dst)) => {
                        out.push(Leftover::VxlanFdb {
                            device: device.clone(),
                            index,
                            mac,
                            dst,
                        });
                    }
                    // the bridge's own (permanent) entries are not ours
                    None if msg.header.state == NeighbourState::Noarp
                        && !want.bridge.contains(&mac) =>
                    {
                        out.push(Leftover::BridgeFdb {
                            device: device.clone(),
                            index,
                            mac,
                        });
                    }
                    _ => {}
                }
            }
            if kind != NetworkKind::L3 {
                continue;
            }
            let leftover = |ip, route| Leftover::Routed {
                network: name.clone(),
                device: device.clone(),
                index,
                ip,
                route,
            };
            for msg in self.neighbours_of(AddressFamily::Inet, index).await? {
                if let Some(ip) = destination(&msg).filter(|ip| !want.ips.contains(ip)) {
                    out.push(leftover(ip, false));
                }
            }
            for (ip, oif) in routed::routes(&self.handle, name).await? {
                if oif == index && !want.ips.contains(&ip) {
                    out.push(leftover(ip, true));
                }
            }
        }
        Ok(out)
    }

    /// Remove the overlay leftovers; returns what was removed, one line each.
    pub(crate) async fn sweep(&self, model: &Model) -> Result<Vec<String>, DriverError> {
        let leftovers = self.overlay_leftovers(model).await?;
        for leftover in &leftovers {
            let what = || format!("sweep {leftover}");
            match leftover {
                Leftover::BridgeFdb { index, mac, .. } => {
                    let msg = bridge_fdb_message(*index, *mac, false, None);
                    self.delete_neighbour(msg, what).await?;
                }
                Leftover::VxlanFdb {
                    index, mac, dst, ..
                } => {
                    let msg = bridge_fdb_message(*index, *mac, true, Some(*dst));
                    self.delete_neighbour(msg, what).await?;
                }
                Leftover::Routed {
                    network, index, ip, ..
                } => routed::fib(&self.handle, network, *ip, None, *index, false).await?,
            }
        }
        Ok(leftovers.iter().map(ToString::to_string).collect())
    }
}

#[cfg(test)]
mod tests;
