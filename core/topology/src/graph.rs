//! The topology graph: NF instances and network instances as the nodes of one undirected
//! petgraph graph, an edge for each attachment (`nfInterfaces[]`). Two NF instances are
//! neighbours when they attach to the same network instance; an instance is never its own
//! neighbour, however many interfaces it has on a network.
//!
//! The graph is built once per topology; neighbour lists are computed eagerly so that the planner
//! and the deployed-topology builder ask for them in O(1).

use std::collections::HashMap;

use petgraph::graph::{NodeIndex, UnGraph};

use crate::api::{NFInstance, NFTopologySpec};
use crate::error::TopologyError;

/// A node of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyNode {
    /// An NF instance, by its position in `spec.nfInstances`.
    NfInstance(usize),
    /// A network instance, by name.
    NetworkInstance(String),
}

/// NF instances and network instances, and who is attached to what.
#[derive(Debug, Clone)]
pub struct TopologyGraph {
    graph: UnGraph<TopologyNode, ()>,
    instance_nodes: Vec<NodeIndex>,
    by_name: HashMap<String, usize>,
    neighbours: Vec<Vec<usize>>,
}

impl TopologyGraph {
    /// Builds the graph of `spec`. `topology` names the topology in errors. Refuses unnamed and
    /// duplicate instance names.
    pub fn build(topology: &str, spec: &NFTopologySpec) -> Result<Self, TopologyError> {
        let mut graph = UnGraph::with_capacity(spec.nf_instances.len() * 2, 0);
        let mut instance_nodes = Vec::with_capacity(spec.nf_instances.len());
        let mut by_name = HashMap::with_capacity(spec.nf_instances.len());
        let mut networks: HashMap<&str, NodeIndex> = HashMap::new();
        for (index, instance) in spec.nf_instances.iter().enumerate() {
            if instance.name.is_empty() {
                return Err(TopologyError::UnnamedInstance {
                    topology: topology.to_owned(),
                    index,
                });
            }
            if by_name.insert(instance.name.clone(), index).is_some() {
                return Err(TopologyError::DuplicateInstance {
                    topology: topology.to_owned(),
                    name: instance.name.clone(),
                });
            }
            let node = graph.add_node(TopologyNode::NfInstance(index));
            instance_nodes.push(node);
            for interface in &instance.nf_template.nf_interfaces {
                let network = *networks
                    .entry(interface.network_instance_name.as_str())
                    .or_insert_with(|| {
                        graph.add_node(TopologyNode::NetworkInstance(
                            interface.network_instance_name.clone(),
                        ))
                    });
                graph.add_edge(node, network, ());
            }
        }
        let mut neighbours = vec![Vec::new(); instance_nodes.len()];
        for (index, node) in instance_nodes.iter().enumerate() {
            let mut found: Vec<usize> = graph
                .neighbors(*node)
                .flat_map(|network| graph.neighbors(network))
                .filter_map(|peer| match graph[peer] {
                    TopologyNode::NfInstance(other) if other != index => Some(other),
                    _ => None,
                })
                .collect();
            found.sort_unstable();
            found.dedup();
            neighbours[index] = found;
        }
        Ok(TopologyGraph {
            graph,
            instance_nodes,
            by_name,
            neighbours,
        })
    }

    /// How many NF instances.
    pub fn instance_count(&self) -> usize {
        self.instance_nodes.len()
    }

    /// How many network instances.
    pub fn network_count(&self) -> usize {
        self.graph.node_count() - self.instance_nodes.len()
    }

    /// The position of the instance named `name`.
    pub fn instance_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The neighbours of instance `index` (positions, ascending, never `index`).
    pub fn neighbours(&self, index: usize) -> &[usize] {
        self.neighbours.get(index).map_or(&[], Vec::as_slice)
    }

    /// The network instances instance `index` attaches to, sorted, without duplicates.
    pub fn networks_of(&self, index: usize) -> Vec<&str> {
        let Some(node) = self.instance_nodes.get(index) else {
            return Vec::new();
        };
        let mut names: Vec<&str> = self
            .graph
            .neighbors(*node)
            .filter_map(|n| match &self.graph[n] {
                TopologyNode::NetworkInstance(name) => Some(name.as_str()),
                TopologyNode::NfInstance(_) => None,
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Whether instances `a` and `b` are neighbours.
    pub fn connected(&self, a: usize, b: usize) -> bool {
        self.neighbours(a).binary_search(&b).is_ok()
    }
}

/// The neighbours of `instance` by name, in `spec` (a convenience for callers without a graph).
pub fn neighbour_names<'a>(
    spec: &'a NFTopologySpec,
    graph: &TopologyGraph,
    instance: &NFInstance,
) -> Vec<&'a str> {
    graph
        .instance_index(&instance.name)
        .map(|index| {
            graph
                .neighbours(index)
                .iter()
                .map(|&n| spec.nf_instances[n].name.as_str())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
