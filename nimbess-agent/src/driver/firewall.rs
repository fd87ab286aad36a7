//! The firewall seam: everything a data plane filters, translates or marks,
//! behind one trait, apart from the links, bridges and routes a [`Driver`]
//! keeps.
//!
//! Four things make the firewall, each rendered whole from the model's
//! modules and read back as drift:
//!
//! - **Services**: the load-balancer modules (DNAT of a VIP and port to one
//!   of its backends, refusal without one);
//! - **policies**: every pod's tiers of policy (AdminNetworkPolicies,
//!   NetworkPolicies, BaselineAdminNetworkPolicy: [`PodPolicies`]);
//! - **egress**: the pod networks' isolation through the host and the
//!   masquerade of what leaves them ([`EgressPolicy`]);
//! - **ACLs**: a network's own ACL module on each of its ports.
//!
//! The kernel driver renders them as nftables tables
//! ([`super::kernel::firewall::NftFirewall`]), the simulation holds them for
//! its synthetic connections ([`super::sim::SimFirewall`]). A driver owns its
//! firewall and calls it for what a render plan needs (a port's ACL, the
//! networks' egress); the agent reaches it through
//! [`Driver::firewall_mut`] for Services and policies.
//!
//! [`Driver`]: super::Driver
//! [`Driver::firewall_mut`]: super::Driver::firewall_mut

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use nephrite_pipeline::{
    AclRule, EgressPolicy, LoadBalancer, LoadBalancerKey, NetworkSpec, PodTiers, PortId,
};

use super::DriverError;

/// The Services' load-balancer modules, by Service port.
pub type Services = BTreeMap<LoadBalancerKey, LoadBalancer>;

/// The Services' IPv6 load-balancer modules, by Service port.
pub type Services6 = BTreeMap<LoadBalancerKey, LoadBalancer<Ipv6Addr>>;

/// Every pod's tiers of policy, by pod address
/// ([`nephrite_pipeline::translate_tiers`]; a pod absent is open).
pub type PodPolicies = BTreeMap<Ipv4Addr, PodTiers>;

/// Every pod's IPv6 NetworkPolicy ACLs, by the pod's IPv6 address
/// ([`nephrite_pipeline::translate_policies6`]; a pod absent is open).
pub type PodPolicies6 = BTreeMap<Ipv6Addr, nephrite_pipeline::PodAcl6>;

/// A data plane's firewall. Every `apply_*` renders the whole set it is
/// given (an implementation may render only the difference from what it
/// rendered before); every `verify_*` names, one line each, how the data
/// plane differs from that set, and the next `apply_*` of the same set
/// repairs it.
pub trait Firewall: std::fmt::Debug + Send {
    /// The firewall's name (`nftables`, `sim`).
    fn name(&self) -> &'static str;

    /// Render `services` (the whole set as it is now).
    ///
    /// # Errors
    /// The data plane refused them (what was rendered before stays).
    fn apply_services(&mut self, services: &Services) -> Result<(), DriverError>;

    /// Drift between `services` and what the data plane holds.
    fn verify_services(&mut self, services: &Services) -> Vec<String>;

    /// Render the IPv6 `services` (the whole set as it is now).
    ///
    /// # Errors
    /// The data plane refused them (what was rendered before stays).
    fn apply_services6(&mut self, services: &Services6) -> Result<(), DriverError>;

    /// Drift between the IPv6 `services` and what the data plane holds.
    fn verify_services6(&mut self, services: &Services6) -> Vec<String>;

    /// Render every pod's tiers of policy `tiers` (the whole set).
    ///
    /// # Errors
    /// The data plane refused them (the previous ones stay).
    fn apply_policies(&mut self, tiers: &PodPolicies) -> Result<(), DriverError>;

    /// Drift between `tiers` and what the data plane holds.
    fn verify_policies(&self, tiers: &PodPolicies) -> Vec<String>;

    /// Render every pod's IPv6 NetworkPolicy ACLs `acls` (the whole set).
    ///
    /// # Errors
    /// The data plane refused them (the previous ones stay).
    fn apply_policies6(&mut self, acls: &PodPolicies6) -> Result<(), DriverError>;

    /// Drift between the IPv6 `acls` and what the data plane holds.
    fn verify_policies6(&self, acls: &PodPolicies6) -> Vec<String>;

    /// Render the isolation and masquerade `policy` says for `networks`.
    ///
    /// # Errors
    /// The data plane refused them.
    fn apply_egress(
        &mut self,
        policy: &EgressPolicy,
        networks: &[NetworkSpec],
    ) -> Result<(), DriverError>;

    /// Drift between what `policy` says for `networks` and the data plane.
    fn verify_egress(&self, policy: &EgressPolicy, networks: &[NetworkSpec]) -> Vec<String>;

    /// Replace the ACL of `port` with `rules` (none: the port has no ACL).
    /// The port's interface exists.
    ///
    /// # Errors
    /// The data plane refused the rules.
    fn apply_acl(&mut self, port: &PortId, rules: &[AclRule]) -> Result<(), DriverError>;

    /// Remove the ACL of `port`, if it has one.
    ///
    /// # Errors
    /// The data plane refused.
    fn remove_acl(&mut self, port: &PortId) -> Result<(), DriverError>;

    /// Drift between `rules` and the ACL the data plane holds for `port`.
    ///
    /// # Errors
    /// The data plane cannot be read.
    fn verify_acl(&self, port: &PortId, rules: &[AclRule]) -> Result<Vec<String>, DriverError>;
}
