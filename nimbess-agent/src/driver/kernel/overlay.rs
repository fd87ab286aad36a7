//! The overlay between the hosts of the fabric. Each L2 network gets a
//! VXLAN device `nx<10 hex>` (VNI from the network's name, the same on every
//! host; UDP 4789 from this host's underlay address; learning off) as one
//! more port of its bridge, flooding broadcast only. A port of another host
//! is rendered as two static entries for its MAC: one in the bridge's FDB
//! (MAC → the VXLAN port) and one in the VXLAN device's own FDB (MAC → the
//! remote host's underlay address). Broadcast (ARP) is replicated to every
//! host with a port on the network (one all-zero MAC entry per such host).
//! Nothing is learnt: what no FIB names still reaches no pod.
//!
//! A network with a `vlan` uses that id as its VNI: the segment id on the
//! wire between hosts. (An 802.1Q tag on the uplink would need the kernel's
//! 8021q support or bridge VLAN filtering; the kernels this is tested on
//! have neither.)

use std::net::Ipv4Addr;

use futures::StreamExt as _;
use nephrite_pipeline::{Mac, NetworkSpec, Port};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::LinkVxlan;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload,
};

use super::fib::{drop_ref, take};
use super::{KernelDriver, find_link, is_not_found, nl, no_ipv6_autoconf};
use crate::driver::DriverError;
use crate::naming::{vxlan_name, vxlan_vni};

/// VXLAN's IANA port.
const VXLAN_PORT: u16 = 4789;
/// `EEXIST`.
const EEXIST: i32 = 17;

/// A port of another host, as rendered here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RemotePort {
    /// Its network.
    pub network: String,
    /// Its host's underlay address.
    pub underlay: Ipv4Addr,
}

fn bridge_fdb_message(index: u32, mac: Mac, own: bool, dst: Option<Ipv4Addr>) -> NeighbourMessage {
    let mut msg = NeighbourMessage::default();
    msg.header.family = AddressFamily::Bridge;
    msg.header.ifindex = index;
    msg.header.state = NeighbourState::Permanent;
    if own {
        msg.header.flags = NeighbourFlags::Own;
    }
    msg.attributes
        .push(NeighbourAttribute::LinkLayerAddress(mac.0.to_vec()));
    if let Some(dst) = dst {
        msg.attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::Inet(dst)));
    }
    msg
}

impl KernelDriver {
    /// The network's VXLAN device on its bridge (nothing outside a fabric).
    pub(super) async fn ensure_overlay(
        &self,
        spec: &NetworkSpec,
        bridge: u32,
    ) -> Result<(), DriverError> {
        let Some(local) = self.underlay else {
            return Ok(());
        };
        let name = vxlan_name(&spec.name);
        let link = match find_link(&self.handle, &name).await? {
            Some(link) => link,
            None => {
                let msg = LinkVxlan::new(&name, vxlan_vni(spec))
                    .local(local)
                    .port(VXLAN_PORT)
                    .learning(false)
                    .mtu(self.port_mtu(spec))
                    .build();
                match self.handle.link().add(msg).execute().await {
                    Ok(()) => {}
                    Err(rtnetlink::Error::NetlinkError(m))
                        if m.code.is_some_and(|c| -c.get() == EEXIST) => {}
                    Err(e) => {
                        return Err(nl(format!(
                            "create VXLAN device {name} for network {}",
                            spec.name
                        ))(e));
                    }
                }
                find_link(&self.handle, &name)
                    .await?
                    .ok_or_else(|| DriverError::State(format!("VXLAN {name} vanished")))?
            }
        };
        if link.controller == Some(bridge) {
            return Ok(());
        }
        no_ipv6_autoconf(&self.handle, link.index).await;
        self.set_bridge_port(link.index, bridge, &name, false).await
    }

    /// The MTU of a network's ports: the network's, less the VXLAN
    /// overhead inside a fabric.
    pub(super) fn port_mtu(&self, spec: &NetworkSpec) -> u32 {
        crate::fabric::port_mtu(spec, self.underlay.is_some())
    }

    /// Take a port of another host in: the network's VXLAN device exists and
    /// broadcast reaches the port's host.
    pub(super) async fn add_remote(
        &mut self,
        port: &Port,
        spec: &NetworkSpec,
    ) -> Result<(), DriverError> {
        let Some(remote) = &port.remote else {
            return Ok(());
        };
        if self.underlay.is_none() {
            return Err(DriverError::State(format!(
                "port {} of host {} cannot be reached: this agent has no underlay (--store)",
                port.id, remote.host
            )));
        }
        self.ensure_network(spec).await?;
        self.remote.insert(
            port.id.clone(),
            RemotePort {
                network: port.network.clone(),
                underlay: remote.underlay,
            },
        );
        if take(&mut self.flood, (port.network.clone(), remote.underlay)) {
            self.flood_entry(&port.network, remote.underlay, true)
                .await?;
        }
        Ok(())
    }

    /// Forget a port of another host; its host leaves the network's
    /// broadcast list with its last port.
    pub(super) async fn remove_remote(&mut self, port: &Port) -> Result<(), DriverError> {
        let Some(remote) = self.remote.remove(&port.id) else {
            return Ok(());
        };
        if drop_ref(&mut self.flood, (remote.network.clone(), remote.underlay)) {
            self.flood_entry(&remote.network, remote.underlay, false)
                .await?;
        }
        Ok(())
    }

    /// The all-zero MAC entry sending the network's broadcast to `underlay`.
    async fn flood_entry(
        &self,
        network: &str,
        underlay: Ipv4Addr,
        add: bool,
    ) -> Result<(), DriverError> {
        let name = vxlan_name(network);
        let Some(link) = find_link(&self.handle, &name).await? else {
            return if add {
                Err(DriverError::State(format!("VXLAN {name} is missing")))
            } else {
                Ok(())
            };
        };
        let msg = bridge_fdb_message(link.index, Mac([0; 6]), true, Some(underlay));
        let what = format!("flood entry to {underlay} on {name}");
        if !add {
            return match self.handle.neighbours().del(msg).execute().await {
                Ok(()) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(nl(what)(e)),
            };
        }
        // `bridge fdb append`: several all-zero entries, one per host
        let mut req = NetlinkMessage::from(RouteNetlinkMessage::NewNeighbour(msg));
        req.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND;
        let mut replies = self.handle.clone().request(req).map_err(nl(what.clone()))?;
        while let Some(reply) = replies.next().await {
            if let NetlinkPayload::Error(e) = reply.payload
                && e.code.is_some_and(|c| -c.get() != EEXIST)
            {
                return Err(nl(what)(rtnetlink::Error::NetlinkError(e)));
            }
        }
        Ok(())
    }

    /// A FIB entry whose egress is a port of another host: the MAC on the
    /// bridge's VXLAN port and, in the VXLAN device, towards that host.
    pub(super) async fn remote_fdb(
        &self,
        mac: Mac,
        remote: &RemotePort,
        add: bool,
    ) -> Result<(), DriverError> {
        let name = vxlan_name(&remote.network);
        let Some(link) = find_link(&self.handle, &name).await? else {
            return if add {
                Err(DriverError::State(format!(
                    "FIB entry {mac}: VXLAN {name} is missing"
                )))
            } else {
                Ok(())
            };
        };
        let entries = [
            (bridge_fdb_message(link.index, mac, false, None), "bridge"),
            (
                bridge_fdb_message(link.index, mac, true, Some(remote.underlay)),
                "VXLAN",
            ),
        ];
        for (mut msg, table) in entries {
            let what = format!(
                "{table} FDB entry {mac} on {name} (host {})",
                remote.underlay
            );
            if add {
                if table == "bridge" {
                    msg.header.state = NeighbourState::Noarp;
                }
                let mut req = self.handle.neighbours().add_bridge(link.index, &mac.0);
                *req.message_mut() = msg;
                req.replace().execute().await.map_err(nl(what))?;
            } else {
                match self.handle.neighbours().del(msg).execute().await {
                    Ok(()) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(nl(what)(e)),
                }
            }
        }
        Ok(())
    }

    /// True when `port` is another host's port rendered here.
    pub(super) fn is_remote(&self, port: &str) -> bool {
        self.remote.contains_key(port)
    }

    /// Where the overlay sends `port`'s frames, when it is another host's.
    pub(super) fn remote_of(&self, port: &str) -> Option<&RemotePort> {
        self.remote.get(port)
    }
}
