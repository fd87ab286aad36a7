//! Modules (network-function instances), ports and pipelines.
//!
//! Connectivity is held by the modules themselves, as in the seed: each has
//! an ingress and an egress gate map (gate number → the neighbouring
//! module's id). A pipeline only lists which modules belong to it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::{Ipv4Cidr, Mac};
use crate::network::AclRule;

/// A module instance's id, unique in the whole model.
pub type ModuleId = String;
/// A port's id: `port_<container id>_<ifname>`.
pub type PortId = String;
/// A gate number.
pub type Gate = u32;

/// The id of the port of a container's interface.
pub fn port_id(container_id: &str, ifname: &str) -> PortId {
    format!("port_{container_id}_{ifname}")
}

/// The id of a port's ingress module.
pub fn ingress_id(port: &str) -> ModuleId {
    format!("{port}_ingress")
}

/// The id of a port's egress module.
pub fn egress_id(port: &str) -> ModuleId {
    format!("{port}_egress")
}

/// The id of the copy of meta module `meta` in `port`'s pipeline.
pub fn copy_id(meta: &str, port: &str) -> ModuleId {
    format!("{meta}.{port}")
}

/// What a module instance does, with its tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModuleKind {
    /// Frames entering the data plane from a port. First module of the port's pipeline.
    IngressPort {
        /// The port.
        port: PortId,
    },
    /// Frames leaving the data plane through a port. Sits in every other
    /// pipeline of the network, never in its own.
    EgressPort {
        /// The port.
        port: PortId,
    },
    /// Access control.
    Acl {
        /// Rules, first match wins, default allow.
        rules: Vec<AclRule>,
    },
    /// L2 switch: destination MAC → egress gate.
    L2Switch {
        /// The forwarding table.
        fib: BTreeMap<Mac, Gate>,
    },
    /// L3 router: destination host address → egress gate.
    L3Router {
        /// The forwarding table.
        fib: BTreeMap<Ipv4Addr, Gate>,
    },
}

impl ModuleKind {
    /// A short name of the function.
    pub fn function(&self) -> &'static str {
        match self {
            ModuleKind::IngressPort { .. } => "ingress_port",
            ModuleKind::EgressPort { .. } => "egress_port",
            ModuleKind::Acl { .. } => "acl",
            ModuleKind::L2Switch { .. } => "l2_switch",
            ModuleKind::L3Router { .. } => "l3_router",
        }
    }
}

/// A module instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Unique id.
    pub id: ModuleId,
    /// The meta key (network) it serves.
    pub network: String,
    /// The port whose pipeline created it (for an egress port: its own port).
    pub port: PortId,
    /// Function and tables.
    pub kind: ModuleKind,
    /// Ingress gate → upstream module.
    pub ingress: BTreeMap<Gate, ModuleId>,
    /// Egress gate → downstream module.
    pub egress: BTreeMap<Gate, ModuleId>,
    /// Facts the data plane returned when rendering it (kernel object, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, String>,
}

/// A port: one interface of one container on one network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    /// `port_<container>_<ifname>`.
    pub id: PortId,
    /// Meta key.
    pub network: String,
    /// The container (CNI_CONTAINERID).
    pub container_id: String,
    /// Interface name in the container (CNI_IFNAME).
    pub ifname: String,
    /// Path of the container's network namespace (CNI_NETNS).
    pub netns: String,
    /// The port's address with the network's prefix length.
    pub address: Ipv4Cidr,
    /// Slot in the network: the gate number other pipelines use to reach
    /// this port's egress. Smallest free slot at add time.
    pub slot: Gate,
    /// Facts the data plane returned for the port; `None` until rendered.
    /// A port with facts is live: it has an egress in other pipelines and
    /// FIB entries pointing at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<RenderFacts>,
    /// The host the port lives on, when it is another host of the fabric
    /// (`None`: this host). A remote port's own pipeline is rendered by its
    /// host; here it is only an egress (reached over the overlay) and FIB
    /// entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteHost>,
    /// The pod the runtime said the sandbox is for (`K8S_POD_NAMESPACE`,
    /// `K8S_POD_NAME` in `CNI_ARGS`); `None` when it named none. What
    /// NetworkPolicies and Services match the port's address by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodName>,
    /// The MAC the agent asked the data plane to give the container's
    /// interface (a reserved VIF's, [`crate::PortRequest::mac`]); `None`: the
    /// data plane chose one. Kept so the port is rendered again with the same
    /// MAC; [`Port::mac`] is what the data plane reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_mac: Option<Mac>,
}

/// A Kubernetes pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodName {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for PodName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Another host of the fabric, as the ports it owns name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RemoteHost {
    /// The host's name in the fabric.
    pub host: String,
    /// Its underlay address: where overlay frames for its ports are sent.
    pub underlay: Ipv4Addr,
}

impl Port {
    /// True once the data plane has rendered the port.
    pub fn is_live(&self) -> bool {
        self.facts.is_some()
    }

    /// True when the port lives on another host of the fabric.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// The MAC the data plane returned.
    pub fn mac(&self) -> Option<Mac> {
        self.facts.as_ref().map(|f| f.mac)
    }
}

/// What a driver reports after rendering a port: the seed's "Port object
/// updated with the MAC address returned from the data plane".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderFacts {
    /// MAC of the container's interface.
    pub mac: Mac,
    /// Interface index of the host side of the port.
    pub ifindex: u32,
    /// Per-module facts (kernel object names, handles), by module id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modules: BTreeMap<ModuleId, BTreeMap<String, String>>,
}

/// A port pipeline: which modules belong to it, the port's ingress first,
/// then the meta pipeline's copies, then the other ports' egress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pipeline {
    /// The port it belongs to.
    pub port: PortId,
    /// Meta key.
    pub network: String,
    /// Member modules in order.
    pub modules: Vec<ModuleId>,
}
