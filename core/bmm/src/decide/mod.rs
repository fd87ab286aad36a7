//! The reconcile decisions: pure functions from (spec, observed cloud objects, observed
//! Kubernetes state) to the actions to take and the status to write.
//!
//! A controller (or standalone mode) observes, calls [`decide_cluster`] / [`decide_machine`],
//! performs the returned actions in order, feeds what the actions created back into the
//! observation and decides again until no action is left; then it writes the status and waits
//! as [`Wait`] says. The decisions only create what the observation shows is missing, so any
//! number of repetitions — after a crash, a retry, a restart — creates nothing twice.

pub mod cloud_node;
mod cluster;
mod machine;
mod poll;

pub use cloud_node::{INSTANCE_TYPE_LABEL, REGION_LABEL, ZONE_LABEL};
pub use cluster::{
    ClusterAction, ClusterContext, ClusterDecision, ClusterObservation, EndpointSource,
    IpBlockCreate, NsgCreate, NsgRuleCreate, SubnetCreate, VpcCreate, decide_cluster,
    ip_block_name,
};
pub use machine::{
    Bootstrap, ClusterView, InstanceCreate, InterfaceCreate, MachineAction, MachineContext,
    MachineDecision, decide_machine, instance_addresses,
};
pub use poll::{ProvisioningSamples, poll_after, poll_expecting};

/// What the caller should do after performing the actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Nothing is in progress: reconcile again only when something changes.
    Steady,
    /// Cloud objects are on their way (provisioning, deleting): poll.
    Poll,
    /// Waiting for another Kubernetes object (cluster infrastructure, bootstrap data): poll
    /// slowly or wait for its event.
    Dependency,
    /// A terminal problem (name conflict, invalid reference, error state): do not retry until
    /// the spec or the conflicting object changes.
    Blocked,
}

impl Wait {
    /// The more urgent of two waits (Poll before Dependency before Steady before Blocked).
    pub fn most_urgent(self, other: Wait) -> Wait {
        fn rank(w: Wait) -> u8 {
            match w {
                Wait::Poll => 0,
                Wait::Dependency => 1,
                Wait::Steady => 2,
                Wait::Blocked => 3,
            }
        }
        if rank(other) < rank(self) {
            other
        } else {
            self
        }
    }
}
