//! Reading the kernel back: `verify` (drift between the model and the
//! kernel, named) and the object and counters of every module instance.

use std::collections::{BTreeMap, BTreeSet};

use futures::TryStreamExt as _;
use nephrite_pipeline::{Mac, Model, ModuleId, ModuleKind, NetworkKind, PortId};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourState};

use super::{KernelDriver, find_link, nl, routed};
use crate::driver::firewall::Firewall as _;
use crate::driver::{DriverError, ModuleObject};
use crate::naming::{bridge_name, host_veth_name, miss_sink_name, vxlan_name};

impl KernelDriver {
    async fn fdb_dump(&self) -> Result<BTreeSet<(Mac, u32, bool)>, DriverError> {
        let mut out = BTreeSet::new();
        let mut entries = self
            .handle
            .neighbours()
            .get()
            .set_address_family(AddressFamily::Bridge)
            .execute();
        while let Some(msg) = entries.try_next().await.map_err(nl("dump the FDB"))? {
            let mac = msg.attributes.iter().find_map(|a| match a {
                NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
                    let mut m = [0u8; 6];
                    m.copy_from_slice(l);
                    Some(Mac(m))
                }
                _ => None,
            });
            if let Some(mac) = mac {
                let is_static = msg.header.state == NeighbourState::Noarp;
                out.insert((mac, msg.header.ifindex, is_static));
            }
        }
        Ok(out)
    }

    pub(crate) async fn verify(&mut self, model: &Model) -> Result<Vec<String>, DriverError> {
        let mut drift = Vec::new();
        let mut bridges = BTreeMap::new();
        for net in model.networks().values() {
            if net.spec.kind == NetworkKind::L3 {
                continue;
            }
            let sink = miss_sink_name(&net.spec.name);
            if find_link(&self.handle, &sink).await?.is_none() {
                drift.push(format!(
                    "network {}: FIB-miss sink {sink} is missing",
                    net.spec.name
                ));
            }
            let name = bridge_name(&net.spec.name);
            match find_link(&self.handle, &name).await? {
                Some(l) => {
                    bridges.insert(net.spec.name.clone(), l.index);
                }
                None => drift.push(format!(
                    "network {}: bridge {name} is missing",
                    net.spec.name
                )),
            }
        }
        let mut veths: BTreeMap<PortId, u32> = BTreeMap::new();
        for port in model.ports().values().filter(|p| !p.is_remote()) {
            let host = host_veth_name(&port.id);
            match find_link(&self.handle, &host).await? {
                None => drift.push(format!("port {}: veth {host} is missing", port.id)),
                Some(l) => {
                    let routed = model
                        .networks()
                        .get(&port.network)
                        .is_some_and(|n| n.spec.kind == NetworkKind::L3);
                    if routed {
                        if !routed::has_rule(&self.handle, &host, &port.network).await? {
                            drift.push(format!(
                                "port {}: rule iif {host} lookup table {} is missing",
                                port.id,
                                routed::route_table(&port.network)
                            ));
                        }
                    } else if l.controller != bridges.get(&port.network).copied() {
                        drift.push(format!(
                            "port {}: veth {host} is not on bridge {}",
                            port.id,
                            bridge_name(&port.network)
                        ));
                    }
                    let want = model
                        .networks()
                        .get(&port.network)
                        .map_or(&[][..], |n| &n.spec.acl[..]);
                    drift.extend(self.firewall.verify_acl(&port.id, want)?);
                    veths.insert(port.id.clone(), l.index);
                }
            }
        }
        let fdb = self.fdb_dump().await?;
        let desired = self.desired_fdb(model);
        let mut wanted = BTreeSet::new();
        for (mac, egress) in desired.keys() {
            let Some(index) = veths.get(egress) else {
                continue;
            };
            wanted.insert((*mac, *index));
            if !fdb.contains(&(*mac, *index, true)) {
                drift.push(format!(
                    "FIB entry {mac} -> {egress}: static FDB entry on {} is missing",
                    host_veth_name(egress)
                ));
            }
        }
        let ours: BTreeSet<u32> = veths.values().copied().collect();
        for (mac, index, is_static) in &fdb {
            if *is_static && ours.contains(index) && !wanted.contains(&(*mac, *index)) {
                drift.push(format!(
                    "FDB entry {mac} on ifindex {index} is in no FIB of the model"
                ));
            }
        }
        // routes to ports of other hosts leave on the network's VXLAN device
        let mut egress = veths.clone();
        for port in model.ports().values().filter(|p| p.is_remote()) {
            if let Some(link) = find_link(&self.handle, &vxlan_name(&port.network)).await? {
                egress.insert(port.id.clone(), link.index);
            }
        }
        drift.extend(
            routed::route_drift(&self.handle, model, &egress, &self.desired_routes(model)).await?,
        );
        // overlay entries of vanished remote ports (their routes are named above)
        drift.extend(
            self.overlay_leftovers(model)
                .await?
                .into_iter()
                .filter(|l| !matches!(l, super::sweep::Leftover::Routed { route: true, .. }))
                .map(|l| l.to_string()),
        );
        drift.extend(
            self.verify_egress(model.networks().values().map(|n| &n.spec))
                .await?,
        );
        Ok(drift)
    }

    pub(crate) async fn objects(&self, model: &Model) -> BTreeMap<ModuleId, ModuleObject> {
        let mut out = BTreeMap::new();
        for m in model.rendered().modules.values() {
            let port = &m.port;
            if let Some(remote) = model.port(port).and_then(|p| p.remote.as_ref()) {
                // rendered by its own host; here only its MAC's FDB entries exist
                let object = match &m.kind {
                    ModuleKind::EgressPort { .. } => format!(
                        "VXLAN {} towards host {} ({})",
                        vxlan_name(&m.network),
                        remote.host,
                        remote.underlay
                    ),
                    _ => format!("on host {}", remote.host),
                };
                out.insert(
                    m.id.clone(),
                    ModuleObject {
                        object,
                        ..Default::default()
                    },
                );
                continue;
            }
            let host = host_veth_name(port);
            let link = find_link(&self.handle, &host).await.ok().flatten();
            let stats = link.clone().unwrap_or_default();
            let (object, packets, dropped) = match &m.kind {
                ModuleKind::IngressPort { .. } => {
                    (format!("veth {host} rx"), stats.rx_packets, stats.dropped)
                }
                ModuleKind::EgressPort { .. } => {
                    (format!("veth {host} tx"), stats.tx_packets, stats.dropped)
                }
                ModuleKind::Acl { rules } => (
                    format!("veth {host} ingress filters ({} rules)", rules.len()),
                    stats.rx_packets,
                    0,
                ),
                ModuleKind::L2Switch { fib } => {
                    // FIB misses are counted per network, by its sink
                    let sink = miss_sink_name(&m.network);
                    let misses = find_link(&self.handle, &sink)
                        .await
                        .ok()
                        .flatten()
                        .map_or(0, |l| l.tx_packets);
                    (
                        format!(
                            "bridge {} port {host}, {} static FDB entries; dropped = FIB misses of the network (TX of {sink})",
                            bridge_name(&m.network),
                            fib.len()
                        ),
                        stats.rx_packets,
                        misses,
                    )
                }
                ModuleKind::L3Router { fib } => (
                    format!(
                        "rule iif {host} lookup table {}, {} routes",
                        routed::route_table(&m.network),
                        fib.len()
                    ),
                    stats.rx_packets,
                    stats.dropped,
                ),
            };
            let object = if link.is_some() {
                object
            } else {
                format!("{object} (missing)")
            };
            out.insert(
                m.id.clone(),
                ModuleObject {
                    object,
                    packets,
                    dropped,
                },
            );
        }
        out
    }
}
