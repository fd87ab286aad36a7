//! The `kernel` driver: Linux network namespaces, veth pairs and bridges,
//! all over netlink (rtnetlink); no `ip` or `bridge` process.
//!
//! Rendering of the model's modules:
//!
//! | module | kernel object |
//! |---|---|
//! | `<port>_ingress` | the host end of the port's veth pair (`nv…`), its RX counters |
//! | `<port>_egress` | the same host veth, its TX counters |
//! | `acl.<port>` | nftables `netdev` table named like the host veth, chain `acl` on its ingress hook, one rule (with counter) per ACL rule (no table when the network has no rules) |
//! | `switch.<port>` | the port's bridge port on the network's bridge (`nb…`): learning off, unicast and multicast flooding off, broadcast on (ARP), hairpin off |
//! | FIB entry MAC → egress of Q | a static FDB entry (MAC on Q's host veth), shared by every switch copy that holds it |
//! | `router.<port>` (`kind: l3`) | the rule `iif <host veth> lookup <network's table>`: see [`routed`] (a VRF = a routing table + ip rules) |
//! | FIB entry IP → egress of Q (`kind: l3`) | the route `IP/32 dev <Q's veth>` in the network's table + a permanent neighbour entry |
//!
//! A frame to a MAC in no FIB reaches no pod: the bridge neither learns nor
//! floods unknown unicast, and the drop shows in the bridge's counters.
//! Bridges carry no address, so pods of different networks stay isolated
//! whatever `net.ipv4.ip_forward` says (the agent never touches it).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use futures::TryStreamExt as _;
use nephrite_pipeline::{
    FibKey, Mac, Model, NetworkKind, NetworkSpec, Port, PortId, RenderFacts, RenderPlan,
    fib_entries,
};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::link::{
    AfSpecInet6, AfSpecUnspec, In6AddrGenMode, InfoData, InfoVeth, LinkAttribute, LinkMessage,
};
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourMessage, NeighbourState};
use rtnetlink::{Handle, LinkBridge, LinkBridgePort, LinkUnspec, LinkVeth};

use super::DriverError;
use crate::naming::{bridge_name, host_veth_name, miss_sink_name, miss_sink_peer_name};

pub mod acl;
mod inspect;
pub mod netns;
pub mod routed;

use netns::in_netns;

fn nl(what: impl Into<String>) -> impl FnOnce(rtnetlink::Error) -> DriverError {
    let what = what.into();
    move |source| DriverError::Netlink { what, source }
}

/// True for "no such device / entry" answers.
fn is_not_found(e: &rtnetlink::Error) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m)
        if m.code.is_some_and(|c| matches!(-c.get(), libc_enodev::ENODEV | libc_enodev::ENOENT)))
}

mod libc_enodev {
    pub const ENOENT: i32 = 2;
    pub const ENODEV: i32 = 19;
}

/// A link as read back from the kernel.
#[derive(Debug, Clone, Default)]
pub struct LinkInfo {
    /// Interface index.
    pub index: u32,
    /// Its bridge, if enslaved.
    pub controller: Option<u32>,
    /// MAC address.
    pub mac: Option<Mac>,
    /// RX packets.
    pub rx_packets: u64,
    /// TX packets.
    pub tx_packets: u64,
    /// RX + TX drops.
    pub dropped: u64,
}

fn link_info(msg: &LinkMessage) -> LinkInfo {
    let mut info = LinkInfo {
        index: msg.header.index,
        ..Default::default()
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::Controller(c) => info.controller = Some(*c),
            LinkAttribute::Address(a) if a.len() == 6 => {
                let mut m = [0u8; 6];
                m.copy_from_slice(a);
                info.mac = Some(Mac(m));
            }
            LinkAttribute::Stats64(s) => {
                info.rx_packets = s.rx_packets;
                info.tx_packets = s.tx_packets;
                info.dropped = s.rx_dropped + s.tx_dropped;
            }
            _ => {}
        }
    }
    info
}

/// Look a link up by name; `None` when it does not exist.
pub async fn find_link(handle: &Handle, name: &str) -> Result<Option<LinkInfo>, DriverError> {
    let mut links = handle.link().get().match_name(name.to_string()).execute();
    match links.try_next().await {
        Ok(Some(msg)) => Ok(Some(link_info(&msg))),
        Ok(None) => Ok(None),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(nl(format!("look up link {name}"))(e)),
    }
}

/// Turn IPv6 address autoconfiguration off on a link (before it goes up):
/// ports are IPv4-only and a link-local address would make the interface
/// send DAD, router and MLD solicitations of its own. Kernels without IPv6
/// refuse the request, which is fine.
async fn no_ipv6_autoconf(handle: &Handle, index: u32) {
    let msg = LinkUnspec::new_with_index(index)
        .append_extra_attribute(LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(
            vec![AfSpecInet6::AddrGenMode(In6AddrGenMode::None)],
        )]))
        .build();
    if let Err(e) = handle.link().set(msg).execute().await {
        tracing::debug!(index, error = %e, "IPv6 autoconfiguration left on");
    }
}

/// The Linux kernel data plane.
#[derive(Debug)]
pub struct KernelDriver {
    handle: Handle,
    /// FIB references: (MAC, egress port) → how many switch copies hold it.
    fdb_refs: BTreeMap<(Mac, PortId), usize>,
    /// FIB references of routers: (address, egress port) → how many hold it.
    route_refs: BTreeMap<(std::net::Ipv4Addr, PortId), usize>,
    /// What the driver rendered of each port: its network and MAC.
    rendered: BTreeMap<PortId, (String, Mac)>,
}

impl KernelDriver {
    /// Open a netlink connection in the agent's namespace.
    ///
    /// # Errors
    /// No netlink socket (no CAP_NET_ADMIN is only found on the first change).
    pub fn new() -> Result<Self, DriverError> {
        let (connection, handle, _) =
            rtnetlink::new_connection().map_err(|source| DriverError::Os {
                what: "open a netlink socket".into(),
                source,
            })?;
        tokio::spawn(connection);
        Ok(KernelDriver {
            handle,
            fdb_refs: BTreeMap::new(),
            route_refs: BTreeMap::new(),
            rendered: BTreeMap::new(),
        })
    }

    /// The network's shared object: its bridge (L2, `Some(ifindex)`) or its
    /// routing table (L3, `None`).
    async fn ensure_network(&self, spec: &NetworkSpec) -> Result<Option<u32>, DriverError> {
        if spec.kind == NetworkKind::L3 {
            routed::ensure_table(&self.handle, spec).await?;
            return Ok(None);
        }
        self.ensure_bridge(spec).await.map(Some)
    }

    async fn ensure_bridge(&self, spec: &NetworkSpec) -> Result<u32, DriverError> {
        let name = bridge_name(&spec.name);
        if let Some(link) = find_link(&self.handle, &name).await? {
            return Ok(link.index);
        }
        let msg = LinkBridge::new(&name).up().build();
        match self.handle.link().add(msg).execute().await {
            Ok(()) => {}
            Err(e) if matches!(&e, rtnetlink::Error::NetlinkError(m) if m.code.is_some_and(|c| -c.get() == 17)) =>
                {}
            Err(e) => {
                return Err(nl(format!(
                    "create bridge {name} for network {}",
                    spec.name
                ))(e));
            }
        }
        let link = find_link(&self.handle, &name)
            .await?
            .ok_or_else(|| DriverError::State(format!("bridge {name} vanished after creation")))?;
        self.ensure_miss_sink(spec, link.index).await?;
        Ok(link.index)
    }

    /// The network's FIB-miss sink: a veth end on the bridge, the only
    /// port with unicast flooding on (broadcast and multicast off), so what
    /// no FIB knows is flooded there alone and counted as its TX.
    async fn ensure_miss_sink(&self, spec: &NetworkSpec, bridge: u32) -> Result<(), DriverError> {
        let name = miss_sink_name(&spec.name);
        let link = match find_link(&self.handle, &name).await? {
            Some(link) => link,
            None => {
                let peer = miss_sink_peer_name(&spec.name);
                let msg = LinkVeth::new(&name, &peer).build();
                self.handle
                    .link()
                    .add(msg)
                    .execute()
                    .await
                    .map_err(nl(format!("create FIB-miss sink {name}")))?;
                let peer_link = find_link(&self.handle, &peer)
                    .await?
                    .ok_or_else(|| DriverError::State(format!("veth {peer} vanished")))?;
                no_ipv6_autoconf(&self.handle, peer_link.index).await;
                self.handle
                    .link()
                    .set(LinkUnspec::new_with_index(peer_link.index).up().build())
                    .execute()
                    .await
                    .map_err(nl(format!("set {peer} up")))?;
                find_link(&self.handle, &name)
                    .await?
                    .ok_or_else(|| DriverError::State(format!("veth {name} vanished")))?
            }
        };
        if link.controller == Some(bridge) {
            return Ok(());
        }
        no_ipv6_autoconf(&self.handle, link.index).await;
        self.set_bridge_port(link.index, bridge, &name, true).await
    }

    async fn delete_link(&self, name: &str) -> Result<(), DriverError> {
        if let Some(link) = find_link(&self.handle, name).await? {
            match self.handle.link().del(link.index).execute().await {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(nl(format!("delete link {name}"))(e)),
            }
        }
        Ok(())
    }

    /// Enslave `name` to `bridge` without learning: a pod's port floods
    /// broadcast only (ARP); the FIB-miss sink (`sink`) unknown unicast only.
    async fn set_bridge_port(
        &self,
        host_index: u32,
        bridge: u32,
        name: &str,
        sink: bool,
    ) -> Result<(), DriverError> {
        let msg = LinkUnspec::new_with_index(host_index)
            .controller(bridge)
            .up()
            .build();
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(nl(format!("attach {name} to its bridge")))?;
        let port = LinkBridgePort::new(host_index)
            .learning(false)
            .flood(sink)
            .mcast_flood(false)
            .bcast_flood(!sink)
            .hairpin(false)
            .build();
        self.handle
            .link()
            .set_port(port)
            .execute()
            .await
            .map_err(nl(format!(
                "set learning and flooding on bridge port {name}"
            )))
    }

    async fn create_port(
        &self,
        port: &Port,
        spec: &NetworkSpec,
    ) -> Result<RenderFacts, DriverError> {
        let bridge = self.ensure_network(spec).await?;
        let host = host_veth_name(&port.id);
        // A leftover of an ADD that crashed half-way is ours to replace.
        self.delete_link(&host).await?;
        let netns = std::fs::File::open(&port.netns).map_err(|source| DriverError::Os {
            what: format!("open netns {}", port.netns),
            source,
        })?;
        let mtu = spec.mtu();
        let peer = rtnetlink::LinkMessageBuilder::<LinkUnspec>::new()
            .name(port.ifname.clone())
            .mtu(mtu)
            .setns_by_fd(std::os::fd::AsRawFd::as_raw_fd(&netns))
            .build();
        let msg = LinkVeth::new(&host, &port.ifname)
            .mtu(mtu)
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
            .build();
        self.handle
            .link()
            .add(msg)
            .execute()
            .await
            .map_err(nl(format!(
                "create veth {host} with {} in {}",
                port.ifname, port.netns
            )))?;
        drop(netns);
        let link = find_link(&self.handle, &host)
            .await?
            .ok_or_else(|| DriverError::State(format!("veth {host} vanished after creation")))?;
        no_ipv6_autoconf(&self.handle, link.index).await;
        match bridge {
            Some(bridge) => {
                self.set_bridge_port(link.index, bridge, &host, false)
                    .await?
            }
            None => {
                routed::attach(&self.handle, &host, spec).await?;
                self.handle
                    .link()
                    .set(LinkUnspec::new_with_index(link.index).up().build())
                    .execute()
                    .await
                    .map_err(nl(format!("set {host} up")))?;
            }
        }
        let host_mac = link
            .mac
            .ok_or_else(|| DriverError::State(format!("veth {host} has no MAC")))?;
        let routed_spec = (spec.kind == NetworkKind::L3).then(|| spec.clone());

        let ifname = port.ifname.clone();
        let address = port.address;
        let mac = in_netns(
            Path::new(&port.netns),
            Box::new(move |h: Handle| {
                Box::pin(async move {
                    let inner = find_link(&h, &ifname).await?.ok_or_else(|| {
                        DriverError::State(format!("{ifname} missing in the pod"))
                    })?;
                    no_ipv6_autoconf(&h, inner.index).await;
                    if let Some(spec) = &routed_spec {
                        routed::configure_pod(&h, inner.index, &ifname, address, spec, host_mac)
                            .await?;
                    } else {
                        h.address()
                            .add(inner.index, IpAddr::V4(address.addr), address.prefix)
                            .execute()
                            .await
                            .map_err(nl(format!("address {address} on {ifname}")))?;
                        h.link()
                            .set(LinkUnspec::new_with_index(inner.index).up().build())
                            .execute()
                            .await
                            .map_err(nl(format!("set {ifname} up")))?;
                    }
                    if let Some(lo) = find_link(&h, "lo").await? {
                        h.link()
                            .set(LinkUnspec::new_with_index(lo.index).up().build())
                            .execute()
                            .await
                            .map_err(nl("set lo up"))?;
                    }
                    inner
                        .mac
                        .ok_or_else(|| DriverError::State(format!("{ifname} has no MAC")))
                })
            }),
        )
        .await?;

        let forwarder_object = match bridge {
            Some(_) => format!("bridge {} port {host}", bridge_name(&spec.name)),
            None => format!(
                "rule iif {host} lookup table {}",
                routed::route_table(&spec.name)
            ),
        };
        let forwarder = match spec.kind {
            NetworkKind::L2 => "switch",
            NetworkKind::L3 => "router",
        };
        let mut modules = BTreeMap::new();
        for (id, object) in [
            (
                nephrite_pipeline::ingress_id(&port.id),
                format!("veth {host} rx"),
            ),
            (
                nephrite_pipeline::egress_id(&port.id),
                format!("veth {host} tx"),
            ),
            (
                nephrite_pipeline::copy_id(forwarder, &port.id),
                forwarder_object,
            ),
            (
                nephrite_pipeline::copy_id("acl", &port.id),
                format!("veth {host} ingress filters"),
            ),
        ] {
            modules.insert(id, BTreeMap::from([("object".to_string(), object)]));
        }
        Ok(RenderFacts {
            mac,
            ifindex: link.index,
            modules,
        })
    }

    async fn fdb(&self, mac: Mac, egress_port: &str, add: bool) -> Result<(), DriverError> {
        let host = host_veth_name(egress_port);
        let Some(link) = find_link(&self.handle, &host).await? else {
            return if add {
                Err(DriverError::State(format!(
                    "FIB entry {mac}: veth {host} of {egress_port} is missing"
                )))
            } else {
                Ok(())
            };
        };
        if add {
            self.handle
                .neighbours()
                .add_bridge(link.index, &mac.0)
                .state(NeighbourState::Noarp)
                .replace()
                .execute()
                .await
                .map_err(nl(format!("FDB entry {mac} on {host}")))
        } else {
            let mut msg = NeighbourMessage::default();
            msg.header.family = AddressFamily::Bridge;
            msg.header.ifindex = link.index;
            msg.attributes
                .push(NeighbourAttribute::LinkLayerAddress(mac.0.to_vec()));
            match self.handle.neighbours().del(msg).execute().await {
                Ok(()) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(nl(format!("remove FDB entry {mac} on {host}"))(e)),
            }
        }
    }

    /// Install or withdraw a router FIB entry: `ip` behind `egress_port`'s veth.
    async fn route(
        &self,
        ip: std::net::Ipv4Addr,
        egress_port: &str,
        add: bool,
    ) -> Result<(), DriverError> {
        let host = host_veth_name(egress_port);
        let (Some(link), Some((network, mac))) = (
            find_link(&self.handle, &host).await?,
            self.rendered.get(egress_port),
        ) else {
            return if add {
                Err(DriverError::State(format!(
                    "FIB entry {ip}: veth {host} of {egress_port} is missing"
                )))
            } else {
                Ok(())
            };
        };
        routed::fib(&self.handle, network, ip, Some(*mac), link.index, add).await
    }

    fn desired_routes(model: &Model) -> BTreeMap<(std::net::Ipv4Addr, PortId), usize> {
        let mut refs = BTreeMap::new();
        for e in fib_entries(&model.rendered().modules) {
            if let FibKey::Ip(ip) = e.key {
                *refs.entry((ip, e.egress_port)).or_default() += 1;
            }
        }
        refs
    }

    fn desired_fdb(model: &Model) -> BTreeMap<(Mac, PortId), usize> {
        let mut refs = BTreeMap::new();
        for e in fib_entries(&model.rendered().modules) {
            if let FibKey::Mac(mac) = e.key {
                *refs.entry((mac, e.egress_port)).or_default() += 1;
            }
        }
        refs
    }

    pub(crate) async fn reconcile(
        &mut self,
        model: &Model,
    ) -> Result<Vec<(PortId, RenderFacts)>, DriverError> {
        let mut bridges = BTreeMap::new();
        for net in model.networks().values() {
            if let Some(bridge) = self.ensure_network(&net.spec).await? {
                self.ensure_miss_sink(&net.spec, bridge).await?;
                bridges.insert(net.spec.name.clone(), bridge);
            }
        }
        let mut out = Vec::new();
        for port in model.ports().values() {
            let host = host_veth_name(&port.id);
            let Some(spec) = model.networks().get(&port.network).map(|n| &n.spec) else {
                continue;
            };
            match find_link(&self.handle, &host).await? {
                Some(link) => {
                    // adopt: keep the veth, make sure it sits on its bridge as configured
                    if let Some(bridge) = bridges.get(&port.network)
                        && link.controller != Some(*bridge)
                    {
                        self.set_bridge_port(link.index, *bridge, &host, false)
                            .await?;
                    }
                    if spec.kind == NetworkKind::L3 {
                        routed::attach(&self.handle, &host, spec).await?;
                    }
                    if let Some(mut facts) = port.facts.clone() {
                        facts.ifindex = link.index;
                        self.rendered
                            .insert(port.id.clone(), (port.network.clone(), facts.mac));
                        out.push((port.id.clone(), facts));
                    }
                }
                None if Path::new(&port.netns).exists() => {
                    tracing::warn!(port = %port.id, "veth missing, rendering the port again");
                    let facts = self.create_port(port, spec).await?;
                    acl::render(&host, &spec.acl)?;
                    self.rendered
                        .insert(port.id.clone(), (port.network.clone(), facts.mac));
                    out.push((port.id.clone(), facts));
                }
                None => {
                    tracing::warn!(port = %port.id, netns = %port.netns, "veth and netns gone; GC or DEL will free the port")
                }
            }
        }
        let refs = Self::desired_fdb(model);
        for (mac, egress) in refs.keys() {
            if model
                .port(egress)
                .is_some_and(|p| Path::new(&p.netns).exists())
            {
                self.fdb(*mac, egress, true).await?;
            }
        }
        self.fdb_refs = refs;
        let routes = Self::desired_routes(model);
        for (ip, egress) in routes.keys() {
            self.route(*ip, egress, true).await?;
        }
        self.route_refs = routes;
        Ok(out)
    }

    pub(crate) async fn apply(
        &mut self,
        plan: &RenderPlan,
        networks: &BTreeMap<String, NetworkSpec>,
    ) -> Result<Vec<(PortId, RenderFacts)>, DriverError> {
        for spec in plan.networks_added.iter().chain(&plan.networks_changed) {
            self.ensure_network(spec).await?;
        }
        let mut facts = Vec::new();
        for port in &plan.ports_added {
            let spec = networks.get(&port.network).ok_or_else(|| {
                DriverError::State(format!(
                    "port {} names unknown network {}",
                    port.id, port.network
                ))
            })?;
            let rendered = self.create_port(port, spec).await?;
            self.rendered
                .insert(port.id.clone(), (port.network.clone(), rendered.mac));
            facts.push((port.id.clone(), rendered));
        }
        for change in &plan.acl_changed {
            let host = host_veth_name(&change.port);
            match find_link(&self.handle, &host).await? {
                Some(_) => acl::render(&host, &change.rules)?,
                // its netns went away behind our back: `verify` reports it, GC frees it
                None => {
                    tracing::warn!(port = %change.port, "ACL not rendered: veth {host} is missing")
                }
            }
        }
        for e in &plan.fib_added {
            if let FibKey::Ip(ip) = e.key {
                let refs = self
                    .route_refs
                    .entry((ip, e.egress_port.clone()))
                    .or_default();
                *refs += 1;
                if *refs == 1 {
                    self.route(ip, &e.egress_port, true).await?;
                }
            }
            if let FibKey::Mac(mac) = e.key {
                let refs = self
                    .fdb_refs
                    .entry((mac, e.egress_port.clone()))
                    .or_default();
                *refs += 1;
                if *refs == 1 {
                    self.fdb(mac, &e.egress_port, true).await?;
                }
            }
        }
        for e in &plan.fib_removed {
            if let FibKey::Ip(ip) = e.key {
                let key = (ip, e.egress_port.clone());
                let left = self.route_refs.get_mut(&key).map_or(0, |n| {
                    *n = n.saturating_sub(1);
                    *n
                });
                if left == 0 {
                    self.route_refs.remove(&key);
                    self.route(ip, &e.egress_port, false).await?;
                }
            }
            if let FibKey::Mac(mac) = e.key {
                let key = (mac, e.egress_port.clone());
                let left = match self.fdb_refs.get_mut(&key) {
                    Some(n) => {
                        *n = n.saturating_sub(1);
                        *n
                    }
                    None => 0,
                };
                if left == 0 {
                    self.fdb_refs.remove(&key);
                    self.fdb(mac, &e.egress_port, false).await?;
                }
            }
        }
        for port in &plan.ports_removed {
            let host = host_veth_name(&port.id);
            acl::remove(&host)?;
            self.delete_link(&host).await?;
            let routed = networks
                .get(&port.network)
                .is_some_and(|n| n.kind == NetworkKind::L3);
            if routed {
                routed::detach(&self.handle, &host, &port.network).await?;
            }
            self.rendered.remove(&port.id);
        }
        for spec in &plan.networks_removed {
            self.delete_link(&bridge_name(&spec.name)).await?;
            self.delete_link(&miss_sink_name(&spec.name)).await?;
        }
        Ok(facts)
    }

    pub(crate) async fn discard_port(&mut self, port: &Port) {
        if let Err(e) = acl::remove(&host_veth_name(&port.id)) {
            tracing::warn!(port = %port.id, error = %e, "rollback could not remove the ACL table");
        }
        if let Err(e) = self.delete_link(&host_veth_name(&port.id)).await {
            tracing::warn!(port = %port.id, error = %e, "rollback could not delete the veth");
        }
        self.fdb_refs.retain(|(_, egress), _| egress != &port.id);
        self.route_refs.retain(|(_, egress), _| egress != &port.id);
        if let Err(e) = routed::detach(&self.handle, &host_veth_name(&port.id), &port.network).await
        {
            tracing::warn!(port = %port.id, error = %e, "rollback could not remove the ip rule");
        }
        self.rendered.remove(&port.id);
    }

    pub(crate) async fn check(&self, port: &Port) -> Result<(), DriverError> {
        let host = host_veth_name(&port.id);
        if find_link(&self.handle, &host).await?.is_none() {
            return Err(DriverError::State(format!(
                "veth {host} of {} is missing",
                port.id
            )));
        }
        let ifname = port.ifname.clone();
        let address = port.address;
        in_netns(
            Path::new(&port.netns),
            Box::new(move |h: Handle| {
                Box::pin(async move {
                    let inner = find_link(&h, &ifname)
                        .await?
                        .ok_or_else(|| DriverError::State(format!("{ifname} is missing in the pod")))?;
                    let mut addrs = h
                        .address()
                        .get()
                        .set_link_index_filter(inner.index)
                        .execute();
                    while let Some(msg) = addrs.try_next().await.map_err(nl(format!("addresses of {ifname}")))? {
                        let found = msg.attributes.iter().any(|a| {
                            matches!(a, netlink_packet_route::address::AddressAttribute::Address(IpAddr::V4(ip)) if *ip == address.addr)
                        });
                        if found && msg.header.prefix_len == address.prefix {
                            return Ok(());
                        }
                    }
                    Err(DriverError::State(format!("{ifname} does not hold {address}")))
                })
            }),
        )
        .await
    }
}
