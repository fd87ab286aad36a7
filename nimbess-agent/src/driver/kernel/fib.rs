//! FIB entries in the kernel: static FDB entries (L2), routes with
//! permanent neighbours (L3), reference-counted across the switch and
//! router copies that hold them. An entry whose egress is a port of another
//! host goes to the network's VXLAN device ([`super::overlay`]).

use std::collections::BTreeMap;

use nephrite_pipeline::{FibKey, Mac, Model, PortId, RenderPlan, fib_entries};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::neighbour::{NeighbourAttribute, NeighbourMessage, NeighbourState};

use super::{KernelDriver, find_link, nl, routed};
use crate::driver::DriverError;
use crate::naming::host_veth_name;

/// Count one more holder of `key`; true when it is the first (the kernel
/// object must be created).
pub(super) fn take<K: Ord>(refs: &mut BTreeMap<K, usize>, key: K) -> bool {
    let n = refs.entry(key).or_default();
    *n += 1;
    *n == 1
}

/// Count one holder of `key` less; true when none is left (the kernel
/// object must go). A key nobody held counts as gone.
pub(super) fn drop_ref<K: Ord>(refs: &mut BTreeMap<K, usize>, key: K) -> bool {
    match refs.get_mut(&key) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        _ => {
            refs.remove(&key);
            true
        }
    }
}

impl KernelDriver {
    /// Install what a plan adds to the FIBs and withdraw what it removes,
    /// each kernel entry once however many copies hold it. An entry towards
    /// a port the plan does not create, whose veth is gone (its netns
    /// vanished and the agent has not freed it yet), is skipped: another
    /// port's death never fails this change.
    pub(super) async fn apply_fib(&mut self, plan: &RenderPlan) -> Result<(), DriverError> {
        for e in &plan.fib_added {
            let installed = match e.key {
                FibKey::Ip(ip) if take(&mut self.route_refs, (ip, e.egress_port.clone())) => {
                    self.route(ip, &e.egress_port, true).await
                }
                FibKey::Mac(mac) if take(&mut self.fdb_refs, (mac, e.egress_port.clone())) => {
                    self.fdb(mac, &e.egress_port, true).await
                }
                _ => Ok(()),
            };
            let created_here = plan.ports_added.iter().any(|p| p.id == e.egress_port);
            match installed {
                Err(missing @ DriverError::EgressMissing { .. }) if !created_here => {
                    tracing::warn!(error = %missing, "FIB entry towards a dead port skipped");
                }
                other => other?,
            }
        }
        for e in &plan.fib_removed {
            match e.key {
                FibKey::Ip(ip) if drop_ref(&mut self.route_refs, (ip, e.egress_port.clone())) => {
                    self.route(ip, &e.egress_port, false).await?;
                }
                FibKey::Mac(mac) if drop_ref(&mut self.fdb_refs, (mac, e.egress_port.clone())) => {
                    self.fdb(mac, &e.egress_port, false).await?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) async fn fdb(
        &self,
        mac: Mac,
        egress_port: &str,
        add: bool,
    ) -> Result<(), DriverError> {
        if let Some(remote) = self.remote_of(egress_port) {
            return self.remote_fdb(mac, remote, add).await;
        }
        let host = host_veth_name(egress_port);
        let Some(link) = find_link(&self.handle, &host).await? else {
            return if add {
                Err(DriverError::EgressMissing {
                    entry: mac.to_string(),
                    veth: host,
                    port: egress_port.to_string(),
                })
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
            self.delete_neighbour(msg, || format!("remove FDB entry {mac} on {host}"))
                .await
        }
    }

    /// Install or withdraw a router FIB entry: `ip` behind `egress_port`'s veth.
    pub(super) async fn route(
        &self,
        ip: std::net::Ipv4Addr,
        egress_port: &str,
        add: bool,
    ) -> Result<(), DriverError> {
        if let Some(remote) = self.remote_of(egress_port) {
            return self.remote_route(ip, remote, add).await;
        }
        let host = host_veth_name(egress_port);
        let (Some(link), Some((network, mac))) = (
            find_link(&self.handle, &host).await?,
            self.rendered.get(egress_port),
        ) else {
            return if add {
                Err(DriverError::EgressMissing {
                    entry: ip.to_string(),
                    veth: host,
                    port: egress_port.to_string(),
                })
            } else {
                Ok(())
            };
        };
        routed::fib(&self.handle, network, ip, Some(*mac), link.index, add).await
    }

    /// The routes the model asks for, with how many holders each has: the
    /// router copies holding it, plus the host's gateway for every local
    /// port of an L3 network when pods have a way out (the host and the
    /// outside's replies reach a pod through its network's table, even a
    /// pod alone on its network).
    pub(super) fn desired_routes(
        &self,
        model: &Model,
    ) -> BTreeMap<(std::net::Ipv4Addr, PortId), usize> {
        let mut refs = BTreeMap::new();
        for e in fib_entries(&model.rendered().modules) {
            if let FibKey::Ip(ip) = e.key {
                *refs.entry((ip, e.egress_port)).or_default() += 1;
            }
        }
        for port in model.ports().values().filter(|p| !p.is_remote()) {
            let routed_way_out = model
                .networks()
                .get(&port.network)
                .is_some_and(|n| self.routed_gateway(&n.spec));
            if routed_way_out {
                *refs
                    .entry((port.address.addr, port.id.clone()))
                    .or_default() += 1;
            }
        }
        refs
    }

    /// The gateway's route towards a new local port (see [`Self::desired_routes`]).
    pub(super) async fn gateway_route(
        &mut self,
        ip: std::net::Ipv4Addr,
        port: &PortId,
        spec: &nephrite_pipeline::NetworkSpec,
    ) -> Result<(), DriverError> {
        if self.routed_gateway(spec) && take(&mut self.route_refs, (ip, port.clone())) {
            self.route(ip, port, true).await?;
        }
        Ok(())
    }

    /// The static FDB entries the model asks for, with how many holders
    /// each has: the switch copies holding it, plus the host's gateway for
    /// every local port of an L2 network when pods have a way out (the
    /// bridge must know where to send its answers to a pod).
    pub(super) fn desired_fdb(&self, model: &Model) -> BTreeMap<(Mac, PortId), usize> {
        let mut refs = BTreeMap::new();
        for e in fib_entries(&model.rendered().modules) {
            if let FibKey::Mac(mac) = e.key {
                *refs.entry((mac, e.egress_port)).or_default() += 1;
            }
        }
        for port in model.ports().values().filter(|p| !p.is_remote()) {
            let routed_default = model
                .networks()
                .get(&port.network)
                .is_some_and(|n| self.bridge_gateway(&n.spec));
            if let (true, Some(mac)) = (routed_default, port.mac()) {
                *refs.entry((mac, port.id.clone())).or_default() += 1;
            }
        }
        refs
    }

    /// The gateway's FDB entry towards a new local port (see [`Self::desired_fdb`]).
    pub(super) async fn gateway_fdb(
        &mut self,
        mac: Mac,
        port: &PortId,
        spec: &nephrite_pipeline::NetworkSpec,
    ) -> Result<(), DriverError> {
        if self.bridge_gateway(spec) && take(&mut self.fdb_refs, (mac, port.clone())) {
            self.fdb(mac, port, true).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
