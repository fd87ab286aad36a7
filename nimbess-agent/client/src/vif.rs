//! VIFs as the agent's `Vifs` service speaks of them: an address (and MAC) reserved on a named
//! network for a pod before its sandbox exists.
//!
//! kuryr-l7's VIF handler claims a pod's VIFs ([`VifClaim`]) when the pod is created and
//! records what it gets back ([`VifView`]); `nimbess-cni` names a VIF ([`VifRef`]) in the ADD
//! that plugs it. A VIF is identified by the pod's UID and the handler's key for the request,
//! so claiming twice gets the same VIF back. The agent persists each reservation as a
//! [`VifEntry`]; how it holds the address in its pools is its own business.

use std::net::Ipv4Addr;

use nephrite_pipeline::{Ipv4Cidr, Mac, PortId};
use serde::{Deserialize, Serialize};

/// Which VIF: the pod and the handler's request key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct VifRef {
    /// The pod's UID.
    pub pod_uid: String,
    /// The handler's key for the request (`main`, `network/ns/name/0`, …).
    pub key: String,
}

impl std::fmt::Display for VifRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.pod_uid, self.key)
    }
}

/// What to reserve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VifClaim {
    /// Which VIF.
    pub vif: VifRef,
    /// The network's name.
    pub network: String,
    /// The pod's namespace (informational).
    pub pod_namespace: String,
    /// The pod's name (informational).
    pub pod_name: String,
}

/// A reserved VIF, as the agent persists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VifEntry {
    /// Which VIF.
    pub vif: VifRef,
    /// The network's name.
    pub network: String,
    /// The reserved address with the network's prefix.
    pub address: Ipv4Cidr,
    /// The pod's namespace.
    #[serde(default)]
    pub pod_namespace: String,
    /// The pod's name.
    #[serde(default)]
    pub pod_name: String,
    /// The MAC reserved for it (absent in a VIF journaled before MACs were reserved: the next
    /// allocation of that VIF reserves one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<Mac>,
}

/// The port a VIF is plugged as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plugged {
    /// The port's id.
    pub port: PortId,
    /// Its container.
    pub container_id: String,
    /// Its interface in the container.
    pub ifname: String,
    /// The MAC the data plane gave it, once rendered.
    pub mac: Option<Mac>,
}

/// A VIF as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VifView {
    /// The reservation.
    #[serde(flatten)]
    pub entry: VifEntry,
    /// The network's gateway.
    pub gateway: Option<Ipv4Addr>,
    /// The port using it, if plugged.
    pub plugged: Option<Plugged>,
}
