//! A pod's port: the veth pair whose container end is moved into the pod's
//! namespace, addressed and routed there; and CNI CHECK of it.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use futures::TryStreamExt as _;
use nephrite_pipeline::{Ipv6Cidr, NetworkKind, NetworkSpec, Port, RenderFacts};
use netlink_packet_route::link::{InfoData, InfoVeth};
use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder};

use super::netns::in_netns;
use super::{KernelDriver, dual, find_link, nl, no_ipv6_autoconf, routed};
use crate::driver::DriverError;
use crate::naming::{bridge_name, host_veth_name};

impl KernelDriver {
    pub(super) async fn create_port(
        &self,
        port: &Port,
        spec: &NetworkSpec,
        address6: Option<Ipv6Cidr>,
    ) -> Result<RenderFacts, DriverError> {
        let bridge = self.ensure_network(spec).await?;
        let host = host_veth_name(&port.id);
        // A leftover of an ADD that crashed half-way is ours to replace.
        self.delete_link(&host).await?;
        let netns = std::fs::File::open(&port.netns).map_err(|source| DriverError::Os {
            what: format!("open netns {}", port.netns),
            source,
        })?;
        let mtu = self.port_mtu(spec);
        let mut peer = rtnetlink::LinkMessageBuilder::<LinkUnspec>::new()
            .name(port.ifname.clone())
            .mtu(mtu);
        // A reserved VIF's MAC is the pod interface's from its creation on: the FDB entries,
        // neighbour entries and facts below all take it from the interface.
        if let Some(mac) = port.requested_mac {
            peer = peer.address(mac.0.to_vec());
        }
        let peer = peer
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
                self.set_bridge_port(link.index, bridge, &host, false, super::dual_stack(spec))
                    .await?
            }
            None => {
                routed::attach(&self.handle, &host, spec).await?;
                if self.egress.is_some() {
                    routed::host_gateway(&self.handle, link.index, &host, spec).await?;
                }
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
        let requested_mac = port.requested_mac;
        let default_gateway = spec.gateway().filter(|_| self.routes_default(spec));
        let routed_default = default_gateway.is_some();
        let default_gateway6 = spec.gateway6().filter(|_| self.routes_default(spec));
        let mac = in_netns(
            Path::new(&port.netns),
            Box::new(move |h: Handle| {
                Box::pin(async move {
                    let inner = find_link(&h, &ifname).await?.ok_or_else(|| {
                        DriverError::State(format!("{ifname} missing in the pod"))
                    })?;
                    no_ipv6_autoconf(&h, inner.index).await;
                    if let Some(spec) = &routed_spec {
                        routed::configure_pod(
                            &h,
                            inner.index,
                            &ifname,
                            address,
                            spec,
                            host_mac,
                            routed_default,
                        )
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
                        if let Some(gateway) = default_gateway {
                            let default = RouteMessageBuilder::<Ipv4Addr>::new()
                                .gateway(gateway)
                                .output_interface(inner.index)
                                .build();
                            h.route()
                                .add(default)
                                .replace()
                                .execute()
                                .await
                                .map_err(nl(format!("default route via {gateway} on {ifname}")))?;
                        }
                        if let Some(address6) = address6 {
                            dual::configure_pod(
                                &h,
                                inner.index,
                                &ifname,
                                address6,
                                default_gateway6,
                            )
                            .await?;
                        }
                    }
                    if let Some(lo) = find_link(&h, "lo").await? {
                        h.link()
                            .set(LinkUnspec::new_with_index(lo.index).up().build())
                            .execute()
                            .await
                            .map_err(nl("set lo up"))?;
                    }
                    let mac = inner
                        .mac
                        .ok_or_else(|| DriverError::State(format!("{ifname} has no MAC")))?;
                    match requested_mac {
                        Some(wanted) if wanted != mac => Err(DriverError::State(format!(
                            "{ifname} was created with MAC {wanted} but carries {mac}"
                        ))),
                        _ => Ok(mac),
                    }
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

    /// CNI CHECK: the veth exists, the pod's interface carries the MAC it
    /// was created with, its address and, on a dual-stack network, its
    /// IPv6 address `address6`.
    pub(crate) async fn check(
        &self,
        port: &Port,
        address6: Option<Ipv6Cidr>,
    ) -> Result<(), DriverError> {
        let host = host_veth_name(&port.id);
        if find_link(&self.handle, &host).await?.is_none() {
            return Err(DriverError::State(format!(
                "veth {host} of {} is missing",
                port.id
            )));
        }
        let ifname = port.ifname.clone();
        let address = port.address;
        let requested_mac = port.requested_mac;
        in_netns(
            Path::new(&port.netns),
            Box::new(move |h: Handle| {
                Box::pin(async move {
                    let inner = find_link(&h, &ifname).await?.ok_or_else(|| {
                        DriverError::State(format!("{ifname} is missing in the pod"))
                    })?;
                    if let Some(wanted) = requested_mac
                        && inner.mac != Some(wanted)
                    {
                        return Err(DriverError::State(format!(
                            "{ifname} carries MAC {} instead of {wanted}",
                            inner
                                .mac
                                .map_or_else(|| "none".to_string(), |m| m.to_string())
                        )));
                    }
                    let mut addrs = h
                        .address()
                        .get()
                        .set_link_index_filter(inner.index)
                        .execute();
                    let mut held = Vec::new();
                    while let Some(msg) = addrs
                        .try_next()
                        .await
                        .map_err(nl(format!("addresses of {ifname}")))?
                    {
                        for a in &msg.attributes {
                            if let netlink_packet_route::address::AddressAttribute::Address(ip) = a
                            {
                                held.push((*ip, msg.header.prefix_len));
                            }
                        }
                    }
                    let wanted = std::iter::once((
                        IpAddr::V4(address.addr),
                        address.prefix,
                        address.to_string(),
                    ))
                    .chain(address6.map(|a| (IpAddr::V6(a.addr), a.prefix, a.to_string())));
                    for (ip, prefix, text) in wanted {
                        if !held.contains(&(ip, prefix)) {
                            return Err(DriverError::State(format!(
                                "{ifname} does not hold {text}"
                            )));
                        }
                    }
                    Ok(())
                })
            }),
        )
        .await
    }
}

#[cfg(test)]
mod tests;
