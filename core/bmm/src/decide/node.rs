//! The node-lifecycle duties of a cloud provider for Nodes whose `spec.providerID` is a
//! `nvidia-bmm://` ID: labels and addresses from the instance, and deletion of the Node only
//! when the API says the instance does not exist (404) — never on a 5xx, a timeout or any
//! other failure to look.

use std::collections::BTreeMap;

use crate::cloud::CloudInstance;
use crate::crd::MachineAddress;
use crate::decide::instance_addresses;

/// `topology.kubernetes.io/region`.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// `topology.kubernetes.io/zone`.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// What looking up a Node's instance gave.
#[derive(Debug, Clone, PartialEq)]
pub enum InstanceLookup<'a> {
    /// The instance exists.
    Found {
        /// The instance.
        instance: &'a CloudInstance,
        /// Its site (region and zone).
        site_id: &'a str,
        /// Its instance type's name (or id when the name is unknown).
        instance_type: Option<&'a str>,
    },
    /// The API answered 404 for it.
    NotFound,
    /// The API could not say (5xx, timeout, auth, …).
    Unavailable,
}

/// What to do with one Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAction {
    /// Set these labels and `status.addresses`.
    Update {
        /// Labels to set (others are left alone).
        labels: BTreeMap<String, String>,
        /// The Node's addresses.
        addresses: Vec<MachineAddress>,
    },
    /// Delete the Node: its instance is gone.
    Delete,
    /// Look again later; change nothing.
    Retry,
}

/// Decides what to do with a Node from the lookup of its instance.
pub fn decide_node(lookup: &InstanceLookup<'_>) -> NodeAction {
    match lookup {
        InstanceLookup::Found {
            instance,
            site_id,
            instance_type,
        } => {
            let mut labels = BTreeMap::new();
            labels.insert(REGION_LABEL.to_string(), site_id.to_string());
            labels.insert(ZONE_LABEL.to_string(), site_id.to_string());
            if let Some(t) = instance_type {
                labels.insert(INSTANCE_TYPE_LABEL.to_string(), t.to_string());
            }
            NodeAction::Update {
                labels,
                addresses: instance_addresses(instance),
            }
        }
        InstanceLookup::NotFound => NodeAction::Delete,
        InstanceLookup::Unavailable => NodeAction::Retry,
    }
}

#[cfg(test)]
mod tests;
