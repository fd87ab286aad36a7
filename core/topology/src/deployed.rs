//! The deployed-topology builder: which variants of a [`Plan`] are published, and the
//! [`NFDeployedTopologySpec`] that follows from them.
//!
//! It is updated one event at a time: [`DeployedTopologyBuilder::publish`] and
//! [`DeployedTopologyBuilder::remove`] touch only the variant and its neighbours, so the cost of
//! an event depends on the variant's degree, not on the size of the topology. Each event is
//! idempotent: publishing a published variant (or removing an absent one) changes nothing and
//! says so.
//!
//! Connectivities list published neighbours only, by deployed id, sorted and without
//! duplicates; a deployed instance is never its own neighbour.

use std::collections::BTreeMap;

use crate::api::{NFConnectivity, NFDeployedInstance, NFDeployedTopology, NFDeployedTopologySpec};
use crate::plan::Plan;

/// The published part of a plan.
#[derive(Debug, Clone)]
pub struct DeployedTopologyBuilder<'p> {
    plan: &'p Plan,
    published: Vec<bool>,
    instances: BTreeMap<String, NFDeployedInstance>,
}

/// What an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The deployed topology changed.
    Changed,
    /// It was already so.
    Unchanged,
    /// The id is not a variant of the plan (e.g. a package the topology no longer wants).
    Unknown,
}

impl<'p> DeployedTopologyBuilder<'p> {
    /// Nothing published yet.
    pub fn new(plan: &'p Plan) -> Self {
        DeployedTopologyBuilder {
            plan,
            published: vec![false; plan.variants().len()],
            instances: BTreeMap::new(),
        }
    }

    /// Everything published (what `ntc plan` shows as the expected end state).
    pub fn all_published(plan: &'p Plan) -> Self {
        let mut builder = DeployedTopologyBuilder::new(plan);
        for v in 0..plan.variants().len() {
            builder.publish_variant(v);
        }
        builder
    }

    /// Whether variant `v` is published.
    pub fn is_published(&self, v: usize) -> bool {
        self.published.get(v).copied().unwrap_or(false)
    }

    /// How many variants are published.
    pub fn published_count(&self) -> usize {
        self.instances.len()
    }

    /// Marks the variant with deployed id `id` published.
    pub fn publish(&mut self, id: &str) -> Change {
        match self.plan.variant_by_id(id) {
            Some(v) => self.publish_variant(v),
            None => Change::Unknown,
        }
    }

    /// Marks the variant with deployed id `id` no longer published (deleted, or moved out of
    /// Published).
    pub fn remove(&mut self, id: &str) -> Change {
        match self.plan.variant_by_id(id) {
            Some(v) => self.remove_variant(v),
            None => Change::Unknown,
        }
    }

    /// [`Self::publish`] by position.
    pub fn publish_variant(&mut self, v: usize) -> Change {
        if v >= self.published.len() {
            return Change::Unknown;
        }
        if self.published[v] {
            return Change::Unchanged;
        }
        self.published[v] = true;
        let plan = self.plan;
        let variant = &plan.variants()[v];
        let instance = &plan.instances()[variant.instance];
        let mut connectivities = Vec::new();
        for n in plan.neighbours(v) {
            if !self.published[n] {
                continue;
            }
            let neighbour_id = &plan.variants()[n].id;
            connectivities.push(NFConnectivity {
                neighbor_name: neighbour_id.clone(),
            });
            if let Some(other) = self.instances.get_mut(neighbour_id) {
                insert_sorted(&mut other.connectivities, &variant.id);
            }
        }
        connectivities.sort();
        connectivities.dedup();
        self.instances.insert(
            variant.id.clone(),
            NFDeployedInstance {
                id: variant.id.clone(),
                nf_instance_name: instance.name.clone(),
                cluster_name: variant.cluster.clone(),
                nf_type: instance.nf_type.to_string(),
                nf_flavor: instance.class.flavor.clone().unwrap_or_default(),
                nf_vendor: instance.class.vendor.clone(),
                nf_version: instance.class.version.clone(),
                connectivities,
            },
        );
        Change::Changed
    }

    /// [`Self::remove`] by position.
    pub fn remove_variant(&mut self, v: usize) -> Change {
        if v >= self.published.len() {
            return Change::Unknown;
        }
        if !self.published[v] {
            return Change::Unchanged;
        }
        self.published[v] = false;
        let plan = self.plan;
        let id = &plan.variants()[v].id;
        self.instances.remove(id);
        for n in plan.neighbours(v) {
            if let Some(other) = self.instances.get_mut(&plan.variants()[n].id) {
                remove_sorted(&mut other.connectivities, id);
            }
        }
        Change::Changed
    }

    /// The deployed instance `id`, if published.
    pub fn instance(&self, id: &str) -> Option<&NFDeployedInstance> {
        self.instances.get(id)
    }

    /// The published instances, by id.
    pub fn spec(&self) -> NFDeployedTopologySpec {
        NFDeployedTopologySpec {
            nf_instances: self.instances.values().cloned().collect(),
        }
    }

    /// The `NFDeployedTopology` resource, named after the topology.
    pub fn resource(&self) -> NFDeployedTopology {
        NFDeployedTopology::new(self.plan.topology(), self.spec())
    }
}

fn insert_sorted(list: &mut Vec<NFConnectivity>, id: &str) {
    if let Err(at) = list.binary_search_by(|c| c.neighbor_name.as_str().cmp(id)) {
        list.insert(
            at,
            NFConnectivity {
                neighbor_name: id.to_owned(),
            },
        );
    }
}

fn remove_sorted(list: &mut Vec<NFConnectivity>, id: &str) {
    if let Ok(at) = list.binary_search_by(|c| c.neighbor_name.as_str().cmp(id)) {
        list.remove(at);
    }
}

#[cfg(test)]
mod tests;
