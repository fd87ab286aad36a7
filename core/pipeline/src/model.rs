//! The model: networks with their meta pipelines, and ports. Every change
//! returns the render plan a driver applies.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::addr::{Ipv4Cidr, Mac};
use crate::build::{Rendered, build_network, port_pipeline};
use crate::family::Ipv6Cidr;
use crate::module::{Gate, Pipeline, PodName, Port, PortId, RenderFacts, port_id};
use crate::network::{AclRule, MetaPipeline, NetworkSpec};
use crate::plan::{RenderPlan, diff};
use dual::check_address6;

mod dual;
mod incremental;
#[cfg(test)]
mod tests;

/// A network in the model: its declaration and its meta pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The declaration.
    pub spec: NetworkSpec,
    /// The meta pipeline every port pipeline copies.
    pub meta: MetaPipeline,
}

/// What the agent asks for when a container's interface joins a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRequest {
    /// The container (CNI_CONTAINERID).
    pub container_id: String,
    /// The interface name inside the container (CNI_IFNAME).
    pub ifname: String,
    /// The container's network namespace path.
    pub netns: String,
    /// Meta key.
    pub network: String,
    /// The address IPAM gave it.
    pub address: Ipv4Cidr,
    /// Its IPv6 address (a dual-stack network's ports have one, other
    /// networks' none).
    pub address6: Option<Ipv6Cidr>,
    /// The pod the runtime named (`CNI_ARGS`), if any.
    pub pod: Option<PodName>,
    /// The MAC the container's interface must carry (a reserved VIF's);
    /// `None`: the data plane picks one.
    pub mac: Option<Mac>,
}

/// Networks, meta pipelines and ports. Modules and pipelines are derived
/// from them on demand ([`Model::rendered`]); the model holds (and
/// serializes as) its inputs only.
///
/// Adding, rendering or removing a port computes its render plan from the
/// ports alone: that port's pipeline plus one gate and one FIB entry in every
/// other pipeline of its network (O(n) for a network of n ports, which holds
/// n² FIB entries). Changing networks, meta pipelines or ACL rules diffs two
/// full derivations ([`diff`]), the oracle the incremental path is tested
/// against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Model {
    networks: BTreeMap<String, Network>,
    ports: BTreeMap<PortId, Port>,
    /// The IPv6 addresses of the ports of dual-stack networks, by port
    /// (absent in older state: none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    addresses6: BTreeMap<PortId, Ipv6Cidr>,
}

impl Model {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Networks by meta key.
    pub fn networks(&self) -> &BTreeMap<String, Network> {
        &self.networks
    }

    /// Ports by id.
    pub fn ports(&self) -> &BTreeMap<PortId, Port> {
        &self.ports
    }

    /// One port.
    pub fn port(&self, id: &str) -> Option<&Port> {
        self.ports.get(id)
    }

    /// The IPv6 address of a port on a dual-stack network.
    pub fn address6(&self, port: &str) -> Option<Ipv6Cidr> {
        self.addresses6.get(port).copied()
    }

    /// The IPv6 addresses of the ports of dual-stack networks.
    pub fn addresses6(&self) -> &BTreeMap<PortId, Ipv6Cidr> {
        &self.addresses6
    }

    /// The port of a container's interface.
    pub fn port_of(&self, container_id: &str, ifname: &str) -> Option<&Port> {
        self.ports.get(&port_id(container_id, ifname))
    }

    /// The smallest slot no port of `network` holds (slots are this
    /// model's gate numbers: a port arriving from another host of the fabric
    /// takes a free one here, whatever its slot is on its own host).
    pub fn free_slot(&self, network: &str) -> Gate {
        let used: BTreeSet<Gate> = self
            .ports
            .values()
            .filter(|p| p.network == network)
            .map(|p| p.slot)
            .collect();
        (0..).find(|s| !used.contains(s)).unwrap_or(0)
    }

    /// Every module and pipeline, derived.
    pub fn rendered(&self) -> Rendered {
        let mut out = Rendered::default();
        for (key, net) in &self.networks {
            let ports: Vec<&Port> = self.ports.values().filter(|p| &p.network == key).collect();
            build_network(&net.spec, &net.meta, &ports, &mut out);
        }
        out
    }

    /// The pipeline of one port, derived.
    pub fn pipeline(&self, port: &str) -> Option<Pipeline> {
        let (net, p, others) = self.neighbourhood(port)?;
        let live: Vec<&Port> = others.into_iter().filter(|q| q.is_live()).collect();
        Some(port_pipeline(&net.spec, &net.meta, p, &live).1)
    }

    /// A port, its network and the other ports of that network.
    fn neighbourhood(&self, port: &str) -> Option<(&Network, &Port, Vec<&Port>)> {
        let p = self.ports.get(port)?;
        let net = self.networks.get(&p.network)?;
        let others = self
            .ports
            .values()
            .filter(|q| q.network == p.network && q.id != port)
            .collect();
        Some((net, p, others))
    }

    /// Replace the set of networks with `specs` (the config file). New
    /// networks are added, changed ones updated (ACL and MTU changes reach
    /// every port pipeline of the network), missing ones removed.
    ///
    /// # Errors
    /// An invalid or duplicate spec; removing a network that still has
    /// ports; changing the kind or subnet of a network with ports.
    pub fn apply_networks(&mut self, specs: &[NetworkSpec]) -> Result<RenderPlan, Error> {
        let mut wanted = BTreeMap::new();
        for spec in specs {
            spec.validate()?;
            if wanted.insert(spec.name.clone(), spec.clone()).is_some() {
                return Err(Error::InvalidNetwork {
                    network: spec.name.clone(),
                    why: "declared twice".into(),
                });
            }
        }
        for (key, net) in &self.networks {
            let in_use = self.ports.values().any(|p| &p.network == key);
            match wanted.get(key) {
                None if in_use => return Err(Error::NetworkInUse(key.clone())),
                Some(new)
                    if in_use
                        && (new.kind != net.spec.kind
                            || new.subnet != net.spec.subnet
                            || new.subnet6 != net.spec.subnet6) =>
                {
                    return Err(Error::InvalidNetwork {
                        network: key.clone(),
                        why: "kind and subnets cannot change while ports exist".into(),
                    });
                }
                _ => {}
            }
        }
        let before = self.clone();
        let mut networks = BTreeMap::new();
        for (key, spec) in wanted {
            let meta = match self.networks.get(&key) {
                Some(old) if old.spec.kind == spec.kind => old.meta.clone(),
                _ => MetaPipeline::default_for(&spec),
            };
            networks.insert(key, Network { spec, meta });
        }
        self.networks = networks;
        Ok(diff(&before, self))
    }

    /// Replace a network's meta pipeline; every port pipeline of the
    /// network is rebuilt from it.
    ///
    /// # Errors
    /// Unknown network, invalid meta pipeline.
    pub fn set_meta_pipeline(&mut self, meta: MetaPipeline) -> Result<RenderPlan, Error> {
        meta.validate()?;
        if !self.networks.contains_key(&meta.key) {
            return Err(Error::UnknownNetwork(meta.key.clone()));
        }
        let before = self.clone();
        if let Some(net) = self.networks.get_mut(&meta.key) {
            net.meta = meta;
        }
        Ok(diff(&before, self))
    }

    /// Replace a network's ACL rules.
    ///
    /// # Errors
    /// Unknown network.
    pub fn set_acl(&mut self, network: &str, rules: Vec<AclRule>) -> Result<RenderPlan, Error> {
        let before = self.clone();
        let net = self
            .networks
            .get_mut(network)
            .ok_or_else(|| Error::UnknownNetwork(network.to_string()))?;
        net.spec.acl = rules;
        Ok(diff(&before, self))
    }

    /// Add a port and its pipeline (ingress first). The port is not live
    /// until the driver reports its facts ([`Model::record_facts`]).
    ///
    /// # Errors
    /// Unknown network, the port already exists, the address is outside
    /// the subnet, is the gateway, or is held by another port.
    pub fn add_port(&mut self, req: PortRequest) -> Result<RenderPlan, Error> {
        let net = self
            .networks
            .get(&req.network)
            .ok_or_else(|| Error::UnknownNetwork(req.network.clone()))?;
        let id = port_id(&req.container_id, &req.ifname);
        if let Some(existing) = self.ports.get(&id) {
            return Err(Error::PortExists {
                port: id,
                network: existing.network.clone(),
            });
        }
        let subnet = net.spec.subnet;
        let bad_addr = |why: &str| Error::InvalidAddress {
            address: req.address.to_string(),
            network: req.network.clone(),
            why: why.to_string(),
        };
        if req.address.prefix != subnet.prefix || !subnet.contains(req.address.addr) {
            return Err(bad_addr("not in the subnet"));
        }
        let hosts = subnet.host_range().unwrap_or((1, 0));
        let n = u32::from(req.address.addr);
        if n < hosts.0 || n > hosts.1 {
            return Err(bad_addr("not a host address"));
        }
        if Some(req.address.addr) == net.spec.gateway() {
            return Err(bad_addr("is the gateway"));
        }
        let same_net: Vec<&Port> = self
            .ports
            .values()
            .filter(|p| p.network == req.network)
            .collect();
        if same_net.iter().any(|p| p.address.addr == req.address.addr) {
            return Err(bad_addr("held by another port"));
        }
        let address6 = check_address6(net, &req, &self.addresses6)?;
        let slot = self.free_slot(&req.network);
        if let Some(a) = address6 {
            self.addresses6.insert(id.clone(), a);
        }
        self.ports.insert(
            id.clone(),
            Port {
                id: id.clone(),
                network: req.network,
                container_id: req.container_id,
                ifname: req.ifname,
                netns: req.netns,
                address: req.address,
                slot,
                facts: None,
                remote: None,
                pod: req.pod,
                requested_mac: req.mac,
            },
        );
        let mut plan = RenderPlan::default();
        if let Some((net, p, others)) = self.neighbourhood(&id) {
            incremental::attached(net, p, &others, &mut plan);
        }
        plan.addresses6.extend(address6.map(|a| (id, a)));
        plan.normalize();
        Ok(plan)
    }

    /// Store what the driver returned for a port (MAC, ifindex, module
    /// facts). The port becomes live: its egress joins every other pipeline
    /// of its network and the FIBs learn its MAC and address.
    ///
    /// # Errors
    /// Unknown port.
    pub fn record_facts(&mut self, port: &str, facts: RenderFacts) -> Result<RenderPlan, Error> {
        let Some(p) = self.ports.get_mut(port) else {
            return Err(Error::UnknownPort(port.to_string()));
        };
        let was = p.clone();
        p.facts = Some(facts);
        let mut plan = RenderPlan::default();
        if let Some((net, p, others)) = self.neighbourhood(port) {
            if was.is_live() {
                incremental::rerendered(net, &was, p, &others, &mut plan);
            } else {
                incremental::went_live(net, p, &others, &mut plan);
                incremental::facts_changed(net, &was, p, &mut plan);
            }
        }
        plan.normalize();
        Ok(plan)
    }

    /// Put back a port exactly as it was (slot and facts included): the
    /// inverse of [`Model::remove_port`], for undoing a removal the data
    /// plane refused and for ports that arrive already rendered (replayed
    /// from a journal, or rendered by another host of the fabric).
    ///
    /// # Errors
    /// Unknown network, the port exists, its slot or address is taken on
    /// its network.
    pub fn insert_port(&mut self, port: Port) -> Result<RenderPlan, Error> {
        self.insert_port6(port, None)
    }

    /// [`Model::insert_port`] for a port that has an IPv6 address too (a
    /// dual-stack network's), as [`Model::address6`] gave it.
    ///
    /// # Errors
    /// As [`Model::insert_port`]; the IPv6 address is outside the network's
    /// IPv6 subnet or held by another port.
    pub fn insert_port6(
        &mut self,
        port: Port,
        address6: Option<Ipv6Cidr>,
    ) -> Result<RenderPlan, Error> {
        if let Some(a) = address6 {
            self.check_free6(&port.network, &port.id, a)?;
        }
        if !self.networks.contains_key(&port.network) {
            return Err(Error::UnknownNetwork(port.network.clone()));
        }
        if let Some(existing) = self.ports.get(&port.id) {
            return Err(Error::PortExists {
                port: port.id.clone(),
                network: existing.network.clone(),
            });
        }
        let clash = self.ports.values().find(|q| {
            q.network == port.network
                && (q.slot == port.slot || q.address.addr == port.address.addr)
        });
        if let Some(q) = clash {
            return Err(Error::InvalidAddress {
                address: port.address.to_string(),
                network: port.network.clone(),
                why: format!("slot or address held by port {}", q.id),
            });
        }
        let id = port.id.clone();
        self.ports.insert(id.clone(), port);
        if let Some(a) = address6 {
            self.addresses6.insert(id.clone(), a);
        }
        let mut plan = RenderPlan::default();
        if let Some((net, p, others)) = self.neighbourhood(&id) {
            incremental::attached(net, p, &others, &mut plan);
            if p.is_live() {
                incremental::went_live(net, p, &others, &mut plan);
            }
        }
        plan.addresses6.extend(address6.map(|a| (id, a)));
        plan.normalize();
        Ok(plan)
    }

    /// Remove a port, its pipeline and its egress from every other pipeline.
    ///
    /// # Errors
    /// Unknown port.
    pub fn remove_port(&mut self, port: &str) -> Result<RenderPlan, Error> {
        let mut plan = RenderPlan::default();
        if let Some((net, p, others)) = self.neighbourhood(port) {
            if p.is_live() {
                incremental::went_dead(net, p, &others, &mut plan);
            }
            incremental::detached(net, p, &others, &mut plan);
        }
        if self.ports.remove(port).is_none() {
            return Err(Error::UnknownPort(port.to_string()));
        }
        self.addresses6.remove(port);
        plan.normalize();
        Ok(plan)
    }
}
