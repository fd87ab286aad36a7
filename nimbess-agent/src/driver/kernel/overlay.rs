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
//! A routed (`kind: l3`) network gets a VXLAN device too, on no bridge: it
//! is one more interface of the network's VRF (the rule `iif nx… lookup TABLE`,
//! forwarding on for that device only), with a MAC derived from
//! the network and this host's underlay address ([`vxlan_mac`]). A port of
//! another host is the route `IP/32 dev nx…` in the network's table with a
//! permanent neighbour entry (IP → the remote host's device MAC) and one
//! static VXLAN FDB entry per remote host (that MAC → its underlay). The
//! decapsulated packet arrives addressed to the receiving device's own MAC,
//! is looked up in the same network's table and leaves on the pod's veth.
//! Why not plain routes via the remote host's underlay address: packets of
//! every network would then arrive on the same underlay interface, and two
//! networks with overlapping subnets (or one network and the host's own
//! routes) could no longer be told apart; the VNI keeps each VRF separate
//! on the wire, needs no route in the hosts' main tables, and works across
//! routed underlays.
//!
//! A network with a `vlan` uses that id as its VNI: the segment id on the
//! wire between hosts. (An 802.1Q tag on the uplink would need the kernel's
//! 8021q support or bridge VLAN filtering; the kernels this is tested on
//! have neither.)

use std::net::Ipv4Addr;

use futures::StreamExt as _;
use nephrite_pipeline::{Mac, NetworkKind, NetworkSpec, Port};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::LinkVxlan;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload,
};

use super::fib::{drop_ref, take};
use super::{KernelDriver, LinkInfo, find_link, nl, no_ipv6_autoconf, routed};
use crate::driver::DriverError;
use crate::naming::{vxlan_mac, vxlan_name, vxlan_vni};

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
    /// Its network is routed (`kind: l3`).
    pub routed: bool,
}

impl RemotePort {
    /// The VXLAN FDB entry that sends this port's host its share of the
    /// network: the host's device MAC (routed) or the all-zero MAC that
    /// replicates broadcast (L2).
    fn host_mac(&self) -> Mac {
        if self.routed {
            vxlan_mac(&self.network, self.underlay)
        } else {
            Mac([0; 6])
        }
    }
}

pub(super) fn bridge_fdb_message(
    index: u32,
    mac: Mac,
    own: bool,
    dst: Option<Ipv4Addr>,
) -> NeighbourMessage {
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
    /// The network's VXLAN device, created when missing (`None` outside a
    /// fabric). A routed network's device carries its derived MAC.
    async fn ensure_vxlan(&self, spec: &NetworkSpec) -> Result<Option<LinkInfo>, DriverError> {
        let Some(local) = self.underlay else {
            return Ok(None);
        };
        let name = vxlan_name(&spec.name);
        if let Some(link) = find_link(&self.handle, &name).await? {
            return Ok(Some(link));
        }
        let mut msg = LinkVxlan::new(&name, vxlan_vni(spec))
            .local(local)
            .port(VXLAN_PORT)
            .learning(false)
            .mtu(self.port_mtu(spec));
        if spec.kind == NetworkKind::L3 {
            msg = msg.address(vxlan_mac(&spec.name, local).0.to_vec());
        }
        self.create_link(msg.build(), || {
            format!("create VXLAN device {name} for network {}", spec.name)
        })
        .await?;
        let link = find_link(&self.handle, &name)
            .await?
            .ok_or_else(|| DriverError::State(format!("VXLAN {name} vanished")))?;
        no_ipv6_autoconf(&self.handle, link.index).await;
        Ok(Some(link))
    }

    /// The network's VXLAN device on its bridge (nothing outside a fabric).
    pub(super) async fn ensure_overlay(
        &self,
        spec: &NetworkSpec,
        bridge: u32,
    ) -> Result<(), DriverError> {
        let Some(link) = self.ensure_vxlan(spec).await? else {
            return Ok(());
        };
        if link.controller == Some(bridge) {
            return Ok(());
        }
        self.set_bridge_port(
            link.index,
            bridge,
            &vxlan_name(&spec.name),
            false,
            super::dual_stack(spec),
        )
        .await
    }

    /// A routed network's VXLAN device as an interface of its VRF: up, with
    /// its derived MAC, its rule into the network's table and forwarding on
    /// (nothing outside a fabric).
    pub(super) async fn ensure_routed_overlay(
        &self,
        spec: &NetworkSpec,
    ) -> Result<(), DriverError> {
        let (Some(local), Some(link)) = (self.underlay, self.ensure_vxlan(spec).await?) else {
            return Ok(());
        };
        let name = vxlan_name(&spec.name);
        let mac = vxlan_mac(&spec.name, local);
        if link.mac != Some(mac) || !link.up {
            let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
                .address(mac.0.to_vec())
                .up()
                .build();
            self.handle
                .link()
                .set(msg)
                .execute()
                .await
                .map_err(nl(format!("set {name} up with MAC {mac}")))?;
        }
        routed::attach(&self.handle, &name, spec).await
    }

    /// The MTU of a network's ports: the network's, less the VXLAN
    /// overhead inside a fabric.
    pub(super) fn port_mtu(&self, spec: &NetworkSpec) -> u32 {
        nephrite_pipeline::port_mtu(spec, self.underlay.is_some())
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
        let rendered = RemotePort {
            network: port.network.clone(),
            underlay: remote.underlay,
            routed: spec.kind == NetworkKind::L3,
        };
        let first = take(&mut self.flood, (port.network.clone(), remote.underlay));
        if first {
            self.host_entry(&rendered, true).await?;
        }
        self.remote.insert(port.id.clone(), rendered);
        Ok(())
    }

    /// Forget a port of another host; its host leaves the network's
    /// broadcast list with its last port.
    pub(super) async fn remove_remote(&mut self, port: &Port) -> Result<(), DriverError> {
        let Some(remote) = self.remote.remove(&port.id) else {
            return Ok(());
        };
        if drop_ref(&mut self.flood, (remote.network.clone(), remote.underlay)) {
            self.host_entry(&remote, false).await?;
        }
        Ok(())
    }

    /// The VXLAN FDB entry of a remote port's host on its network
    /// ([`RemotePort::host_mac`]), one per (network, host).
    async fn host_entry(&self, remote: &RemotePort, add: bool) -> Result<(), DriverError> {
        let (network, underlay) = (&remote.network, remote.underlay);
        let name = vxlan_name(network);
        let what = format!("entry {} to {underlay} on {name}", remote.host_mac());
        let Some(link) = self.vxlan_link(network, add, || what.clone()).await? else {
            return Ok(());
        };
        let msg = bridge_fdb_message(link.index, remote.host_mac(), true, Some(underlay));
        if !add {
            return self.delete_neighbour(msg, || what).await;
        }
        // `bridge fdb append`: several all-zero entries, one per host (a
        // routed network's host MAC has one)
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

    /// The network's VXLAN device, which `what` needs: `None` when it is
    /// missing and the entry is being removed (nothing to remove).
    async fn vxlan_link(
        &self,
        network: &str,
        add: bool,
        what: impl FnOnce() -> String,
    ) -> Result<Option<LinkInfo>, DriverError> {
        let name = vxlan_name(network);
        match find_link(&self.handle, &name).await? {
            Some(link) => Ok(Some(link)),
            None if add => Err(DriverError::State(format!(
                "{}: VXLAN {name} is missing",
                what()
            ))),
            None => Ok(None),
        }
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
        let Some(link) = self
            .vxlan_link(&remote.network, add, || format!("FIB entry {mac}"))
            .await?
        else {
            return Ok(());
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
                self.delete_neighbour(msg, || what).await?;
            }
        }
        Ok(())
    }

    /// A router FIB entry whose egress is a port of another host: the route
    /// `ip/32 dev nx…` in the network's table, `ip` a neighbour behind the
    /// remote host's device MAC.
    pub(super) async fn remote_route(
        &self,
        ip: Ipv4Addr,
        remote: &RemotePort,
        add: bool,
    ) -> Result<(), DriverError> {
        let Some(link) = self
            .vxlan_link(&remote.network, add, || format!("FIB entry {ip}"))
            .await?
        else {
            return Ok(());
        };
        let mac = remote.host_mac();
        routed::fib(
            &self.handle,
            &remote.network,
            ip,
            Some(mac),
            link.index,
            add,
        )
        .await
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
