//! Nimbess's network model, pure: networks keyed by meta key, meta
//! pipelines, ports split into ingress and egress halves, per-port
//! pipelines copied from the meta pipeline, FIBs, and render plans.
//!
//! Every change of the [`Model`] (add or remove a port, record what the
//! data plane returned, change a meta pipeline, change ACL rules, replace
//! the networks) returns a [`RenderPlan`]: the difference a driver applies.
//! Modules and pipelines are derived from the model's inputs ([`Model::rendered`]),
//! so a plan is always the difference between two derivations and the
//! invariants ([`violations`]) hold by construction and are checked by tests.
//!
//! The crate knows nothing of netlink, gRPC or files; [`Ipam`] is a pure
//! allocator the agent persists; [`forward`] runs synthetic frames through
//! the pipelines (the `sim` driver and the kernel driver's oracle).
//!
//! The northbound functions sit beside it: Services' load balancers,
//! NetworkPolicy ACLs, AdminNetworkPolicy and BaselineAdminNetworkPolicy
//! tiers ([`decide_connection`], [`translate_tiers`]), the isolation between
//! pod networks, and [`explain`], which says why a connection is allowed,
//! denied, refused or unrouted and which rule decides.

mod addr;
mod admin;
mod build;
mod connect;
mod egress;
mod explain;
mod fabric;
mod family;
mod forward;
mod invariant;
mod ipam;
mod isolation;
mod model;
mod module;
mod network;
mod placement;
mod plan;
mod policy;
mod print;
mod service;
mod tiers;
mod verdict;

pub use addr::{Ipv4Cidr, Mac};
pub use admin::{
    AdminAction, AdminNetworkPolicy, AdminPort, AdminRule, BASELINE_NAME, BaselineAction,
    BaselineAdminNetworkPolicy, MAX_ADMIN_PRIORITY, MAX_ADMIN_RULES, PodSet, ports_cover,
};
pub use build::{Rendered, egress_gate};
pub use connect::{Outcome, connect, connect_tiered};
pub use egress::{DEFAULT_SERVICE_CIDR, Egress, Egress6Policy, EgressPolicy, Masquerade};
pub use explain::{
    ClusterView, ConnectionEnd, ExplainQuery, Explanation, PathVerdict, PodAt, Reason, Route,
    ServiceHop, Verdict, explain,
};
pub use fabric::{
    EffectiveNetworks, VXLAN_OVERHEAD, effective_networks, port_mtu, same_remote_port,
};
pub use family::{AddressFamily, IpCidr, Ipv6Cidr, dual_stack, lowest_free_v6, mirror_v6};
pub use forward::{Counters, Frame, Payload, Trace, count, forward};
pub use invariant::{Violation, reachable, violations};
pub use ipam::{Ipam, Owner, Pool, Pool6};
pub use isolation::{Path, connection_allowed, ingress_admits, tiered_connection_allowed};
pub use model::{Model, Network, PortRequest};
pub use module::{
    Gate, Module, ModuleId, ModuleKind, Pipeline, PodName, Port, PortId, RemoteHost, RenderFacts,
    copy_id, egress_id, ingress_id, port_id,
};
pub use network::{
    AclAction, AclProtocol, AclRule, DEFAULT_MTU, Egress6, MetaFunction, MetaModule, MetaPipeline,
    NetworkKind, NetworkSpec, acl_verdict,
};
pub use placement::{cluster_load_balancers, load_balancer_name, place_load_balancers};
pub use plan::{AclChange, FibEntry, FibKey, ModuleUpdate, RenderPlan, diff, fib_entries};
pub use policy::{
    AclEntry, AclEntry6, NamedPort, NetworkPolicy, Peer, PodAcl, PodAcl6, PolicyNamespace,
    PolicyPod, PolicyRule, PortRange, Requirement, RulePort, Selector, SelectorOp, acl_allows,
    acl_allows6, translate_policies, translate_policies6,
};
pub use print::{pipeline_dot, pipeline_text};
pub use service::{
    Affinity, Backend, Endpoint, EndpointPort, LoadBalancer, LoadBalancerDiff, LoadBalancerKey,
    Protocol, Service, ServiceFamily, ServicePort, ServiceWarning, TargetPort, diff_load_balancers,
    load_balancers,
};
pub use tiers::{
    PodTiers, TierEntry, TierOutcome, Tiers, tiers_admit, tiers_allow, translate_tiers,
};
pub use verdict::{
    ConnectionVerdict, Decider, Direction, PolicySet, RuleRef, SideVerdict, decide_connection,
    decide_side,
};

/// What went wrong in the model, naming the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A MAC address that does not parse.
    #[error("invalid MAC address {0:?}: expected six hex bytes separated by ':'")]
    InvalidMac(String),
    /// A prefix that does not parse.
    #[error("invalid IPv4 prefix {0:?}: expected A.B.C.D/N with N ≤ 32")]
    InvalidCidr(String),
    /// An IPv6 prefix that does not parse.
    #[error("invalid IPv6 prefix {0:?}: expected an IPv6 address /N with N ≤ 128")]
    InvalidIpv6Cidr(String),
    /// A network declaration that is not acceptable.
    #[error("network {network}: {why}")]
    InvalidNetwork {
        /// The network.
        network: String,
        /// The problem.
        why: String,
    },
    /// A meta pipeline that is not acceptable.
    #[error("meta pipeline {key}: {why}")]
    InvalidMetaPipeline {
        /// The meta key.
        key: String,
        /// The problem.
        why: String,
    },
    /// No network with that meta key.
    #[error("unknown network {0:?}")]
    UnknownNetwork(String),
    /// No port with that id.
    #[error("unknown port {0:?}")]
    UnknownPort(String),
    /// The port exists already.
    #[error("port {port} exists already on network {network}")]
    PortExists {
        /// The port.
        port: String,
        /// The network it is on.
        network: String,
    },
    /// An address a port cannot have.
    #[error("address {address} on network {network}: {why}")]
    InvalidAddress {
        /// The address.
        address: String,
        /// The network.
        network: String,
        /// The problem.
        why: String,
    },
    /// A network still has ports.
    #[error("network {0:?} still has ports")]
    NetworkInUse(String),
    /// No free address left.
    #[error("no free address left on network {0:?}")]
    PoolExhausted(String),
    /// An AdminNetworkPolicy or BaselineAdminNetworkPolicy the API would
    /// refuse.
    #[error("{kind} {policy}: {why}")]
    InvalidAdminPolicy {
        /// `AdminNetworkPolicy` or `BaselineAdminNetworkPolicy`.
        kind: String,
        /// The policy's name.
        policy: String,
        /// The problem, naming the field.
        why: String,
    },
    /// A source or destination that is neither an address nor
    /// `namespace/name`.
    #[error("invalid endpoint {0:?}: expected an IPv4 address, namespace/name or name")]
    InvalidEndpoint(String),
    /// No pod by that name or address.
    #[error("no pod {0}")]
    UnknownPod(String),
    /// A pod whose network is not known.
    #[error("pod {0}: its network is not known")]
    UnknownPodNetwork(String),
    /// The Service CIDR overlaps a pod network.
    #[error(
        "service CIDR {service_cidr} overlaps network {network} ({subnet}): choose a Service CIDR outside every pod network"
    )]
    ServiceCidrOverlap {
        /// The Service CIDR.
        service_cidr: String,
        /// The network.
        network: String,
        /// Its subnet.
        subnet: String,
    },
}
