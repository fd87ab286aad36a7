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
//! With an egress ([`KernelDriver::set_egress`]) each L2 bridge holds its
//! network's gateway, each routed network's VRF its gateway on the host
//! veths and a way out ([`routed`]), and the [`firewall::egress`] table keeps pod
//! networks apart through the host and masquerades what leaves them.
//!
//! The ACLs, the egress table, the Services and the policies are the
//! driver's [`firewall`] ([`firewall::NftFirewall`]), which it calls for
//! what a plan needs and hands to the agent for the rest.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use futures::TryStreamExt as _;
use nephrite_pipeline::{
    EgressPolicy, Ipv4Cidr, Mac, Masquerade, Model, NetworkKind, NetworkSpec, Port, PortId,
    RenderFacts, RenderPlan,
};
use netlink_packet_route::link::{
    AfSpecInet6, AfSpecUnspec, In6AddrGenMode, LinkAttribute, LinkMessage,
};
use rtnetlink::{Handle, LinkBridge, LinkBridgePort, LinkUnspec, LinkVeth};

use super::DriverError;
use super::firewall::Firewall as _;
use crate::naming::{bridge_name, host_veth_name, miss_sink_name, miss_sink_peer_name, vxlan_name};

mod dual;
mod fib;
pub mod firewall;
mod inspect;
pub mod netns;
mod overlay;
mod port;
pub mod routed;
mod sweep;

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
    /// Administratively up.
    pub up: bool,
}

fn link_info(msg: &LinkMessage) -> LinkInfo {
    let mut info = LinkInfo {
        index: msg.header.index,
        up: msg
            .header
            .flags
            .contains(netlink_packet_route::link::LinkFlags::Up),
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
    /// This host's underlay address inside a fabric (`None`: a single host).
    underlay: Option<Ipv4Addr>,
    /// Ports of other hosts, reached over the overlay.
    remote: BTreeMap<PortId, overlay::RemotePort>,
    /// (network, remote underlay) → how many of its ports are on the network.
    flood: BTreeMap<(String, Ipv4Addr), usize>,
    /// The pods' way out (`None`: pods reach their own network only).
    egress: Option<(Ipv4Cidr, Masquerade)>,
    /// The ACLs, the egress table, the Services and the policies.
    firewall: firewall::NftFirewall,
}

impl KernelDriver {
    /// Open a netlink connection in the agent's namespace; `firewall`
    /// renders the ACLs, the egress table, the Services and the policies.
    ///
    /// # Errors
    /// No netlink socket (no CAP_NET_ADMIN is only found on the first change).
    pub fn new(firewall: firewall::NftFirewall) -> Result<Self, DriverError> {
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
            underlay: None,
            remote: BTreeMap::new(),
            flood: BTreeMap::new(),
            egress: None,
            firewall,
        })
    }

    /// Give pods a way out: a gateway address on each L2 network's bridge
    /// (the host reaches its pods through it), a default route in each pod,
    /// forwarding, and the [`firewall::egress`] table for `service_cidr` and
    /// `masquerade`.
    pub fn set_egress(&mut self, service_cidr: Ipv4Cidr, masquerade: Masquerade) {
        self.egress = Some((service_cidr, masquerade));
    }

    /// The firewall (the agent renders Services and policies through it).
    pub fn firewall(&self) -> &firewall::NftFirewall {
        &self.firewall
    }

    /// The firewall, to change.
    pub fn firewall_mut(&mut self) -> &mut firewall::NftFirewall {
        &mut self.firewall
    }

    /// True when pods of `spec` get a default route through the gateway
    /// (both kinds, once pods have a way out).
    pub fn routes_default(&self, _spec: &NetworkSpec) -> bool {
        self.egress.is_some()
    }

    /// True when the network's bridge holds its gateway (an L2 network
    /// with a way out): the bridge then needs an FDB entry towards each pod.
    pub(crate) fn bridge_gateway(&self, spec: &NetworkSpec) -> bool {
        self.egress.is_some() && spec.kind == NetworkKind::L2
    }

    /// True when the network's VRF is its pods' way out (an L3 network with
    /// a way out): its table then needs a route towards each local pod.
    pub(crate) fn routed_gateway(&self, spec: &NetworkSpec) -> bool {
        self.egress.is_some() && spec.kind == NetworkKind::L3
    }

    /// What the egress table holds for `networks` (`None` without
    /// [`KernelDriver::set_egress`]).
    fn egress_policy(&self, networks: &[NetworkSpec]) -> Result<Option<EgressPolicy>, DriverError> {
        let Some((service_cidr, masquerade)) = &self.egress else {
            return Ok(None);
        };
        EgressPolicy::new(networks, *service_cidr, masquerade.clone())
            .map(Some)
            .map_err(|e| DriverError::State(e.to_string()))
    }

    /// Render the egress table for `networks`, and the routed networks'
    /// way out through their tables (nothing without [`KernelDriver::set_egress`]).
    async fn render_egress<'a>(
        &mut self,
        networks: impl Iterator<Item = &'a NetworkSpec>,
    ) -> Result<(), DriverError> {
        let specs: Vec<NetworkSpec> = networks.cloned().collect();
        let Some(policy) = self.egress_policy(&specs)? else {
            return Ok(());
        };
        self.firewall.apply_egress(&policy, &specs)?;
        for spec in specs.iter().filter(|s| s.kind == NetworkKind::L3) {
            routed::open_table(&self.handle, spec).await?;
        }
        if specs.iter().any(dual_stack) {
            dual::enable_forwarding6()?;
        }
        enable_forwarding()
    }

    /// Drift of the egress table for `networks`, one line each; rendered
    /// again when there is any.
    pub(crate) async fn verify_egress<'a>(
        &mut self,
        networks: impl Iterator<Item = &'a NetworkSpec>,
    ) -> Result<Vec<String>, DriverError> {
        let specs: Vec<NetworkSpec> = networks.cloned().collect();
        let Some(policy) = self.egress_policy(&specs)? else {
            return Ok(Vec::new());
        };
        let mut drift = self.firewall.verify_egress(&policy, &specs);
        for spec in specs.iter().filter(|s| s.kind == NetworkKind::L3) {
            drift.extend(routed::way_out_drift(&self.handle, spec).await?);
        }
        if !drift.is_empty() {
            self.render_egress(specs.iter()).await?;
        }
        Ok(drift)
    }

    /// The network's gateway on its bridge, with a MAC every host of a
    /// fabric gives that bridge (an ARP answer from any host is right).
    async fn ensure_gateway(&self, spec: &NetworkSpec, bridge: u32) -> Result<(), DriverError> {
        if self.egress.is_none() {
            return Ok(());
        }
        let Some(gateway) = spec.gateway() else {
            return Ok(());
        };
        dual::bridge_gateway6(&self.handle, spec, bridge).await?;
        let h = crate::naming::fnv1a(&spec.name).to_be_bytes();
        let mac = vec![0x0a, 0x58, h[0], h[1], h[2], h[3]];
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(bridge).address(mac).build())
            .execute()
            .await
            .map_err(nl(format!("set the gateway MAC of network {}", spec.name)))?;
        self.handle
            .address()
            .add(bridge, std::net::IpAddr::V4(gateway), spec.subnet.prefix)
            .replace()
            .execute()
            .await
            .map_err(nl(format!(
                "gateway {gateway}/{} on the bridge of network {}",
                spec.subnet.prefix, spec.name
            )))
    }

    /// Join a fabric: L2 networks get a VXLAN device from `underlay`, ports
    /// an MTU [`nephrite_pipeline::VXLAN_OVERHEAD`] below the network's, and ports of other
    /// hosts are reached over it.
    pub fn set_underlay(&mut self, underlay: Ipv4Addr) {
        self.underlay = Some(underlay);
    }

    /// The network's shared object: its bridge (L2, `Some(ifindex)`) or its
    /// routing table (L3, `None`).
    async fn ensure_network(&self, spec: &NetworkSpec) -> Result<Option<u32>, DriverError> {
        if spec.kind == NetworkKind::L3 {
            routed::ensure_table(&self.handle, spec, self.egress.is_some()).await?;
            self.ensure_routed_overlay(spec).await?;
            return Ok(None);
        }
        let bridge = self.ensure_bridge(spec).await?;
        self.ensure_overlay(spec, bridge).await?;
        Ok(Some(bridge))
    }

    async fn ensure_bridge(&self, spec: &NetworkSpec) -> Result<u32, DriverError> {
        let name = bridge_name(&spec.name);
        if let Some(link) = find_link(&self.handle, &name).await? {
            return Ok(link.index);
        }
        // bridged IPv4 and IPv6 frames pass the ip and ip6 hooks: conntrack
        // sees a Service's replies between pods of one bridge (see
        // [`firewall::services`])
        let msg = LinkBridge::new(&name)
            .nf_call_iptables(true)
            .nf_call_ip6tables(true)
            .up()
            .build();
        self.create_link(msg, || {
            format!("create bridge {name} for network {}", spec.name)
        })
        .await?;
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
        self.set_bridge_port(link.index, bridge, &name, true, false)
            .await
    }

    /// Create a link; one that exists already (a concurrent creation) is fine.
    async fn create_link(
        &self,
        msg: LinkMessage,
        what: impl FnOnce() -> String,
    ) -> Result<(), DriverError> {
        match self.handle.link().add(msg).execute().await {
            Ok(()) => Ok(()),
            Err(e) if routed::is_exists(&e) => Ok(()),
            Err(e) => Err(nl(what())(e)),
        }
    }

    /// Delete a neighbour or FDB entry; one that is gone already is fine.
    async fn delete_neighbour(
        &self,
        msg: netlink_packet_route::neighbour::NeighbourMessage,
        what: impl FnOnce() -> String,
    ) -> Result<(), DriverError> {
        match self.handle.neighbours().del(msg).execute().await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(nl(what())(e)),
        }
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
    /// broadcast only (ARP), and multicast on a dual-stack network
    /// (`multicast`: IPv6 neighbour discovery); the FIB-miss sink (`sink`)
    /// unknown unicast only.
    async fn set_bridge_port(
        &self,
        host_index: u32,
        bridge: u32,
        name: &str,
        sink: bool,
        multicast: bool,
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
            .mcast_flood(multicast && !sink)
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

    pub(crate) async fn reconcile(
        &mut self,
        model: &Model,
    ) -> Result<Vec<(PortId, RenderFacts)>, DriverError> {
        let mut bridges = BTreeMap::new();
        for net in model.networks().values() {
            if let Some(bridge) = self.ensure_network(&net.spec).await? {
                self.ensure_miss_sink(&net.spec, bridge).await?;
                self.ensure_gateway(&net.spec, bridge).await?;
                bridges.insert(net.spec.name.clone(), bridge);
            }
        }
        self.render_egress(model.networks().values().map(|n| &n.spec))
            .await?;
        let mut out = Vec::new();
        for port in model.ports().values().filter(|p| !p.is_remote()) {
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
                        self.set_bridge_port(link.index, *bridge, &host, false, dual_stack(spec))
                            .await?;
                    }
                    if spec.kind == NetworkKind::L3 {
                        routed::attach(&self.handle, &host, spec).await?;
                        if self.egress.is_some() {
                            routed::host_gateway(&self.handle, link.index, &host, spec).await?;
                        }
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
                    let facts = self
                        .create_port(port, spec, model.address6(&port.id))
                        .await?;
                    self.firewall.apply_acl(&port.id, &spec.acl)?;
                    self.rendered
                        .insert(port.id.clone(), (port.network.clone(), facts.mac));
                    out.push((port.id.clone(), facts));
                }
                None => {
                    tracing::warn!(port = %port.id, netns = %port.netns, "veth and netns gone; GC or DEL will free the port")
                }
            }
        }
        let refs = self.desired_fdb(model);
        for (mac, egress) in refs.keys() {
            if self.is_remote(egress)
                || model
                    .port(egress)
                    .is_some_and(|p| !p.is_remote() && Path::new(&p.netns).exists())
            {
                self.fdb(*mac, egress, true).await?;
            }
        }
        self.fdb_refs = refs;
        let routes = self.desired_routes(model);
        for (ip, egress) in routes.keys() {
            match self.route(*ip, egress, true).await {
                Err(missing @ DriverError::EgressMissing { .. }) => {
                    tracing::warn!(error = %missing, "FIB entry towards a dead port skipped");
                }
                other => other?,
            }
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
            if let Some(bridge) = self.ensure_network(spec).await? {
                self.ensure_gateway(spec, bridge).await?;
            }
        }
        let networks_moved = !plan.networks_added.is_empty()
            || !plan.networks_changed.is_empty()
            || !plan.networks_removed.is_empty();
        if networks_moved {
            self.render_egress(networks.values()).await?;
        }
        let mut facts = Vec::new();
        for port in &plan.ports_added {
            let spec = networks.get(&port.network).ok_or_else(|| {
                DriverError::State(format!(
                    "port {} names unknown network {}",
                    port.id, port.network
                ))
            })?;
            if port.is_remote() {
                self.add_remote(port, spec).await?;
                continue;
            }
            let rendered = self
                .create_port(port, spec, plan.addresses6.get(&port.id).copied())
                .await?;
            self.rendered
                .insert(port.id.clone(), (port.network.clone(), rendered.mac));
            self.gateway_fdb(rendered.mac, &port.id, spec).await?;
            self.gateway_route(port.address.addr, &port.id, spec)
                .await?;
            facts.push((port.id.clone(), rendered));
        }
        let local: Vec<_> = plan
            .acl_changed
            .iter()
            .filter(|c| !self.is_remote(&c.port))
            .collect();
        for change in local {
            let host = host_veth_name(&change.port);
            match find_link(&self.handle, &host).await? {
                Some(_) => self.firewall.apply_acl(&change.port, &change.rules)?,
                // its netns went away behind our back: `verify` reports it, GC frees it
                None => {
                    tracing::warn!(port = %change.port, "ACL not rendered: veth {host} is missing")
                }
            }
        }
        self.apply_fib(plan).await?;
        for port in &plan.ports_removed {
            if port.is_remote() {
                self.remove_remote(port).await?;
                continue;
            }
            let host = host_veth_name(&port.id);
            self.firewall.remove_acl(&port.id)?;
            self.delete_link(&host).await?;
            // the gateway's entries went with the veth
            self.fdb_refs.retain(|(_, egress), _| egress != &port.id);
            self.route_refs.retain(|(_, egress), _| egress != &port.id);
            let routed = networks
                .get(&port.network)
                .is_some_and(|n| n.kind == NetworkKind::L3);
            if routed {
                routed::detach(&self.handle, &host, &port.network).await?;
            }
            self.rendered.remove(&port.id);
        }
        for spec in &plan.networks_removed {
            let vxlan = vxlan_name(&spec.name);
            if spec.kind == NetworkKind::L3 {
                routed::detach(&self.handle, &vxlan, &spec.name).await?;
                if self.egress.is_some() {
                    routed::close_table(&self.handle, spec).await?;
                }
            }
            self.delete_link(&vxlan).await?;
            self.delete_link(&bridge_name(&spec.name)).await?;
            self.delete_link(&miss_sink_name(&spec.name)).await?;
        }
        Ok(facts)
    }

    pub(crate) async fn discard_port(&mut self, port: &Port) {
        if port.is_remote() {
            return;
        }
        if let Err(e) = self.firewall.remove_acl(&port.id) {
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
}

/// True when the network's pods have IPv6 addresses too.
fn dual_stack(spec: &NetworkSpec) -> bool {
    spec.subnet6.is_some()
}

/// Turn IPv4 forwarding on: pods reach beyond their networks through the host.
///
/// # Errors
/// The sysctl cannot be written.
fn enable_forwarding() -> Result<(), DriverError> {
    const PATH: &str = "/proc/sys/net/ipv4/ip_forward";
    std::fs::write(PATH, b"1").map_err(|source| DriverError::Os {
        what: format!("write 1 to {PATH}"),
        source,
    })
}
