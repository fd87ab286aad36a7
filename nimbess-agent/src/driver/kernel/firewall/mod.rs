//! The kernel driver's firewall: nftables, one table per concern, each
//! module rendering one and reading it back; none imports another, what
//! they share has a module of its own.
//!
//! | module | table | encoding |
//! |---|---|---|
//! | [`acl`] | `netdev` per host veth | netlink batch (`netlink`) |
//! | [`egress`] | `ip nimbess`, `ip6 nimbess` (IPv6 masquerade) | netlink batch |
//! | [`services`] | `ip nimbess-svc`, `ip6 nimbess-svc` | netlink batch (a full render, or the Service ports that changed) |
//! | [`policy`] | `ip nimbess-policy`, `ip6 nimbess-policy` | netlink batch |
//!
//! Shared: [`nftables`] (every name and number, once), `netlink` (the
//! nf_tables netlink codec: batches out, dumps back), `expr` (tables,
//! chains, sets, elements, rules and their expressions). One encoding for
//! every table: the agent runs no `nft` process, and drift is read with
//! netlink dumps too.

use nephrite_pipeline::{AclRule, EgressPolicy, NetworkKind, NetworkSpec, PortId};

use crate::driver::DriverError;
use std::collections::BTreeMap;

use nephrite_pipeline::{LoadBalancer, LoadBalancerKey};

use crate::driver::firewall::{Firewall, PodPolicies, PodPolicies6, Services, Services6};
use crate::naming::{bridge_name, host_veth_name};

pub mod acl;
pub mod egress;
mod expr;
mod netlink;
pub mod nftables;
pub mod policy;
pub mod services;

/// nftables as the kernel driver's firewall.
#[derive(Debug, Default)]
pub struct NftFirewall {
    /// The Services rendered (`None`: not since start, or a render failed
    /// or drifted: the next render replaces the table).
    services: Option<Services>,
    /// The IPv6 Services rendered, likewise.
    services6: Option<Services6>,
}

/// Render `lbs` in the family's Services table, from `rendered` (what the
/// last render left, `None`: unknown): the whole table the first time since
/// start and after a failure or drift, then only what changed. A diff the
/// kernel refuses is followed at once by the whole table: the diff assumes
/// the table the last render left, which something else in the network
/// namespace may have changed (another agent sharing it deletes the table
/// when it has no Service, and the diff then adds to a table that is gone:
/// `No such file or directory`).
fn apply_family<A: services::NatFamily>(
    rendered: &mut Option<BTreeMap<LoadBalancerKey, LoadBalancer<A>>>,
    lbs: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> Result<(), DriverError> {
    let applied = match rendered.as_ref() {
        Some(old) if !old.is_empty() && !lbs.is_empty() => {
            services::apply_diff(old, lbs).or_else(|e| {
                tracing::warn!(
                    error = %e,
                    "the Services' diff was refused; rendering table {} {} whole",
                    A::KEYWORD,
                    nftables::SERVICES_TABLE
                );
                services::render(lbs)
            })
        }
        Some(old) if old.is_empty() && lbs.is_empty() => Ok(()),
        _ => services::render(lbs),
    };
    if let Err(e) = applied {
        // part of a diff may have landed: the next render replaces the table
        *rendered = None;
        return Err(e);
    }
    *rendered = Some(lbs.clone());
    Ok(())
}

impl NftFirewall {
    /// The firewall, with nothing rendered yet.
    pub fn new() -> Self {
        NftFirewall::default()
    }
}

impl Firewall for NftFirewall {
    fn name(&self) -> &'static str {
        "nftables"
    }

    /// Renders the IPv4 Services (`apply_family`).
    fn apply_services(&mut self, lbs: &Services) -> Result<(), DriverError> {
        apply_family(&mut self.services, lbs)
    }

    fn apply_services6(&mut self, lbs: &Services6) -> Result<(), DriverError> {
        apply_family(&mut self.services6, lbs)
    }

    fn verify_services6(&mut self, lbs: &Services6) -> Vec<String> {
        let drift = services::verify(lbs);
        if !drift.is_empty() {
            self.services6 = None;
        }
        drift
    }

    fn verify_services(&mut self, lbs: &Services) -> Vec<String> {
        let drift = services::verify(lbs);
        if !drift.is_empty() {
            self.services = None;
        }
        drift
    }

    /// The table is replaced whole.
    fn apply_policies(&mut self, tiers: &PodPolicies) -> Result<(), DriverError> {
        policy::render_tiers(tiers)
    }

    fn verify_policies(&self, tiers: &PodPolicies) -> Vec<String> {
        policy::verify_tiers(tiers)
    }

    /// The `ip6` table is replaced whole.
    fn apply_policies6(&mut self, acls: &PodPolicies6) -> Result<(), DriverError> {
        policy::render6(acls)
    }

    fn verify_policies6(&self, acls: &PodPolicies6) -> Vec<String> {
        policy::verify6(acls)
    }

    fn apply_egress(
        &mut self,
        policy: &EgressPolicy,
        networks: &[NetworkSpec],
    ) -> Result<(), DriverError> {
        let (bridges, routed) = egress_sources(networks);
        egress::render(policy, &bridges, &routed)?;
        let bridges6: Vec<String> = networks
            .iter()
            .filter(|s| s.kind == NetworkKind::L2 && s.subnet6.is_some())
            .map(|s| bridge_name(&s.name))
            .collect();
        egress::render6(&nephrite_pipeline::Egress6Policy::new(networks), &bridges6)
    }

    fn verify_egress(&self, policy: &EgressPolicy, networks: &[NetworkSpec]) -> Vec<String> {
        let mut drift = egress::verify(policy);
        drift.extend(egress::verify6(&nephrite_pipeline::Egress6Policy::new(
            networks,
        )));
        drift
    }

    fn apply_acl(&mut self, port: &PortId, rules: &[AclRule]) -> Result<(), DriverError> {
        acl::render(&host_veth_name(port), rules)
    }

    fn remove_acl(&mut self, port: &PortId) -> Result<(), DriverError> {
        acl::remove(&host_veth_name(port))
    }

    fn verify_acl(&self, port: &PortId, rules: &[AclRule]) -> Result<Vec<String>, DriverError> {
        let host = host_veth_name(port);
        let have = acl::rendered_rules(&host)?;
        Ok(if have == rules.len() {
            Vec::new()
        } else {
            vec![format!(
                "port {port}: {have} ACL rules on {host}, the model has {}",
                rules.len()
            )]
        })
    }
}

/// The egress table's sources: the L2 networks' bridges and the routed
/// (L3) networks' subnets.
fn egress_sources(networks: &[NetworkSpec]) -> (Vec<String>, Vec<nephrite_pipeline::Ipv4Cidr>) {
    let bridges = networks
        .iter()
        .filter(|s| s.kind == NetworkKind::L2)
        .map(|s| bridge_name(&s.name))
        .collect();
    let routed = networks
        .iter()
        .filter(|s| s.kind == NetworkKind::L3)
        .map(|s| s.subnet.with_addr(s.subnet.network()))
        .collect();
    (bridges, routed)
}

#[cfg(test)]
mod tests {
    /// Each table's module, with its source.
    const TABLES: [(&str, &str); 6] = [
        ("acl", include_str!("acl.rs")),
        ("egress", include_str!("egress.rs")),
        ("policy", include_str!("policy.rs")),
        ("services", include_str!("services.rs")),
        ("backends", include_str!("services/backends.rs")),
        ("drift", include_str!("services/drift.rs")),
    ];

    #[test]
    fn no_tables_module_names_another() {
        let siblings = ["acl", "egress", "policy", "services"];
        for (module, source) in TABLES {
            for sibling in siblings.iter().filter(|s| **s != module) {
                // `services/backends.rs` and `services/drift.rs` are part of `services`
                if matches!(module, "backends" | "drift") && *sibling == "services" {
                    continue;
                }
                for path in [
                    format!("super::{sibling}"),
                    format!("super::super::{sibling}"),
                    format!("firewall::{sibling}"),
                ] {
                    assert!(
                        !source.contains(&path),
                        "{module} names its sibling {sibling} ({path}): what they share belongs \
                         in nftables.rs, netlink.rs or expr.rs"
                    );
                }
            }
        }
    }
}
