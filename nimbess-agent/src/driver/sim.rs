//! The `sim` driver: ports exist in memory, frames are synthetic and run
//! through the model's pipelines with [`nephrite_pipeline::forward`];
//! connections also pass the Services' and policies' modules
//! ([`SimDriver::connect`]). For machines without privileges and as the
//! kernel driver's oracle. Its firewall ([`SimFirewall`]) holds the
//! Services' and policies' modules the connections pass.

use std::collections::{BTreeMap, BTreeSet};

use nephrite_pipeline::{
    AclProtocol, Counters, Frame, Mac, Model, ModuleId, Outcome, Payload, Port, PortId,
    RenderFacts, RenderPlan, Trace, count, forward,
};

use super::firewall::Firewall as _;
use super::{DriverError, ModuleObject};
use crate::naming::fnv1a;

mod firewall;

pub use firewall::SimFirewall;

/// The simulated data plane.
#[derive(Debug, Default)]
pub struct SimDriver {
    ports: BTreeSet<PortId>,
    next_ifindex: u32,
    counters: Counters,
    drops: Counters,
    /// The Services, policies, egress and ACLs it holds.
    firewall: SimFirewall,
}

/// The MAC the simulation gives a port: locally administered, from its id.
pub fn sim_mac(port: &str) -> Mac {
    let h = fnv1a(port).to_be_bytes();
    Mac([0x02, h[1], h[2], h[3], h[4], h[5]])
}

impl SimDriver {
    /// An empty simulation.
    pub fn new() -> Self {
        SimDriver {
            next_ifindex: 1000,
            ..Default::default()
        }
    }

    /// The facts of a port it renders: the MAC the port asked for, else [`sim_mac`].
    fn facts(&mut self, port: &Port) -> RenderFacts {
        self.next_ifindex += 1;
        RenderFacts {
            mac: port.requested_mac.unwrap_or_else(|| sim_mac(&port.id)),
            ifindex: self.next_ifindex,
            modules: BTreeMap::new(),
        }
    }

    /// The firewall.
    pub fn firewall(&self) -> &SimFirewall {
        &self.firewall
    }

    /// The firewall, to change.
    pub fn firewall_mut(&mut self) -> &mut SimFirewall {
        &mut self.firewall
    }

    /// The ACL a port's network gives it.
    fn network_acl<'m>(model: &'m Model, port: &Port) -> &'m [nephrite_pipeline::AclRule] {
        model
            .networks()
            .get(&port.network)
            .map_or(&[][..], |n| &n.spec.acl[..])
    }

    pub(crate) fn reconcile(&mut self, model: &Model) -> Vec<(PortId, RenderFacts)> {
        let mut out = Vec::new();
        for port in model.ports().values() {
            if !port.is_remote() {
                let acl = Self::network_acl(model, port);
                // holding what it is given cannot fail
                let _ = self.firewall.apply_acl(&port.id, acl);
            }
            self.ports.insert(port.id.clone());
            let facts = port.facts.clone().unwrap_or_else(|| self.facts(port));
            self.next_ifindex = self.next_ifindex.max(facts.ifindex);
            out.push((port.id.clone(), facts));
        }
        out
    }

    pub(crate) fn apply(&mut self, plan: &RenderPlan) -> Vec<(PortId, RenderFacts)> {
        let mut out = Vec::new();
        for port in plan.ports_added.iter().filter(|p| !p.is_remote()) {
            self.ports.insert(port.id.clone());
            out.push((port.id.clone(), self.facts(port)));
        }
        for change in &plan.acl_changed {
            // holding what it is given cannot fail
            let _ = self.firewall.apply_acl(&change.port, &change.rules);
        }
        for port in &plan.ports_removed {
            self.ports.remove(&port.id);
            let _ = self.firewall.remove_acl(&port.id);
        }
        for m in &plan.modules_deleted {
            self.counters.remove(&m.id);
            self.drops.remove(&m.id);
        }
        out
    }

    pub(crate) fn discard_port(&mut self, port: &Port) {
        self.ports.remove(&port.id);
        let _ = self.firewall.remove_acl(&port.id);
    }

    pub(crate) fn check(&self, port: &Port) -> Result<(), DriverError> {
        if self.ports.contains(&port.id) {
            Ok(())
        } else {
            Err(DriverError::State(format!(
                "port {} is not rendered",
                port.id
            )))
        }
    }

    pub(crate) fn verify(&self, model: &Model) -> Vec<String> {
        let mut drift = Vec::new();
        // ports of other hosts of a fabric are simulated there
        for port in model.ports().values().filter(|p| !p.is_remote()) {
            let id = &port.id;
            if !self.ports.contains(id) {
                drift.push(format!(
                    "port {id} is in the model but not in the simulation"
                ));
            }
            let acl = Self::network_acl(model, port);
            drift.extend(self.firewall.verify_acl(id, acl).unwrap_or_default());
        }
        for id in &self.ports {
            if model.port(id).is_none() {
                drift.push(format!("port {id} is simulated but not in the model"));
            }
        }
        drift
    }

    pub(crate) fn objects(&self, model: &Model) -> BTreeMap<ModuleId, ModuleObject> {
        model
            .rendered()
            .modules
            .keys()
            .map(|id| {
                (
                    id.clone(),
                    ModuleObject {
                        object: format!("sim {id}"),
                        packets: self.counters.get(id).copied().unwrap_or(0),
                        dropped: self.drops.get(id).copied().unwrap_or(0),
                    },
                )
            })
            .collect()
    }

    /// Open a synthetic connection from the local port `from` to
    /// `dst`:`port`: the Services' and policies' modules it holds say
    /// where it may end ([`nephrite_pipeline::connect_tiered`]), and a reached
    /// backend must also be a port the pipelines deliver `from`'s packet to
    /// (another network's pod, or no pod, is dropped). One outcome per
    /// backend the load balancer may pick.
    pub fn connect(
        &self,
        model: &Model,
        from: &str,
        dst: std::net::Ipv4Addr,
        protocol: nephrite_pipeline::Protocol,
        port: u16,
    ) -> BTreeSet<Outcome> {
        let Some(src) = model.port(from) else {
            return BTreeSet::from([Outcome::Dropped]);
        };
        let rendered = model.rendered();
        nephrite_pipeline::connect_tiered(
            &self.firewall.services,
            &self.firewall.policies,
            src.address.addr,
            dst,
            protocol,
            port,
        )
        .into_iter()
        .map(|outcome| match outcome {
            Outcome::Reaches(address, target) => {
                let delivered = model
                    .ports()
                    .values()
                    .find(|p| p.address.addr == address)
                    .is_some_and(|to| {
                        let l4 = match protocol {
                            nephrite_pipeline::Protocol::Udp => AclProtocol::Udp,
                            _ => AclProtocol::Tcp,
                        };
                        let frame = Frame {
                            src_mac: src.mac().unwrap_or(Mac::BROADCAST),
                            dst_mac: to.mac().unwrap_or(Mac::BROADCAST),
                            payload: Payload::Ipv4 {
                                src: src.address.addr,
                                dst: address,
                                protocol: l4,
                                port: Some(target),
                            },
                        };
                        forward(&rendered, from, &frame).delivered.contains(&to.id)
                    });
                if delivered { outcome } else { Outcome::Dropped }
            }
            other => other,
        })
        .collect()
    }

    /// Send a synthetic frame in through `port` and count it.
    pub fn inject(&mut self, model: &Model, port: &str, frame: &Frame) -> Trace {
        let trace = forward(&model.rendered(), port, frame);
        count(&mut self.counters, &trace);
        for (id, _) in &trace.dropped {
            *self.drops.entry(id.clone()).or_default() += 1;
        }
        trace
    }
}
