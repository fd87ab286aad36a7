//! SR-IOV VFs on a node: how many it advertises, how many its pods hold, and whether a pod's
//! new VFs fit.
//!
//! A node advertises its VFs per device-plugin resource in `status.allocatable`
//! (`intel.com/sriov_a: "4"`); [`Config::sriov_resources`] (`[sriov]
//! physnet_resource_mappings`) says which physical network each resource's VFs are on, and
//! the seed's `pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-<physnet>` names its
//! physnet itself. A physnet's VFs on the node are the sum over the resources that map to it.
//!
//! The VFs held are the pods' recorded VIFs on a physnet ([`Target::Physnet`], what the `sriov`
//! driver asks for), counted per physnet. A specific port or an NPWG network whose ports are
//! `direct` names a Neutron network rather than a physnet and is not counted here.
//!
//! [`check`] is the decision: the VFs a pod's update would allocate must fit in what is free
//! on its node (advertised minus held, the pod's own kept VFs included in the held). A pod not
//! yet scheduled has no node to count on and gets nothing until it is.

use std::collections::BTreeMap;

use crate::annotations::OPAQUE_SRIOV_PREFIX;
use crate::{Allocation, Config, Target, Vif};

/// A node, as the VF count reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `status.allocatable`: resource name → quantity as the API server holds it (`"4"`).
    pub allocatable: BTreeMap<String, String>,
}

/// What one physnet has on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhysnetVfs {
    /// The resources that map to the physnet (configured, or advertised in the seed's form).
    pub resources: Vec<String>,
    /// VFs advertised (the sum over `resources` present in `status.allocatable`).
    pub allocatable: usize,
}

/// Why a pod's new VFs cannot be allocated now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VfShortage {
    /// Fewer VFs are free on the physnet than the update allocates.
    #[error(
        "node {node} has {free} free VFs on physnet {physnet} ({mapped}: {allocatable} allocatable, {held} held by its pods); the pod wants {wanted} more",
        free = free(.allocatable, .held),
        mapped = listed(.resources)
    )]
    NotEnough {
        /// The node.
        node: String,
        /// The physnet.
        physnet: String,
        /// The resources that map to it.
        resources: Vec<String>,
        /// VFs the node advertises on it.
        allocatable: usize,
        /// VFs its pods hold (the asking pod's kept ones included).
        held: usize,
        /// New VFs the pod wants.
        wanted: usize,
    },
    /// A quantity in the node's `status.allocatable` for a VF resource is not a whole number.
    #[error(
        "node {node}: status.allocatable {resource}: {quantity:?} is not a whole number of VFs"
    )]
    Unreadable {
        /// The node.
        node: String,
        /// The resource.
        resource: String,
        /// Its quantity.
        quantity: String,
    },
    /// The pod wants VFs and is not scheduled to a node yet.
    #[error("the pod wants {wanted} VFs on physnet {physnet} and is not scheduled to a node yet")]
    Unscheduled {
        /// A physnet it wants VFs on.
        physnet: String,
        /// How many.
        wanted: usize,
    },
}

fn free(allocatable: &usize, held: &usize) -> usize {
    allocatable.saturating_sub(*held)
}

fn listed(resources: &[String]) -> String {
    if resources.is_empty() {
        "no resource maps to it".to_owned()
    } else {
        resources.join(", ")
    }
}

/// The physnet whose VF `target` is, if it is one.
fn physnet(target: &Target) -> Option<&str> {
    match target {
        Target::Physnet { physnet } => Some(physnet),
        _ => None,
    }
}

/// VFs per physnet among `vifs`.
pub fn held<'a>(vifs: impl IntoIterator<Item = &'a Vif>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for vif in vifs {
        if let Some(p) = physnet(&vif.target) {
            *out.entry(p.to_owned()).or_insert(0) += 1;
        }
    }
    out
}

/// New VFs per physnet among `allocations`.
pub fn wanted(allocations: &[Allocation]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for a in allocations {
        if let Some(p) = physnet(&a.request.target) {
            *out.entry(p.to_owned()).or_insert(0) += 1;
        }
    }
    out
}

/// A quantity as a whole number of VFs (Kubernetes writes extended resources as integers).
fn whole(quantity: &str) -> Option<usize> {
    let text = quantity.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The VFs `node` advertises on `physnet` under `config`.
///
/// # Errors
/// [`VfShortage::Unreadable`] when a quantity of a resource mapping to `physnet` is not a whole
/// number.
pub fn advertised(node: &Node, config: &Config, physnet: &str) -> Result<PhysnetVfs, VfShortage> {
    let mut out = PhysnetVfs::default();
    let opaque = format!("{OPAQUE_SRIOV_PREFIX}{physnet}");
    let mapped = config
        .sriov_resources
        .iter()
        .filter(|(_, p)| p.as_str() == physnet)
        .map(|(resource, _)| resource.clone());
    for resource in mapped.chain(std::iter::once(opaque.clone())) {
        match node.allocatable.get(&resource) {
            Some(quantity) => {
                let count = whole(quantity).ok_or_else(|| VfShortage::Unreadable {
                    node: node.name.clone(),
                    resource: resource.clone(),
                    quantity: quantity.clone(),
                })?;
                out.allocatable = out.allocatable.saturating_add(count);
                out.resources.push(resource);
            }
            None if resource != opaque => out.resources.push(resource),
            None => {}
        }
    }
    Ok(out)
}

/// Whether the VFs `allocate` asks for fit on `node` (`None`: the pod is not scheduled)
/// beside `held_on_node`, the VIFs recorded on the node's pods (the asking pod's kept VIFs
/// included, its allocations not). An update allocating no VF always fits.
///
/// # Errors
/// The first physnet (by name) that is short, a quantity that does not read, or no node.
pub fn check<'a>(
    node: Option<&Node>,
    config: &Config,
    held_on_node: impl IntoIterator<Item = &'a Vif>,
    allocate: &[Allocation],
) -> Result<(), VfShortage> {
    let wanted = wanted(allocate);
    let Some((first, &count)) = wanted.iter().next() else {
        return Ok(());
    };
    let Some(node) = node else {
        return Err(VfShortage::Unscheduled {
            physnet: first.clone(),
            wanted: count,
        });
    };
    let held = held(held_on_node);
    for (physnet, &want) in &wanted {
        let vfs = advertised(node, config, physnet)?;
        let taken = held.get(physnet).copied().unwrap_or(0);
        if taken.saturating_add(want) > vfs.allocatable {
            return Err(VfShortage::NotEnough {
                node: node.name.clone(),
                physnet: physnet.clone(),
                resources: vfs.resources,
                allocatable: vfs.allocatable,
                held: taken,
                wanted: want,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "vfs/tests.rs"]
mod tests;
