//! The rules an agent follows as one host of a multi-host fabric, pure so
//! they are property-tested here rather than inside the daemon: how much of
//! the MTU the overlay takes, which networks a host serves when its config
//! and the fabric both declare some, and when two records of another
//! host's port describe the same port.

use std::collections::BTreeMap;

use crate::module::Port;
use crate::network::NetworkSpec;

#[cfg(test)]
mod tests;

/// What VXLAN adds to a frame (outer Ethernet, IPv4, UDP and VXLAN headers).
pub const VXLAN_OVERHEAD: u32 = 50;

/// The MTU of a network's ports: the network's, less [`VXLAN_OVERHEAD`]
/// for a network that spans the hosts of a fabric (L2 frames and L3
/// packets alike cross the hosts inside VXLAN), so an encapsulated frame
/// still fits the network's MTU.
pub fn port_mtu(spec: &NetworkSpec, in_fabric: bool) -> u32 {
    if in_fabric {
        spec.mtu().saturating_sub(VXLAN_OVERHEAD)
    } else {
        spec.mtu()
    }
}

/// The networks a host serves: those of its own config, plus those other
/// hosts published (`published`, by name). The config wins on a name both
/// declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveNetworks {
    /// The networks, sorted by name, one per name.
    pub networks: Vec<NetworkSpec>,
    /// Names the fabric declares differently from the config (the config's
    /// declaration is the one in `networks`).
    pub overridden: Vec<String>,
}

/// Merge the configured networks with the fabric's ([`EffectiveNetworks`]).
pub fn effective_networks(
    configured: &[NetworkSpec],
    published: &BTreeMap<String, NetworkSpec>,
) -> EffectiveNetworks {
    let mut out = published.clone();
    let mut overridden = Vec::new();
    for spec in configured {
        if let Some(theirs) = published.get(&spec.name)
            && theirs != spec
            && !overridden.contains(&spec.name)
        {
            overridden.push(spec.name.clone());
        }
        out.insert(spec.name.clone(), spec.clone());
    }
    EffectiveNetworks {
        networks: out.into_values().collect(),
        overridden,
    }
}

/// Two records of one remote port say the same thing: the slot is chosen by
/// each host locally and is not compared; network, address, MAC, host and
/// owner are.
pub fn same_remote_port(a: &Port, b: &Port) -> bool {
    a.network == b.network
        && a.address == b.address
        && a.mac() == b.mac()
        && a.remote == b.remote
        && a.container_id == b.container_id
        && a.ifname == b.ifname
}
