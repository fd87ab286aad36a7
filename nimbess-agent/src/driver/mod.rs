//! Data-plane drivers: they take render plans and return render facts.
//!
//! A driver renders exactly what a [`RenderPlan`] says (ports, module
//! instances, FIB entries, ACL rules) and reports, per new port, the facts
//! the data plane chose (MAC, ifindex, kernel object names) for the model to
//! store. A [`Driver`] keeps the links, bridges and routes; what is
//! filtered, translated or marked is its [`Firewall`]'s, which it owns and
//! calls for a plan's ACLs and the networks' egress, and which the agent
//! calls for Services and policies. Two drivers: [`kernel`] (Linux,
//! netlink, nftables) and [`sim`] (in-process, synthetic frames).

use std::collections::BTreeMap;

use nephrite_pipeline::{Model, ModuleId, NetworkSpec, Port, PortId, RenderFacts, RenderPlan};
use serde::{Deserialize, Serialize};

pub mod firewall;
pub mod kernel;
pub mod sim;

pub use firewall::{Firewall, PodPolicies, PodPolicies6, Services, Services6};

/// Why a driver failed; the agent answers CNI code 101 and rolls back.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A netlink request failed.
    #[error("{what}: {source}")]
    Netlink {
        /// What was being done, naming the object.
        what: String,
        /// rtnetlink's error.
        source: rtnetlink::Error,
    },
    /// An OS call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done, naming the object.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A FIB entry's egress port has no veth (its netns went away): the
    /// port is dead, and only that port's own change fails on it.
    #[error("FIB entry {entry}: veth {veth} of {port} is missing")]
    EgressMissing {
        /// The entry's key (a MAC or an address).
        entry: String,
        /// The host veth looked for.
        veth: String,
        /// The egress port.
        port: PortId,
    },
    /// The data plane is not as required.
    #[error("{0}")]
    State(String),
}

/// One module instance as the data plane holds it: its object and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleObject {
    /// The kernel (or simulated) object rendering it.
    pub object: String,
    /// Packets the object counted.
    pub packets: u64,
    /// Packets it dropped.
    pub dropped: u64,
}

/// The chosen driver.
#[derive(Debug)]
pub enum Driver {
    /// The Linux kernel.
    Kernel(kernel::KernelDriver),
    /// The simulation.
    Sim(sim::SimDriver),
}

impl Driver {
    /// Bring the data plane in line with a model loaded from disk, adopting
    /// what exists. Returns refreshed facts for ports found.
    ///
    /// # Errors
    /// The data plane cannot be reached or changed.
    pub async fn reconcile(
        &mut self,
        model: &Model,
    ) -> Result<Vec<(PortId, RenderFacts)>, DriverError> {
        match self {
            Driver::Kernel(k) => k.reconcile(model).await,
            Driver::Sim(s) => Ok(s.reconcile(model)),
        }
    }

    /// Apply a plan; returns the facts of the ports it created.
    ///
    /// # Errors
    /// Any step failed; what was done before the failure stays (the agent rolls back).
    pub async fn apply(
        &mut self,
        plan: &RenderPlan,
        networks: &BTreeMap<String, NetworkSpec>,
    ) -> Result<Vec<(PortId, RenderFacts)>, DriverError> {
        match self {
            Driver::Kernel(k) => k.apply(plan, networks).await,
            Driver::Sim(s) => Ok(s.apply(plan)),
        }
    }

    /// Remove whatever exists of a port (rollback of a failed ADD).
    pub async fn discard_port(&mut self, port: &Port) {
        match self {
            Driver::Kernel(k) => k.discard_port(port).await,
            Driver::Sim(s) => s.discard_port(port),
        }
    }

    /// Check a port is as ADD left it.
    ///
    /// # Errors
    /// What differs.
    pub async fn check(
        &self,
        port: &Port,
        address6: Option<nephrite_pipeline::Ipv6Cidr>,
    ) -> Result<(), DriverError> {
        match self {
            Driver::Kernel(k) => k.check(port, address6).await,
            Driver::Sim(s) => s.check(port),
        }
    }

    /// Differences between the model and the data plane, one line each;
    /// the firewall's ACLs and egress table are rendered again when they
    /// drifted.
    ///
    /// # Errors
    /// The data plane cannot be read.
    pub async fn verify(&mut self, model: &Model) -> Result<Vec<String>, DriverError> {
        match self {
            Driver::Kernel(k) => k.verify(model).await,
            Driver::Sim(s) => Ok(s.verify(model)),
        }
    }

    /// Remove data-plane entries of other hosts' ports the model no longer
    /// holds (they vanished while the agent was down); returns what was
    /// removed, one line each.
    ///
    /// # Errors
    /// The data plane cannot be read or changed.
    pub async fn sweep(&self, model: &Model) -> Result<Vec<String>, DriverError> {
        match self {
            Driver::Kernel(k) => k.sweep(model).await,
            // the simulation keeps no state beyond the model's
            Driver::Sim(_) => Ok(Vec::new()),
        }
    }

    /// The object and counters of every module instance.
    pub async fn objects(&self, model: &Model) -> BTreeMap<ModuleId, ModuleObject> {
        match self {
            Driver::Kernel(k) => k.objects(model).await,
            Driver::Sim(s) => s.objects(model),
        }
    }

    /// True when pods of `spec` get a default route through the network's
    /// gateway (the kernel driver with an egress; the simulation has none).
    pub fn routes_default(&self, spec: &NetworkSpec) -> bool {
        match self {
            Driver::Kernel(k) => k.routes_default(spec),
            Driver::Sim(_) => false,
        }
    }

    /// The driver's firewall: Services, policies, egress and ACLs.
    pub fn firewall(&self) -> &dyn Firewall {
        match self {
            Driver::Kernel(k) => k.firewall(),
            Driver::Sim(s) => s.firewall(),
        }
    }

    /// The driver's firewall, to render Services and policies.
    pub fn firewall_mut(&mut self) -> &mut dyn Firewall {
        match self {
            Driver::Kernel(k) => k.firewall_mut(),
            Driver::Sim(s) => s.firewall_mut(),
        }
    }

    /// The driver's name.
    pub fn name(&self) -> &'static str {
        match self {
            Driver::Kernel(_) => "kernel",
            Driver::Sim(_) => "sim",
        }
    }
}
