//! The agent as one host of the fabric: addresses claimed by
//! compare-and-swap in the store, its ports published, and the other hosts'
//! ports followed (watch) and rendered as remote ports.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use nephrite_pipeline::{
    Ipv4Cidr, Ipv6Cidr, NetworkSpec, Owner, Port, PortId, RemoteHost, RenderPlan, same_remote_port,
};
use tokio::sync::Mutex;

use super::{Agent, AgentError, AgentState};
use crate::cni::{CniError, ErrorCode};
use crate::driver::Driver;
use crate::fabric::etcd::EtcdError;
use crate::fabric::{Claimed, Fabric, FabricView, Renewal};
use crate::state::StateStore;

/// The networks an agent serves ([`nephrite_pipeline::effective_networks`]),
/// logging each the fabric declares differently.
pub(super) fn effective_networks(
    configured: &[NetworkSpec],
    view: &FabricView,
) -> Vec<NetworkSpec> {
    let effective = nephrite_pipeline::effective_networks(configured, &view.networks);
    for network in &effective.overridden {
        tracing::warn!(%network, "the fabric declares this network differently; this host's config wins here");
    }
    effective.networks
}

impl Agent {
    /// Start as a host of `fabric`: publish the configured networks, read
    /// the fabric, load local state, reconcile the data plane, render the
    /// other hosts' ports and publish this host's. Returns the agent and
    /// the store revision to follow from ([`Agent::follow_fabric`]).
    ///
    /// # Errors
    /// As [`Agent::start`], or the store failed.
    pub async fn start_in_fabric(
        store: StateStore,
        networks: &[NetworkSpec],
        driver: Driver,
        fabric: Fabric,
    ) -> Result<(Self, i64), AgentError> {
        fabric.publish_networks(networks).await?;
        let (view, revision) = fabric.read().await?;
        let effective = effective_networks(networks, &view);
        let mut st = AgentState::load(
            store,
            networks,
            &effective,
            driver,
            Some(fabric.clone()),
            view,
        )
        .await?;
        st.converge().await;
        st.sweep().await;
        st.publish_own(&fabric).await?;
        st.persist()?;
        Ok((
            Agent {
                state: Mutex::new(st),
            },
            revision,
        ))
    }

    /// Follow the fabric from `revision`: apply every change (other hosts'
    /// ports, addresses, networks); when the watch breaks, read the whole
    /// fabric again and converge. Runs until the process ends.
    pub async fn follow_fabric(self: Arc<Self>, mut revision: i64) {
        let Some(fabric) = self.state.lock().await.fabric.clone() else {
            return;
        };
        loop {
            match fabric.watch(revision).await {
                Ok(mut changes) => {
                    while let Some(item) = changes.recv().await {
                        match item {
                            Ok((batch, rev)) => {
                                revision = revision.max(rev);
                                let mut st = self.state.lock().await;
                                for change in &batch {
                                    st.view.apply(change);
                                }
                                st.converge().await;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "fabric watch broke; reading the fabric again");
                                break;
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "fabric watch refused"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            match fabric.read().await {
                Ok((view, rev)) => {
                    revision = rev;
                    let mut st = self.state.lock().await;
                    st.view = view;
                    st.converge().await;
                    st.sweep().await;
                    if let Err(e) = st.publish_own(&fabric).await {
                        tracing::warn!(error = %e, "could not publish this host's ports");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "fabric unreachable; retrying"),
            }
        }
    }

    /// Keep this host alive in the fabric: renew its lease every third of
    /// the TTL; when it had expired (the store was out of reach for longer
    /// than the TTL and the other hosts dropped this host's ports), publish
    /// the ports again under the new lease. Runs until the process ends.
    pub async fn keep_alive_in_fabric(self: Arc<Self>) {
        let Some(fabric) = self.state.lock().await.fabric.clone() else {
            return;
        };
        let period = Duration::from_millis(fabric.lease_ttl().max(1).unsigned_abs() * 1000 / 3);
        loop {
            tokio::time::sleep(period).await;
            match fabric.renew().await {
                Ok(Renewal::Alive) => {}
                Ok(Renewal::Regranted) => {
                    tracing::warn!("the lease had expired: publishing this host's ports again");
                    let mut st = self.state.lock().await;
                    if let Err(e) = st.publish_own(&fabric).await {
                        tracing::warn!(error = %e, "could not publish this host's ports");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "fabric lease not renewed"),
            }
        }
    }
}

impl AgentState {
    /// Give `owner` an address on `network`: the pool's lowest free one,
    /// claimed in the fabric's store by compare-and-swap when there is one
    /// (an address another host took meanwhile is noted and the next one tried).
    pub(super) async fn allocate(
        &mut self,
        network: &str,
        owner: &Owner,
    ) -> Result<Ipv4Cidr, CniError> {
        loop {
            let candidate = self.ipam.allocate(network, owner).map_err(|e| CniError {
                code: ErrorCode::TryAgainLater,
                msg: format!("no address on network {network}"),
                details: e.to_string(),
            })?;
            let Some(fabric) = &self.fabric else {
                return Ok(candidate);
            };
            let taken = match fabric.claim(network, candidate.addr, owner).await {
                Ok(Claimed::Ours) => return Ok(candidate),
                Ok(Claimed::Taken(record)) => record,
                Err(e) => {
                    self.ipam.release(network, owner);
                    return Err(CniError {
                        code: ErrorCode::TryAgainLater,
                        msg: "the fabric's store is unreachable".into(),
                        details: e.to_string(),
                    });
                }
            };
            self.ipam.release(network, owner);
            if taken.owner() == *owner {
                return Err(CniError::new(
                    ErrorCode::InvalidConfig,
                    format!(
                        "container {} interface {} holds {} on host {}",
                        owner.container_id, owner.ifname, candidate.addr, taken.host
                    ),
                ));
            }
            if let Err(e) = self.ipam.hold(network, candidate.addr, &taken.owner()) {
                return Err(CniError {
                    code: ErrorCode::TryAgainLater,
                    msg: format!("address {} of {network} is contended", candidate.addr),
                    details: e.to_string(),
                });
            }
            self.view
                .addresses
                .insert((network.to_string(), candidate.addr), taken);
        }
    }

    /// Give `owner` its IPv6 address on a dual-stack `network` (`None` on
    /// another): the pool's lowest free one on a single host; inside a
    /// fabric the one whose host number is that of its IPv4 address `v4`,
    /// which the fabric's store made unique across hosts.
    pub(super) async fn allocate6(
        &mut self,
        network: &str,
        owner: &Owner,
        v4: Ipv4Cidr,
    ) -> Result<Option<Ipv6Cidr>, CniError> {
        let Some(pool) = self.ipam.pool6(network) else {
            return Ok(None);
        };
        let failed = |e: nephrite_pipeline::Error| CniError {
            code: ErrorCode::TryAgainLater,
            msg: format!("no IPv6 address on network {network}"),
            details: e.to_string(),
        };
        if self.fabric.is_none() {
            return self
                .ipam
                .allocate6(network, owner)
                .map(Some)
                .map_err(failed);
        }
        let (subnet6, pool4) = (pool.subnet, self.ipam.pool(network).map(|p| p.subnet));
        let mirrored = pool4
            .and_then(|s4| nephrite_pipeline::mirror_v6(s4, v4.addr, subnet6))
            .ok_or_else(|| {
                CniError::new(
                    ErrorCode::InvalidConfig,
                    format!(
                        "network {network}: IPv6 subnet {subnet6} is smaller than the IPv4 one: \
                         inside a fabric each IPv4 host number needs its IPv6 twin"
                    ),
                )
            })?;
        self.ipam.hold6(network, mirrored, owner).map_err(failed)?;
        Ok(self.ipam.held_by6(network, owner))
    }

    /// Release what `owner` holds on `network`, here and in the fabric.
    pub(super) async fn release(&mut self, network: &str, owner: &Owner) {
        let Some(address) = self.ipam.release(network, owner) else {
            return;
        };
        if let Some(fabric) = &self.fabric
            && let Err(e) = fabric.release(network, address, owner).await
        {
            tracing::warn!(network, %address, error = %e, "address not released in the fabric; the next start releases it");
        }
    }

    /// Publish a port of this host (nothing without a fabric).
    pub(super) async fn publish(&self, id: &str) -> Result<(), EtcdError> {
        match (&self.fabric, self.model.port(id)) {
            (Some(fabric), Some(port)) => fabric.publish_port(port).await,
            _ => Ok(()),
        }
    }

    /// Withdraw a deleted port of this host and the addresses it freed.
    pub(super) async fn withdraw(&self, id: &str, owner: &Owner, freed: &[(String, Ipv4Addr)]) {
        let Some(fabric) = &self.fabric else {
            return;
        };
        if let Err(e) = fabric.withdraw_port(id).await {
            tracing::warn!(port = id, error = %e, "port not withdrawn from the fabric; the next start withdraws it");
        }
        for (network, address) in freed {
            if let Err(e) = fabric.release(network, *address, owner).await {
                tracing::warn!(network, %address, error = %e, "address not released in the fabric");
            }
        }
    }

    /// Owners other hosts hold addresses of `network` for.
    pub(super) fn remote_owners(&self, network: &str) -> BTreeSet<Owner> {
        let me = self.fabric.as_ref().map(Fabric::host);
        self.view
            .addresses
            .iter()
            .filter(|((n, _), r)| n == network && Some(r.host.as_str()) != me)
            .map(|(_, r)| r.owner())
            .collect()
    }

    /// Make the fabric hold exactly this host's ports and addresses:
    /// publish the local ones (claiming their addresses), withdraw what this
    /// host published and no longer has.
    async fn publish_own(&mut self, fabric: &Fabric) -> Result<(), EtcdError> {
        let me = fabric.host().to_string();
        let local: Vec<Port> = self
            .model
            .ports()
            .values()
            .filter(|p| !p.is_remote())
            .cloned()
            .collect();
        for port in &local {
            let owner = Owner {
                container_id: port.container_id.clone(),
                ifname: port.ifname.clone(),
            };
            if let Claimed::Taken(r) = fabric
                .claim(&port.network, port.address.addr, &owner)
                .await?
            {
                tracing::error!(port = %port.id, address = %port.address, holder = ?r, "address held by another host too");
            }
            fabric.publish_port(port).await?;
        }
        let stale_ports: Vec<PortId> = self
            .view
            .ports
            .keys()
            .filter(|(h, id)| *h == me && !local.iter().any(|p| &p.id == id))
            .map(|(_, id)| id.clone())
            .collect();
        for id in stale_ports {
            fabric.withdraw_port(&id).await?;
        }
        let stale_addresses: Vec<(String, Ipv4Addr, Owner)> = self
            .view
            .addresses
            .iter()
            .filter(|((net, addr), r)| {
                r.host == me
                    && !local
                        .iter()
                        .any(|p| &p.network == net && p.address.addr == *addr)
            })
            .map(|((net, addr), r)| (net.clone(), *addr, r.owner()))
            .collect();
        for (network, address, owner) in stale_addresses {
            fabric.release(&network, address, &owner).await?;
        }
        Ok(())
    }

    /// Bring the model in line with the fabric's view: networks, the other
    /// hosts' ports (remote ports: an egress and FIB entries here) and the
    /// addresses they hold. Failures are logged; the next change retries.
    pub(super) async fn converge(&mut self) {
        let Some(me) = self.fabric.as_ref().map(|f| f.host().to_string()) else {
            return;
        };
        let effective = effective_networks(&self.configured, &self.view);
        let current: Vec<NetworkSpec> = self.specs().into_values().collect();
        if effective != current
            && let Err(e) = self.apply_networks(&effective).await
        {
            tracing::warn!(error = %e, "fabric networks not applied");
        }

        let desired: BTreeMap<PortId, Port> = self
            .view
            .ports
            .iter()
            .filter(|((host, _), r)| {
                *host != me && self.model.networks().contains_key(&r.port.network)
            })
            .map(|((host, id), r)| {
                let mut port = r.port.clone();
                port.remote = Some(RemoteHost {
                    host: host.clone(),
                    underlay: r.underlay,
                });
                (id.clone(), port)
            })
            .collect();
        let gone: Vec<PortId> = self
            .model
            .ports()
            .values()
            .filter(|p| p.is_remote() && desired.get(&p.id).is_none_or(|d| !same_remote_port(d, p)))
            .map(|p| p.id.clone())
            .collect();
        for id in gone {
            let plan = self.model.remove_port(&id);
            self.render(plan, &id).await;
        }
        for (id, mut port) in desired {
            if let Some(existing) = self.model.port(&id) {
                if !existing.is_remote() {
                    tracing::error!(port = %id, "another host publishes a port this host has");
                }
                continue;
            }
            port.slot = self.model.free_slot(&port.network);
            let plan = self.model.insert_port(port);
            self.render(plan, &id).await;
        }

        let local: BTreeSet<(String, Owner)> = self
            .model
            .ports()
            .values()
            .filter(|p| !p.is_remote())
            .map(|p| {
                let owner = Owner {
                    container_id: p.container_id.clone(),
                    ifname: p.ifname.clone(),
                };
                (p.network.clone(), owner)
            })
            .collect();
        for ((network, address), r) in &self.view.addresses {
            if r.host != me
                && self.ipam.pool(network).is_some()
                && let Err(e) = self.ipam.hold(network, *address, &r.owner())
            {
                tracing::warn!(network, %address, error = %e, "fabric address not recorded");
            }
        }
        let stale: Vec<(String, Owner)> = self
            .ipam
            .pools()
            .iter()
            .flat_map(|(network, pool)| {
                pool.held.iter().filter_map(|(address, owner)| {
                    let key = (network.clone(), owner.clone());
                    let remote = self
                        .view
                        .addresses
                        .get(&(network.clone(), *address))
                        .is_some_and(|r| r.host != me);
                    (!local.contains(&key) && !remote).then_some(key)
                })
            })
            .collect();
        for (network, owner) in stale {
            self.ipam.release(&network, &owner);
        }
    }

    /// Remove the data-plane entries of remote ports that vanished while
    /// the fabric was not followed (logged; the next full read retries).
    async fn sweep(&mut self) {
        match self.driver.sweep(&self.model).await {
            Ok(swept) => {
                for entry in swept {
                    tracing::info!(%entry, "swept");
                }
            }
            Err(e) => tracing::warn!(error = %e, "overlay leftovers not swept"),
        }
    }

    /// Hand a plan for a remote port to the driver, logging failures.
    async fn render(&mut self, plan: Result<RenderPlan, nephrite_pipeline::Error>, port: &str) {
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => {
                tracing::warn!(port, error = %e, "remote port not taken into the model");
                return;
            }
        };
        self.announce_owners();
        let specs = self.specs();
        if let Err(e) = self.driver.apply(&plan, &specs).await {
            tracing::warn!(port, error = %e, "remote port not rendered");
        }
    }
}
