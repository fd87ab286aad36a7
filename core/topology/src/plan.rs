//! The planner: an [`NFTopology`], its [`NFClass`]es and the clusters → one [`Variant`] per
//! (NF instance × cluster its selector matches), each with its deployed id, upstream package,
//! labels, capacity and flavor; plus the rollout gates of each variant under a
//! [`RolloutPolicy`].
//!
//! Planning is a pure function of its inputs and deterministic: clusters are taken in name
//! order whatever order they come in, variants are ordered by instance (as in the topology) and
//! then by cluster.
//!
//! # Deployed ids
//!
//! A variant's id is `<instance>-<cluster>`. Two different pairs can give the same string
//! (`a-b` + `c` and `a` + `b-c`); then every pair sharing that string gets
//! `<instance>-<cluster>-<hash>` instead, `<hash>` eight hex digits of a hash of the pair,
//! so an id depends only on its own pair and on whether another planned pair collides with it.
//!
//! # Neighbours
//!
//! Two variants are neighbours when their NF instances are (they attach to a common network
//! instance), whatever clusters they run on. Variants of the same NF instance are never
//! neighbours of each other: they are copies of one node of the intent.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use indexmap::IndexMap;
use nephrite_krm::keys::NF_DEPLOYMENT_NAME;

use crate::api::{
    CapacitySpec, Cluster, DeletionPolicy, NFClass, NFClassSpec, NFInterface, NFTopology, NfType,
};
use crate::error::TopologyError;
use crate::graph::TopologyGraph;
use crate::policy::RolloutPolicy;

/// Label carrying the NF instance's name on everything fanned out for it.
pub const NF_INSTANCE_LABEL: &str = "topology.nephio.org/nf-instance";
/// Label carrying the NF type.
pub const NF_TYPE_LABEL: &str = "topology.nephio.org/nf-type";

/// What the planner knows about one NF instance.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedInstance {
    /// The instance's name.
    pub name: String,
    /// Its NF type.
    pub nf_type: NfType,
    /// The class's name.
    pub class_name: String,
    /// The class (shared by every instance of the class).
    pub class: Arc<NFClassSpec>,
    /// The capacity profile, if any.
    pub capacity: Option<CapacitySpec>,
    /// Its attachment points.
    pub interfaces: Vec<NFInterface>,
    /// The clusters it is deployed to, sorted.
    pub clusters: Vec<String>,
}

/// One deployed instance to be: an NF instance on one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// The deployed id.
    pub id: String,
    /// Position of its NF instance in [`Plan::instances`].
    pub instance: usize,
    /// The cluster (and its deployment repository).
    pub cluster: String,
}

/// A readiness gate: the condition a gated variant waits on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gate {
    /// `wait-for-<TYPE>-<id>`.
    pub condition_type: String,
    /// Index of the waited-for variant.
    pub waits_for: usize,
}

/// The result of planning one topology.
#[derive(Debug, Clone)]
pub struct Plan {
    topology: String,
    instances: Vec<PlannedInstance>,
    graph: TopologyGraph,
    policy: RolloutPolicy,
    deletion_policy: DeletionPolicy,
    variants: Vec<Variant>,
    by_instance: Vec<Range<usize>>,
    by_id: HashMap<String, usize>,
    unplaced: Vec<String>,
}

/// Plans `topology` over `clusters` with `classes` under `policy`.
///
/// Refuses duplicate or unnamed instances, duplicate clusters, invalid selectors and a template
/// whose class is missing (`class <name> not found (instance <instance>)`). An instance whose
/// selector matches no cluster gets no variant and is listed in [`Plan::unplaced`].
pub fn plan(
    topology: &NFTopology,
    classes: &[NFClass],
    clusters: &[Cluster],
    policy: &RolloutPolicy,
) -> Result<Plan, TopologyError> {
    let name = topology.name();
    let graph = TopologyGraph::build(name, &topology.spec)?;
    let classes: HashMap<&str, Arc<NFClassSpec>> = classes
        .iter()
        .map(|c| (c.name(), Arc::new(c.spec.clone())))
        .collect();

    let mut sorted: Vec<&Cluster> = clusters.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = sorted.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(TopologyError::DuplicateCluster {
            name: pair[0].name.clone(),
        });
    }
    let index = ClusterIndex::new(&sorted);

    let mut instances = Vec::with_capacity(topology.spec.nf_instances.len());
    let mut unplaced = Vec::new();
    for instance in &topology.spec.nf_instances {
        let template = &instance.nf_template;
        let class = classes.get(template.class_name.as_str()).ok_or_else(|| {
            TopologyError::ClassNotFound {
                class: template.class_name.clone(),
                instance: instance.name.clone(),
            }
        })?;
        instance
            .cluster_selector
            .validate()
            .map_err(|e| TopologyError::InvalidSelector {
                instance: instance.name.clone(),
                reason: e.to_string(),
            })?;
        let matching = index.matching(&sorted, &instance.cluster_selector);
        if matching.is_empty() {
            unplaced.push(instance.name.clone());
        }
        instances.push(PlannedInstance {
            name: instance.name.clone(),
            nf_type: template.nf_type.clone(),
            class_name: template.class_name.clone(),
            class: Arc::clone(class),
            capacity: template.capacity.clone(),
            interfaces: template.nf_interfaces.clone(),
            clusters: matching.iter().map(|&c| sorted[c].name.clone()).collect(),
        });
    }

    let mut variants = Vec::new();
    let mut by_instance = Vec::with_capacity(instances.len());
    for (i, instance) in instances.iter().enumerate() {
        let start = variants.len();
        for cluster in &instance.clusters {
            variants.push(Variant {
                id: format!("{}-{}", instance.name, cluster),
                instance: i,
                cluster: cluster.clone(),
            });
        }
        by_instance.push(start..variants.len());
    }
    let by_id = assign_ids(&instances, &mut variants);

    Ok(Plan {
        topology: name.to_owned(),
        instances,
        graph,
        policy: policy.clone(),
        deletion_policy: topology.spec.deletion_policy,
        variants,
        by_instance,
        by_id,
        unplaced,
    })
}

/// Rewrites colliding ids as described in the module docs; returns id → variant.
fn assign_ids(instances: &[PlannedInstance], variants: &mut [Variant]) -> HashMap<String, usize> {
    let mut counts: HashMap<&str, usize> = HashMap::with_capacity(variants.len());
    for v in variants.iter() {
        *counts.entry(v.id.as_str()).or_default() += 1;
    }
    let colliding: Vec<usize> = variants
        .iter()
        .enumerate()
        .filter(|(_, v)| counts.get(v.id.as_str()).is_some_and(|&n| n > 1))
        .map(|(i, _)| i)
        .collect();
    drop(counts);
    let mut by_id: HashMap<String, usize> = HashMap::with_capacity(variants.len());
    for (i, v) in variants.iter().enumerate() {
        if colliding.binary_search(&i).is_err() {
            by_id.insert(v.id.clone(), i);
        }
    }
    for i in colliding {
        let v = &variants[i];
        let instance = &instances[v.instance].name;
        let hash = fnv1a(&[instance.as_bytes(), b"\0", v.cluster.as_bytes()]);
        let mut id = format!("{instance}-{}-{hash:08x}", v.cluster);
        let mut n = 1;
        while by_id.contains_key(&id) {
            n += 1;
            id = format!("{instance}-{}-{hash:08x}-{n}", v.cluster);
        }
        by_id.insert(id.clone(), i);
        variants[i].id = id;
    }
    by_id
}

fn fnv1a(parts: &[&[u8]]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for part in parts {
        for byte in *part {
            hash ^= u32::from(*byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    hash
}

/// Clusters indexed by (label, value), so that a selector with `matchLabels` looks only at the
/// clusters carrying its first label.
struct ClusterIndex<'a> {
    by_label: HashMap<(&'a str, &'a str), Vec<usize>>,
}

impl<'a> ClusterIndex<'a> {
    fn new(clusters: &[&'a Cluster]) -> Self {
        let mut by_label: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
        for (i, cluster) in clusters.iter().enumerate() {
            for (k, v) in &cluster.labels {
                by_label
                    .entry((k.as_str(), v.as_str()))
                    .or_default()
                    .push(i);
            }
        }
        ClusterIndex { by_label }
    }

    fn matching(
        &self,
        clusters: &[&Cluster],
        selector: &nephrite_krm::LabelSelector,
    ) -> Vec<usize> {
        match selector.match_labels.first() {
            Some((k, v)) => self
                .by_label
                .get(&(k.as_str(), v.as_str()))
                .map(|candidates| {
                    candidates
                        .iter()
                        .copied()
                        .filter(|&c| selector.matches(&clusters[c].labels))
                        .collect()
                })
                .unwrap_or_default(),
            None => (0..clusters.len())
                .filter(|&c| selector.matches(&clusters[c].labels))
                .collect(),
        }
    }
}

impl Plan {
    /// The topology's name.
    pub fn topology(&self) -> &str {
        &self.topology
    }

    /// The NF instances, in the topology's order.
    pub fn instances(&self) -> &[PlannedInstance] {
        &self.instances
    }

    /// The topology graph.
    pub fn graph(&self) -> &TopologyGraph {
        &self.graph
    }

    /// The policy the plan was made under.
    pub fn policy(&self) -> &RolloutPolicy {
        &self.policy
    }

    /// What happens to the children of variants the topology no longer wants (the topology's
    /// `spec.deletionPolicy`).
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.deletion_policy
    }

    /// Every variant, by instance then cluster.
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// The variants of instance `instance`.
    pub fn variants_of(&self, instance: usize) -> &[Variant] {
        self.by_instance
            .get(instance)
            .map_or(&[], |r| &self.variants[r.clone()])
    }

    /// Positions of the variants of instance `instance`.
    pub fn variant_range(&self, instance: usize) -> Range<usize> {
        self.by_instance.get(instance).cloned().unwrap_or(0..0)
    }

    /// The variant with deployed id `id`.
    pub fn variant_by_id(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// The variant of the instance named `instance` on `cluster` (a package `instance` in the
    /// repository `cluster`).
    pub fn variant_for(&self, instance: &str, cluster: &str) -> Option<usize> {
        let i = self.graph.instance_index(instance)?;
        let range = self.variant_range(i);
        self.variants[range.clone()]
            .binary_search_by(|v| v.cluster.as_str().cmp(cluster))
            .ok()
            .map(|offset| range.start + offset)
    }

    /// Instances whose selector matched no cluster.
    pub fn unplaced(&self) -> &[String] {
        &self.unplaced
    }

    /// The NF type of variant `v`.
    pub fn nf_type(&self, v: usize) -> &NfType {
        &self.instances[self.variants[v].instance].nf_type
    }

    /// The variants connected to variant `v` (never `v`, never another copy of its instance).
    pub fn neighbours(&self, v: usize) -> impl Iterator<Item = usize> + '_ {
        let instance = self.variants.get(v).map_or(usize::MAX, |x| x.instance);
        self.graph
            .neighbours(instance)
            .iter()
            .flat_map(move |&n| self.variant_range(n))
    }

    /// The gates of variant `v`: one per connected variant of a type `v`'s type waits for,
    /// named `wait-for-<TYPE>-<id>`.
    pub fn gates(&self, v: usize) -> Vec<Gate> {
        let waits = self.policy.waits_for(self.nf_type(v));
        if waits.is_empty() {
            return Vec::new();
        }
        self.neighbours(v)
            .filter_map(|n| {
                let nf_type = self.nf_type(n);
                waits.contains(nf_type).then(|| Gate {
                    condition_type: format!("wait-for-{}-{}", nf_type.upper(), self.variants[n].id),
                    waits_for: n,
                })
            })
            .collect()
    }

    /// Whether variant `v` waits for anything.
    pub fn is_gated(&self, v: usize) -> bool {
        !self.gates(v).is_empty()
    }

    /// The labels every package of instance `instance` carries: `nf-deployment-name`, the
    /// instance and its type.
    pub fn labels(&self, instance: usize) -> IndexMap<String, String> {
        let mut labels = IndexMap::new();
        labels.insert(NF_DEPLOYMENT_NAME.to_owned(), self.topology.clone());
        if let Some(planned) = self.instances.get(instance) {
            labels.insert(NF_INSTANCE_LABEL.to_owned(), planned.name.clone());
            labels.insert(NF_TYPE_LABEL.to_owned(), planned.nf_type.to_string());
        }
        labels
    }

    /// The rollout order of the types present, stage by stage.
    pub fn rollout_order(&self) -> Vec<Vec<NfType>> {
        self.policy
            .stages(self.instances.iter().map(|i| &i.nf_type))
    }

    /// Counts for reports: variants, gates, connectivities (each direction counted).
    pub fn counts(&self) -> PlanCounts {
        let mut counts = PlanCounts {
            instances: self.instances.len(),
            network_instances: self.graph.network_count(),
            variants: self.variants.len(),
            ..PlanCounts::default()
        };
        let mut gated_types: BTreeMap<&NfType, &[NfType]> = BTreeMap::new();
        for instance in &self.instances {
            gated_types.insert(&instance.nf_type, self.policy.waits_for(&instance.nf_type));
        }
        for (v, variant) in self.variants.iter().enumerate() {
            let waits = gated_types
                .get(&self.instances[variant.instance].nf_type)
                .copied()
                .unwrap_or(&[]);
            for n in self.neighbours(v) {
                counts.connectivities += 1;
                if waits.contains(self.nf_type(n)) {
                    counts.gates += 1;
                }
            }
        }
        counts
    }
}

/// Sizes of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanCounts {
    /// NF instances.
    pub instances: usize,
    /// Network instances.
    pub network_instances: usize,
    /// Variants (deployed instances to be).
    pub variants: usize,
    /// Gates over all variants.
    pub gates: usize,
    /// Connectivities over all variants when everything is published.
    pub connectivities: usize,
}

#[cfg(test)]
mod tests;
