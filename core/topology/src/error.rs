//! The crate's error type.

/// What the topology functions refuse, naming the input at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Two NF instances of one topology share a name.
    #[error("duplicate NF instance name {name:?} in topology {topology:?}")]
    DuplicateInstance {
        /// The topology.
        topology: String,
        /// The repeated name.
        name: String,
    },
    /// An NF instance has no name.
    #[error("NF instance #{index} of topology {topology:?} has no name")]
    UnnamedInstance {
        /// The topology.
        topology: String,
        /// Its position in `spec.nfInstances`.
        index: usize,
    },
    /// A template names a class that does not exist.
    #[error("class {class} not found (instance {instance})")]
    ClassNotFound {
        /// The missing class.
        class: String,
        /// The instance that refers to it.
        instance: String,
    },
    /// A cluster selector breaks Kubernetes' rules.
    #[error("instance {instance}: invalid cluster selector: {reason}")]
    InvalidSelector {
        /// The instance.
        instance: String,
        /// What is wrong.
        reason: String,
    },
    /// A rollout rule could not be read.
    #[error("rollout rule {rule:?}: {reason}")]
    InvalidRule {
        /// The rule as given.
        rule: String,
        /// What is wrong.
        reason: String,
    },
    /// The rollout rules wait on each other in a circle.
    #[error("rollout rules form a cycle between NF types {}", types.join(", "))]
    PolicyCycle {
        /// The types on the cycle.
        types: Vec<String>,
    },
    /// Two clusters share a name.
    #[error("duplicate cluster name {name:?}")]
    DuplicateCluster {
        /// The repeated name.
        name: String,
    },
}
