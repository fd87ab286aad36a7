//! The agent's CNI logic, transport-free: validation before side effects,
//! IPAM, the model's render plans handed to the driver, rollback on driver
//! failure, persistence after every change.
//!
//! One lock serializes changes (ADD, DEL, GC, reload): the model, the pools
//! and the data plane move together, and the state file is rewritten before
//! the answer is sent.

use std::collections::BTreeSet;
use std::path::Path;

use nephrite_pipeline::{
    IpCidr, Ipam, Ipv4Cidr, Ipv6Cidr, Model, NetworkSpec, Owner, Port, PortRequest, RenderPlan,
    port_id, port_mtu,
};
use tokio::sync::Mutex;

use crate::cni::{
    CniError, CniRequest, CniResult, ErrorCode, Interface, IpConfig, Route, valid_ifname,
};
use crate::driver::{Driver, DriverError};
use crate::fabric::{Fabric, FabricView};
use crate::state::{PersistedState, Record, StateError, StateStore};

mod fabric;
mod inspect;
mod reap;
mod services;
#[cfg(test)]
mod tests;
mod vifs;

/// Everything behind the lock.
#[derive(Debug)]
pub(crate) struct AgentState {
    /// Networks, pipelines, ports.
    pub(crate) model: Model,
    /// Address pools.
    pub(crate) ipam: Ipam,
    /// The data plane.
    pub(crate) driver: Driver,
    store: StateStore,
    /// The networks of the config file (the fabric may add more).
    configured: Vec<NetworkSpec>,
    /// The fabric this host belongs to (`--store`), and what it has seen of it.
    fabric: Option<Fabric>,
    view: FabricView,
    /// The Services' load-balancer modules the northbound derived (not
    /// persisted: the northbound derives them again after a restart).
    pub(crate) services: std::collections::BTreeMap<
        nephrite_pipeline::LoadBalancerKey,
        nephrite_pipeline::LoadBalancer,
    >,
    /// The Services' IPv6 load-balancer modules (not persisted either).
    pub(crate) services6: crate::driver::Services6,
    /// The NetworkPolicies' ACL modules, by pod address (not persisted either).
    pub(crate) policies: crate::driver::PodPolicies,
    /// The pods' IPv6 NetworkPolicy ACLs (not persisted either).
    pub(crate) policies6: crate::driver::PodPolicies6,
    /// Reserved VIFs ([`crate::vif`]).
    pub(crate) vifs: crate::vif::Vifs,
    /// Every port's address with the pod it belongs to, for the
    /// northbound (see [`Agent::port_owners`]).
    owners: tokio::sync::watch::Sender<Vec<PortOwner>>,
}

/// A port's address and the pod the runtime named for it (`None`: it named none).
pub type PortOwner = (Option<nephrite_pipeline::PodName>, std::net::Ipv4Addr);

/// Why the agent could not start or reload.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// State file trouble.
    #[error(transparent)]
    State(#[from] StateError),
    /// The configured networks do not fit the state.
    #[error("networks: {0}")]
    Model(#[from] nephrite_pipeline::Error),
    /// The driver could not reconcile.
    #[error("driver: {0}")]
    Driver(#[from] DriverError),
    /// The fabric's store failed.
    #[error("fabric: {0}")]
    Fabric(#[from] crate::fabric::etcd::EtcdError),
}

/// The agent.
#[derive(Debug)]
pub struct Agent {
    state: Mutex<AgentState>,
}

fn driver_failure(e: &DriverError) -> CniError {
    CniError {
        code: ErrorCode::DriverFailure,
        msg: "the data plane driver failed; the change was rolled back".into(),
        details: e.to_string(),
    }
}

fn store_failure(e: &StateError) -> CniError {
    CniError {
        code: ErrorCode::DriverFailure,
        msg: "the agent could not persist its state".into(),
        details: e.to_string(),
    }
}

impl Agent {
    /// Load state from `store`, apply the configured networks, reconcile
    /// the data plane (adopting what exists) and persist.
    ///
    /// # Errors
    /// Corrupt state, networks that conflict with existing ports, a driver
    /// that cannot reconcile.
    pub async fn start(
        store: StateStore,
        networks: &[NetworkSpec],
        driver: Driver,
    ) -> Result<Self, AgentError> {
        let mut state = AgentState::load(
            store,
            networks,
            networks,
            driver,
            None,
            FabricView::default(),
        )
        .await?;
        state.persist()?;
        Ok(Agent {
            state: Mutex::new(state),
        })
    }

    /// Lock the state (tests).
    #[cfg(test)]
    pub(crate) async fn lock(&self) -> tokio::sync::MutexGuard<'_, AgentState> {
        self.state.lock().await
    }

    /// Apply a new set of networks (SIGHUP) as one render plan.
    ///
    /// # Errors
    /// The networks conflict with existing ports, or the driver failed (the
    /// old networks stay).
    pub async fn reload(&self, networks: &[NetworkSpec]) -> Result<RenderPlan, AgentError> {
        let mut st = self.state.lock().await;
        if let Some(fabric) = &st.fabric {
            fabric.publish_networks(networks).await?;
        }
        let effective = fabric::effective_networks(networks, &st.view);
        let plan = st.apply_networks(&effective).await?;
        st.configured = networks.to_vec();
        st.persist()?;
        Ok(plan)
    }

    /// CNI ADD.
    pub async fn add(&self, req: &CniRequest) -> Result<CniResult, CniError> {
        if !valid_ifname(&req.ifname) || req.container_id.is_empty() {
            return Err(CniError::new(
                ErrorCode::InvalidEnvironment,
                format!(
                    "invalid container id {:?} or interface name {:?}",
                    req.container_id, req.ifname
                ),
            ));
        }
        if !Path::new(&req.netns).exists() {
            return Err(CniError::new(
                ErrorCode::InvalidEnvironment,
                format!("CNI_NETNS {} does not exist", req.netns),
            ));
        }
        if let Some(own) = crate::driver::kernel::netns::host_namespace_named(Path::new(&req.netns))
        {
            return Err(CniError::new(
                ErrorCode::InvalidEnvironment,
                format!(
                    "CNI_NETNS {} is the agent's or the host's own network namespace ({own}), not a pod's",
                    req.netns
                ),
            ));
        }
        let mut st = self.state.lock().await;
        let Some(spec) = st
            .model
            .networks()
            .get(&req.network)
            .map(|n| n.spec.clone())
        else {
            return Err(unknown_network(&req.network));
        };
        if let Some(existing) = st.model.port_of(&req.container_id, &req.ifname).cloned() {
            if let Some(remote) = &existing.remote {
                return Err(CniError::new(
                    ErrorCode::InvalidConfig,
                    format!(
                        "container {} interface {} is attached on host {}",
                        req.container_id, req.ifname, remote.host
                    ),
                ));
            }
            if existing.network != req.network {
                return Err(CniError::new(
                    ErrorCode::InvalidConfig,
                    format!(
                        "container {} interface {} is already attached to network {}",
                        req.container_id, req.ifname, existing.network
                    ),
                ));
            }
            // A repeat ADD: the stored result holds only while the port is
            // still plugged into the namespace the runtime names now.
            let stale = if existing.netns == req.netns {
                st.driver
                    .check(&existing, st.model.address6(&existing.id))
                    .await
                    .err()
                    .map(|e| e.to_string())
            } else {
                Some(format!("the netns was {}", existing.netns))
            };
            let Some(why) = stale else {
                return Ok(result_of(
                    &existing,
                    st.model.address6(&existing.id),
                    &spec,
                    st.fabric.is_some(),
                    st.driver.routes_default(&spec),
                ));
            };
            tracing::info!(port = %existing.id, netns = %req.netns, why, "repeat ADD: plugging the port again");
            st.delete(&req.container_id, &req.ifname)
                .await
                .map_err(|e| CniError {
                    msg: format!(
                        "container {} interface {} is plugged into {} and could not be unplugged to plug it into {}",
                        req.container_id, req.ifname, existing.netns, req.netns
                    ),
                    ..e
                })?;
        }
        st.reap(Some(&req.network)).await;
        let owner = Owner {
            container_id: req.container_id.clone(),
            ifname: req.ifname.clone(),
        };
        // A VIF's address is held by the VIF, not by the port: rollback and DEL leave it. Its
        // interface carries the MAC the VIF reserved (and the record names); a plain ADD's MAC
        // is the data plane's choice.
        let (address, mac) = match &req.vif {
            Some(vif) => st.reserved_vif(vif, &req.network)?,
            None => (st.allocate(&req.network, &owner).await?, None),
        };
        // A dual-stack network's port takes an IPv6 address too (a VIF's as well: the VIF
        // reserves its IPv4 address, the port holds its IPv6 one).
        let address6 = match st.allocate6(&req.network, &owner, address).await {
            Ok(a) => a,
            Err(e) => {
                if req.vif.is_none() {
                    st.release(&req.network, &owner).await;
                }
                return Err(e);
            }
        };
        let plan = match st.model.add_port(PortRequest {
            container_id: req.container_id.clone(),
            ifname: req.ifname.clone(),
            netns: req.netns.clone(),
            network: req.network.clone(),
            address,
            address6,
            pod: pod_name(req),
            mac,
        }) {
            Ok(plan) => plan,
            Err(e) => {
                st.release(&req.network, &owner).await;
                return Err(CniError::new(ErrorCode::InvalidConfig, e.to_string()));
            }
        };
        let id = port_id(&req.container_id, &req.ifname);
        let specs = st.specs();
        let rendered = match st.driver.apply(&plan, &specs).await {
            Ok(facts) => facts,
            Err(e) => return Err(st.roll_back(&owner, &req.network, &plan, &e).await),
        };
        for (port, facts) in rendered {
            match st.model.record_facts(&port, facts) {
                Ok(more) => {
                    if let Err(e) = st.driver.apply(&more, &specs).await {
                        return Err(st.roll_back(&owner, &req.network, &plan, &e).await);
                    }
                }
                Err(e) => {
                    let e = DriverError::State(e.to_string());
                    return Err(st.roll_back(&owner, &req.network, &plan, &e).await);
                }
            }
        }
        if let Err(e) = st.publish(&id).await {
            let failure = CniError {
                code: ErrorCode::TryAgainLater,
                msg: "the fabric's store did not take the port".into(),
                details: e.to_string(),
            };
            let e = DriverError::State(e.to_string());
            st.roll_back(&owner, &req.network, &plan, &e).await;
            return Err(failure);
        }
        if let Err(e) = st.persist_port(&id) {
            let failure = store_failure(&e);
            let e = DriverError::State(e.to_string());
            st.withdraw(&id, &owner, &[]).await;
            st.roll_back(&owner, &req.network, &plan, &e).await;
            return Err(failure);
        }
        let port = st.model.port(&id).ok_or_else(|| {
            CniError::new(ErrorCode::DriverFailure, format!("port {id} vanished"))
        })?;
        Ok(result_of(
            port,
            st.model.address6(&id),
            &spec,
            st.fabric.is_some(),
            st.driver.routes_default(&spec),
        ))
    }

    /// CNI DEL: idempotent; releases by (container, ifname) from the state.
    pub async fn del(&self, req: &CniRequest) -> Result<(), CniError> {
        let mut st = self.state.lock().await;
        st.delete(&req.container_id, &req.ifname).await
    }

    /// CNI CHECK.
    pub async fn check(&self, req: &CniRequest) -> Result<(), CniError> {
        let st = self.state.lock().await;
        if !st.model.networks().contains_key(&req.network) {
            return Err(unknown_network(&req.network));
        }
        let Some(port) = st
            .model
            .port_of(&req.container_id, &req.ifname)
            .filter(|p| !p.is_remote())
        else {
            return Err(CniError::new(
                ErrorCode::UnknownContainer,
                format!(
                    "container {} has no interface {} on this agent",
                    req.container_id, req.ifname
                ),
            ));
        };
        if port.network != req.network {
            return Err(CniError::new(
                ErrorCode::InvalidConfig,
                format!("interface {} is on network {}", req.ifname, port.network),
            ));
        }
        let address6 = st.model.address6(&port.id);
        st.driver.check(port, address6).await.map_err(|e| CniError {
            code: ErrorCode::DriverFailure,
            msg: format!("interface {} is not as ADD left it", req.ifname),
            details: e.to_string(),
        })
    }

    /// CNI STATUS: can the agent take ADDs on this network?
    pub async fn status(&self, req: &CniRequest) -> Result<(), CniError> {
        let st = self.state.lock().await;
        if !st.model.networks().contains_key(&req.network) {
            return Err(unknown_network(&req.network));
        }
        if st.ipam.pool(&req.network).is_some_and(|p| p.is_full()) {
            return Err(CniError::new(
                ErrorCode::NotAvailable,
                format!("network {} has no free address", req.network),
            ));
        }
        Ok(())
    }

    /// CNI GC: remove every attachment of the network not in the valid list.
    pub async fn gc(&self, req: &CniRequest) -> Result<(), CniError> {
        let mut st = self.state.lock().await;
        if !st.model.networks().contains_key(&req.network) {
            return Err(unknown_network(&req.network));
        }
        let keep: BTreeSet<(String, String)> = req
            .valid_attachments
            .iter()
            .map(|a| (a.container_id.clone(), a.ifname.clone()))
            .collect();
        let stale: Vec<(String, String)> = st
            .model
            .ports()
            .values()
            .filter(|p| p.network == req.network && !p.is_remote())
            .map(|p| (p.container_id.clone(), p.ifname.clone()))
            .filter(|k| !keep.contains(k))
            .collect();
        for (container, ifname) in stale {
            st.delete(&container, &ifname).await?;
        }
        // addresses held without a port (an ADD that crashed before the model
        // saw it); those other hosts of the fabric hold are theirs
        let remote = st.remote_owners(&req.network);
        let orphans: Vec<Owner> = st
            .ipam
            .pool(&req.network)
            .map(|p| p.held.values().cloned().collect())
            .unwrap_or_default();
        let mut changed = false;
        for owner in orphans {
            if st.vifs.holds(&owner) {
                // a reserved VIF: ReleaseVif frees it
                continue;
            }
            let known = st
                .model
                .port_of(&owner.container_id, &owner.ifname)
                .is_some();
            let kept = keep.contains(&(owner.container_id.clone(), owner.ifname.clone()));
            if !known && !kept && !remote.contains(&owner) {
                st.release(&req.network, &owner).await;
                changed = true;
            }
        }
        if changed {
            st.persist().map_err(|e| store_failure(&e))?;
        }
        Ok(())
    }
}

/// The pod `CNI_ARGS` named (`K8S_POD_NAMESPACE` and `K8S_POD_NAME`, both non-empty).
fn pod_name(req: &CniRequest) -> Option<nephrite_pipeline::PodName> {
    match (req.pod_namespace.as_deref(), req.pod_name.as_deref()) {
        (Some(namespace), Some(name)) if !namespace.is_empty() && !name.is_empty() => {
            Some(nephrite_pipeline::PodName {
                namespace: namespace.to_string(),
                name: name.to_string(),
            })
        }
        _ => None,
    }
}

fn unknown_network(name: &str) -> CniError {
    CniError::new(
        ErrorCode::InvalidConfig,
        format!("network {name:?} is not served by this agent"),
    )
}

/// The CNI result of a port (`address6`: its IPv6 address on a dual-stack
/// network; `in_fabric`: its network spans hosts; `default_route`: the pod
/// routes everything else through the gateway of each family).
pub fn result_of(
    port: &Port,
    address6: Option<Ipv6Cidr>,
    spec: &NetworkSpec,
    in_fabric: bool,
    default_route: bool,
) -> CniResult {
    let mut routes = vec![Route {
        dst: IpCidr::V4(spec.subnet.with_addr(spec.subnet.network())),
        gw: None,
    }];
    if default_route && let Some(gateway) = spec.gateway() {
        routes.push(Route {
            dst: IpCidr::V4(Ipv4Cidr {
                addr: std::net::Ipv4Addr::UNSPECIFIED,
                prefix: 0,
            }),
            gw: Some(gateway.into()),
        });
    }
    let mut ips = vec![IpConfig {
        address: IpCidr::V4(port.address),
        gateway: spec.gateway().map(Into::into),
        interface: Some(0),
    }];
    if let (Some(address6), Some(subnet6)) = (address6, spec.subnet6) {
        ips.push(IpConfig {
            address: IpCidr::V6(address6),
            gateway: spec.gateway6().map(Into::into),
            interface: Some(0),
        });
        routes.push(Route {
            dst: IpCidr::V6(Ipv6Cidr {
                addr: subnet6.network(),
                prefix: subnet6.prefix,
            }),
            gw: None,
        });
        if default_route && let Some(gateway6) = spec.gateway6() {
            routes.push(Route {
                dst: IpCidr::V6(Ipv6Cidr {
                    addr: std::net::Ipv6Addr::UNSPECIFIED,
                    prefix: 0,
                }),
                gw: Some(gateway6.into()),
            });
        }
    }
    CniResult {
        interfaces: vec![Interface {
            name: port.ifname.clone(),
            mac: port.mac(),
            mtu: Some(port_mtu(spec, in_fabric)),
            sandbox: Some(port.netns.clone()),
        }],
        ips,
        routes,
        dns: crate::cni::Dns::default(),
    }
}

impl AgentState {
    /// Load the state files, apply `effective` networks and reconcile the
    /// data plane (adopting what exists). Ports of other hosts a snapshot
    /// may hold are dropped: the fabric's view brings them back.
    async fn load(
        store: StateStore,
        configured: &[NetworkSpec],
        effective: &[NetworkSpec],
        mut driver: Driver,
        fabric: Option<Fabric>,
        view: FabricView,
    ) -> Result<Self, AgentError> {
        let PersistedState {
            mut model,
            mut ipam,
            vifs,
        } = store.load()?;
        let remote: Vec<String> = model
            .ports()
            .values()
            .filter(|p| p.is_remote())
            .map(|p| p.id.clone())
            .collect();
        for id in remote {
            model.remove_port(&id)?;
        }
        model.apply_networks(effective)?;
        ipam.sync_networks(effective)?;
        let dead = reap::take_dead(&mut model, &mut ipam);
        for (port, facts) in driver.reconcile(&model).await? {
            model.record_facts(&port, facts)?;
        }
        reap::discard_leftovers(&mut driver, &dead).await;
        let (owners, _) = tokio::sync::watch::channel(services::owners(&model));
        Ok(AgentState {
            model,
            ipam,
            driver,
            store,
            configured: configured.to_vec(),
            fabric,
            view,
            services: std::collections::BTreeMap::new(),
            services6: std::collections::BTreeMap::new(),
            policies: std::collections::BTreeMap::new(),
            policies6: std::collections::BTreeMap::new(),
            vifs,
            owners,
        })
    }

    /// Replace the networks as one plan; on failure the old ones stay.
    async fn apply_networks(&mut self, networks: &[NetworkSpec]) -> Result<RenderPlan, AgentError> {
        let saved = (self.model.clone(), self.ipam.clone());
        let plan = self.model.apply_networks(networks)?;
        if let Err(e) = self.ipam.sync_networks(networks) {
            (self.model, self.ipam) = saved;
            return Err(e.into());
        }
        let specs = self.specs();
        if let Err(e) = self.driver.apply(&plan, &specs).await {
            (self.model, self.ipam) = saved;
            return Err(e.into());
        }
        Ok(plan)
    }

    fn specs(&self) -> std::collections::BTreeMap<String, NetworkSpec> {
        self.model
            .networks()
            .iter()
            .map(|(k, n)| (k.clone(), n.spec.clone()))
            .collect()
    }

    /// Write a full snapshot (start, reload, GC).
    fn persist(&mut self) -> Result<(), StateError> {
        self.store.save(&self.model, &self.ipam, &self.vifs)
    }

    /// Journal a port as it now is, with its address (unless a VIF holds the address: the
    /// VIF's own records journaled it).
    fn persist_port(&mut self, id: &str) -> Result<(), StateError> {
        let Some(port) = self.model.port(id) else {
            return Ok(());
        };
        let owner = Owner {
            container_id: port.container_id.clone(),
            ifname: port.ifname.clone(),
        };
        let own_address = self
            .ipam
            .pool(&port.network)
            .and_then(|p| p.held.get(&port.address.addr))
            .is_none_or(|holder| *holder == owner);
        let address6 = self.model.address6(id);
        let mut records = Vec::with_capacity(3);
        if own_address {
            records.push(Record::Held {
                network: port.network.clone(),
                address: port.address.addr,
                owner: owner.clone(),
            });
        }
        if let Some(a) = address6 {
            records.push(Record::Held6 {
                network: port.network.clone(),
                address: a.addr,
                owner,
            });
        }
        records.push(Record::PortPut {
            port: port.clone(),
            address6,
        });
        self.store
            .append(&records, &self.model, &self.ipam, &self.vifs)?;
        self.announce_owners();
        Ok(())
    }

    /// Undo a failed ADD: the data plane objects of the new port, the model
    /// entry and the address.
    async fn roll_back(
        &mut self,
        owner: &Owner,
        network: &str,
        plan: &RenderPlan,
        error: &DriverError,
    ) -> CniError {
        for port in &plan.ports_added {
            self.driver.discard_port(port).await;
            if self.model.port(&port.id).is_some()
                && let Err(e) = self.model.remove_port(&port.id)
            {
                tracing::warn!(port = %port.id, error = %e, "rollback could not remove the port");
            }
        }
        self.release(network, owner).await;
        // Re-render what the rollback touched (other pipelines' FIBs) from the restored model.
        if let Err(e) = self.driver.reconcile(&self.model).await {
            tracing::warn!(error = %e, "reconcile after rollback failed");
        }
        driver_failure(error)
    }

    async fn delete(&mut self, container: &str, ifname: &str) -> Result<(), CniError> {
        let owner = Owner {
            container_id: container.to_string(),
            ifname: ifname.to_string(),
        };
        let id = port_id(container, ifname);
        if self.model.port(&id).is_some_and(Port::is_remote) {
            // another host's port: its own agent deletes it
            return Ok(());
        }
        let released = if let Some(port) = self.model.port(&id).cloned() {
            let plan = self
                .model
                .remove_port(&id)
                .map_err(|e| CniError::new(ErrorCode::DriverFailure, e.to_string()))?;
            let specs = self.specs();
            if let Err(e) = self.driver.apply(&plan, &specs).await {
                // put the port back as it was and bring the data plane in line with it
                if let Err(e) = self.model.insert_port(port) {
                    tracing::warn!(port = %id, error = %e, "could not restore the port");
                }
                if let Err(e) = self.driver.reconcile(&self.model).await {
                    tracing::warn!(error = %e, "reconcile after a failed DEL failed");
                }
                return Err(CniError {
                    code: ErrorCode::DriverFailure,
                    msg: format!("could not remove port {id}"),
                    details: e.to_string(),
                });
            }
            let freed = self.ipam.release_everywhere(&owner);
            self.withdraw(&id, &owner, &freed).await;
            true
        } else {
            let freed = self.ipam.release_everywhere(&owner);
            self.withdraw(&id, &owner, &freed).await;
            !freed.is_empty()
        };
        self.announce_owners();
        if released {
            let records = [Record::PortGone { port: id }, Record::Released { owner }];
            self.store
                .append(&records, &self.model, &self.ipam, &self.vifs)
                .map_err(|e| store_failure(&e))?;
        }
        Ok(())
    }
}
