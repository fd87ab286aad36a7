//! The cluster decision: IP block → VPC → subnets → NSG on the way up, NSG → subnets → VPC →
//! IP block on the way down.

use std::collections::BTreeMap;

use nephrite_krm::condition::{remove_condition, set_condition};
use nephrite_krm::{Condition, ConditionStatus};

use super::Wait;
use crate::cidr::{Ipv4Cidr, covering_prefix};
use crate::cloud::{CloudIpBlock, CloudNsg, CloudSubnet, CloudVpc, Lifecycle, is_ours};
use crate::conditions::{self, reason};
use crate::crd::{
    ApiEndpoint, FailureDomain, Initialization, NvidiaBMMClusterSpec, NvidiaBMMClusterStatus,
    SecurityRule,
};
use crate::{DEFAULT_API_SERVER_PORT, OWNER_LABEL, owner_value};

/// What the caller found in BMM for one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterObservation {
    /// IP blocks in the site named [`ip_block_name`] (all of them, ours or not).
    pub ip_blocks: Vec<CloudIpBlock>,
    /// VPCs in the site named `spec.vpc.name` (all of them, ours or not).
    pub vpcs: Vec<CloudVpc>,
    /// Subnets in our VPC (empty while there is none).
    pub subnets: Vec<CloudSubnet>,
    /// NSGs in the site named `spec.vpc.networkSecurityGroup.name`.
    pub nsgs: Vec<CloudNsg>,
    /// How many instances are still in our VPC.
    pub instances_in_vpc: usize,
}

/// Where `controlPlaneEndpoint` may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointSource<'a> {
    /// Cluster API mode: only `spec.controlPlaneEndpoint` (a VIP or DNS name) counts.
    SpecOnly,
    /// Standalone mode: the spec's, else the first control-plane instance's address, port 6443.
    FirstControlPlane(Option<&'a str>),
}

/// Everything the cluster decision looks at.
#[derive(Debug, Clone)]
pub struct ClusterContext<'a> {
    /// The object's namespace.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a NvidiaBMMClusterSpec,
    /// Its current status (conditions keep their transition times).
    pub status: &'a NvidiaBMMClusterStatus,
    /// Whether the finalizer is on the object.
    pub has_finalizer: bool,
    /// Whether the object is being deleted.
    pub deleting: bool,
    /// Whether reconciliation is paused.
    pub paused: bool,
    /// The resolved site id.
    pub site_id: &'a str,
    /// The resolved tenant id.
    pub tenant_id: &'a str,
    /// A fresh UUID, used as the client-chosen id if a VPC has to be created.
    pub fresh_vpc_id: &'a str,
    /// Where the control-plane endpoint comes from.
    pub endpoint: EndpointSource<'a>,
    /// The time, RFC 3339, for condition transitions.
    pub now: &'a str,
}

/// The outcome of [`decide_cluster`].
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterDecision {
    /// Actions, in the order to perform them.
    pub actions: Vec<ClusterAction>,
    /// The status to write.
    pub status: NvidiaBMMClusterStatus,
    /// The control-plane endpoint, once known.
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// What to do afterwards.
    pub wait: Wait,
}

/// The name of the IP block the provider creates for a cluster: `<namespace>.<name>.ipblock`
/// (namespaces hold no dots, so no two clusters share it).
pub fn ip_block_name(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}.ipblock")
}

fn cond(status: ConditionStatus, type_: &str, why: &str, message: impl Into<String>) -> Condition {
    Condition::new(type_, status)
        .with_reason(why)
        .with_message(message)
}

fn pick<T>(items: &[T], ours: impl Fn(&T) -> bool) -> (Option<&T>, bool) {
    let mine = items.iter().find(|i| ours(i));
    (mine, mine.is_none() && !items.is_empty())
}

fn nsg_rule(rule: &SecurityRule) -> NsgRuleCreate {
    use crate::crd::{RuleAction, RuleDirection, RuleProtocol};
    let any = "0.0.0.0/0".to_string();
    NsgRuleCreate {
        name: rule.name.clone(),
        direction: match rule.direction {
            RuleDirection::Ingress => "INGRESS",
            RuleDirection::Egress => "EGRESS",
        },
        protocol: match rule.protocol {
            RuleProtocol::Tcp => "TCP",
            RuleProtocol::Udp => "UDP",
            RuleProtocol::Icmp => "ICMP",
            RuleProtocol::Any => "ANY",
        },
        action: match rule.action {
            RuleAction::Permit => "PERMIT",
            RuleAction::Deny => "DENY",
        },
        source_prefix: rule.source_cidr.clone().unwrap_or_else(|| any.clone()),
        destination_prefix: rule.destination_cidr.clone().unwrap_or(any),
        destination_port_range: match rule.protocol {
            RuleProtocol::Tcp | RuleProtocol::Udp => rule.port_range.clone(),
            RuleProtocol::Icmp | RuleProtocol::Any => None,
        },
        priority: rule.priority,
    }
}

/// Decides what to do for one `NvidiaBMMCluster`.
pub fn decide_cluster(ctx: &ClusterContext<'_>, seen: &ClusterObservation) -> ClusterDecision {
    let mut status = ctx.status.clone();
    let now = ctx.now;
    if ctx.paused {
        set_condition(
            &mut status.conditions,
            cond(
                ConditionStatus::True,
                conditions::PAUSED,
                reason::PAUSED,
                "reconciliation is paused",
            ),
            now,
        );
        return ClusterDecision {
            actions: vec![],
            status,
            control_plane_endpoint: None,
            wait: Wait::Steady,
        };
    }
    set_condition(
        &mut status.conditions,
        cond(
            ConditionStatus::False,
            conditions::PAUSED,
            reason::NOT_PAUSED,
            "",
        ),
        now,
    );
    if ctx.deleting {
        return decide_deletion(ctx, seen, status);
    }
    if !ctx.has_finalizer {
        return ClusterDecision {
            actions: vec![ClusterAction::AddFinalizer],
            status,
            control_plane_endpoint: None,
            wait: Wait::Poll,
        };
    }
    decide_provisioning(ctx, seen, status)
}

fn decide_provisioning(
    ctx: &ClusterContext<'_>,
    seen: &ClusterObservation,
    mut status: NvidiaBMMClusterStatus,
) -> ClusterDecision {
    let now = ctx.now;
    let spec = ctx.spec;
    let owner = owner_value(ctx.namespace, ctx.name);
    let mut actions = Vec::new();
    let mut wait = Wait::Steady;
    let mut blocked = false;
    status.site_id = Some(ctx.site_id.to_string());
    status.tenant_id = Some(ctx.tenant_id.to_string());
    status.failure_domains = vec![FailureDomain {
        name: ctx.site_id.to_string(),
        control_plane: true,
        attributes: BTreeMap::new(),
    }];
    let mut network = status.network_status.take().unwrap_or_default();

    // Subnet CIDRs (validated by the schema; a bad one here blocks with a message).
    let mut cidrs = Vec::new();
    let mut bad_cidr = None;
    for subnet in &spec.subnets {
        match subnet.cidr.parse::<Ipv4Cidr>() {
            Ok(c) => cidrs.push((subnet, c)),
            Err(e) => bad_cidr = Some(format!("spec.subnets[{}].cidr: {e}", subnet.name)),
        }
    }
    if let Some(message) = bad_cidr {
        set_condition(
            &mut status.conditions,
            cond(
                ConditionStatus::False,
                conditions::READY,
                reason::API_REJECTED,
                message,
            ),
            now,
        );
        status.network_status = Some(network);
        return ClusterDecision {
            actions,
            status,
            control_plane_endpoint: None,
            wait: Wait::Blocked,
        };
    }

    // IP block: the user's, or ours by name.
    let mut ip_block_ready = true;
    let ip_block_id: Option<String> = match &spec.ip_block_id {
        Some(id) => Some(id.clone()),
        None => {
            let wanted = ip_block_name(ctx.namespace, ctx.name);
            let live: Vec<&CloudIpBlock> = seen
                .ip_blocks
                .iter()
                .filter(|b| b.name == wanted && Lifecycle::of(&b.status) != Lifecycle::Deleting)
                .collect();
            match live.first() {
                Some(block) => {
                    ip_block_ready = Lifecycle::of(&block.status) == Lifecycle::Ready;
                    Some(block.id.clone())
                }
                None => {
                    if seen.ip_blocks.iter().any(|b| b.name == wanted) {
                        // The old one is still being deleted: wait for it to go.
                        wait = wait.most_urgent(Wait::Poll);
                    } else if let Ok(cover) = covering_prefix(cidrs.iter().map(|(_, c)| c)) {
                        actions.push(ClusterAction::CreateIpBlock(IpBlockCreate {
                            name: wanted,
                            site_id: ctx.site_id.to_string(),
                            cidr: cover,
                        }));
                    }
                    ip_block_ready = false;
                    None
                }
            }
        }
    };
    network.ip_block_id = ip_block_id.clone();

    // VPC: ours by name and owner label; someone else's of that name is a conflict.
    let live_vpcs: Vec<CloudVpc> = seen
        .vpcs
        .iter()
        .filter(|v| v.name == spec.vpc.name)
        .cloned()
        .collect();
    let (our_vpc, vpc_conflict) = pick(&live_vpcs, |v| is_ours(&v.labels, &owner));
    let vpc_ready;
    match (our_vpc, vpc_conflict) {
        (Some(vpc), _) if Lifecycle::of(&vpc.status) == Lifecycle::Deleting => {
            vpc_ready = false;
            wait = wait.most_urgent(Wait::Poll);
            set_condition(
                &mut status.conditions,
                cond(
                    ConditionStatus::False,
                    conditions::VPC_READY,
                    reason::DELETING,
                    format!("VPC {} is still being deleted", vpc.id),
                ),
                ctx.now,
            );
        }
        (Some(vpc), _) => {
            status.vpc_id = Some(vpc.id.clone());
            let life = Lifecycle::of(&vpc.status);
            vpc_ready = life == Lifecycle::Ready;
            let (st, why, msg) = match life {
                Lifecycle::Ready => (
                    ConditionStatus::True,
                    reason::READY,
                    format!("VPC {} is Ready", vpc.id),
                ),
                Lifecycle::Error => (
                    ConditionStatus::False,
                    reason::CLOUD_ERROR,
                    format!("VPC {} is in state Error", vpc.id),
                ),
                _ => (
                    ConditionStatus::False,
                    reason::PROVISIONING,
                    format!("VPC {} is {}", vpc.id, vpc.status),
                ),
            };
            set_condition(
                &mut status.conditions,
                cond(st, conditions::VPC_READY, why, msg),
                ctx.now,
            );
        }
        (None, true) => {
            vpc_ready = false;
            blocked = true;
            set_condition(
                &mut status.conditions,
                cond(
                    ConditionStatus::False,
                    conditions::VPC_READY,
                    reason::NAME_CONFLICT,
                    format!(
                        "a VPC named {:?} exists in the site but was not created for {owner}",
                        spec.vpc.name
                    ),
                ),
                ctx.now,
            );
        }
        (None, false) => {
            vpc_ready = false;
            let mut labels = spec.vpc.labels.clone().unwrap_or_default();
            labels.insert(OWNER_LABEL.to_string(), owner.clone());
            actions.push(ClusterAction::CreateVpc(VpcCreate {
                id: ctx.fresh_vpc_id.to_string(),
                name: spec.vpc.name.clone(),
                site_id: ctx.site_id.to_string(),
                virtualization: spec.vpc.network_virtualization_type,
                labels,
            }));
            set_condition(
                &mut status.conditions,
                cond(
                    ConditionStatus::False,
                    conditions::VPC_READY,
                    reason::PROVISIONING,
                    "creating the VPC",
                ),
                ctx.now,
            );
        }
    }
    let vpc = our_vpc.filter(|v| Lifecycle::of(&v.status) != Lifecycle::Deleting);

    // Subnets in our VPC, by name.
    let mut subnets_ready = true;
    let mut subnet_messages = Vec::new();
    let mut mismatches = Vec::new();
    let mut subnet_ids = BTreeMap::new();
    let mut subnet_prefixes = BTreeMap::new();
    for (subnet, cidr) in &cidrs {
        let found = vpc.and_then(|v| {
            seen.subnets
                .iter()
                .find(|s| s.name == subnet.name && s.vpc_id == v.id)
        });
        match found {
            Some(s) => {
                subnet_ids.insert(subnet.name.clone(), s.id.clone());
                if let Some(prefix) = allocated_prefix(s) {
                    if prefix != cidr.to_string() {
                        mismatches.push(format!("{}: asked {cidr}, got {prefix}", subnet.name));
                    }
                    subnet_prefixes.insert(subnet.name.clone(), prefix);
                }
                match Lifecycle::of(&s.status) {
                    Lifecycle::Ready => {}
                    Lifecycle::Error => {
                        subnets_ready = false;
                        subnet_messages.push(format!("subnet {} is in state Error", subnet.name));
                    }
                    _ => {
                        subnets_ready = false;
                        subnet_messages.push(format!("subnet {} is {}", subnet.name, s.status));
                    }
                }
            }
            None => {
                subnets_ready = false;
                if let (Some(v), Some(block)) = (vpc, &ip_block_id) {
                    actions.push(ClusterAction::CreateSubnet(SubnetCreate {
                        name: subnet.name.clone(),
                        vpc_id: v.id.clone(),
                        ip_block_id: block.clone(),
                        prefix_length: cidr.prefix_len(),
                    }));
                    subnet_messages.push(format!("creating subnet {}", subnet.name));
                } else {
                    subnet_messages.push(format!(
                        "subnet {} waits for the VPC and IP block",
                        subnet.name
                    ));
                }
            }
        }
    }
    network.subnet_ids = subnet_ids;
    network.subnet_prefixes = subnet_prefixes;
    set_condition(
        &mut status.conditions,
        if subnets_ready {
            cond(
                ConditionStatus::True,
                conditions::SUBNETS_READY,
                reason::READY,
                "all subnets are Ready",
            )
        } else {
            cond(
                ConditionStatus::False,
                conditions::SUBNETS_READY,
                reason::PROVISIONING,
                subnet_messages.join("; "),
            )
        },
        ctx.now,
    );
    if mismatches.is_empty() {
        remove_condition(&mut status.conditions, reason::SUBNET_PREFIX_MISMATCH);
    } else {
        set_condition(
            &mut status.conditions,
            cond(
                ConditionStatus::True,
                reason::SUBNET_PREFIX_MISMATCH,
                reason::SUBNET_PREFIX_MISMATCH,
                mismatches.join("; "),
            ),
            ctx.now,
        );
    }

    // NSG: ours by name and label, attached through the VPC.
    let nsg_ready = match &spec.vpc.network_security_group {
        None => {
            network.nsg_id = None;
            set_condition(
                &mut status.conditions,
                cond(
                    ConditionStatus::True,
                    conditions::NSG_READY,
                    "NotRequested",
                    "no network security group asked for",
                ),
                ctx.now,
            );
            true
        }
        Some(nsg_spec) => {
            let named: Vec<CloudNsg> = seen
                .nsgs
                .iter()
                .filter(|n| n.name == nsg_spec.name)
                .cloned()
                .collect();
            let (ours, conflict) = pick(&named, |n| is_ours(&n.labels, &owner));
            match (ours, conflict) {
                (Some(nsg), _) => {
                    network.nsg_id = Some(nsg.id.clone());
                    let attached =
                        vpc.is_some_and(|v| v.nsg_id.as_deref() == Some(nsg.id.as_str()));
                    if let Some(v) = vpc.filter(|_| !attached) {
                        actions.push(ClusterAction::AttachNsg {
                            vpc_id: v.id.clone(),
                            nsg_id: nsg.id.clone(),
                        });
                    }
                    let life = Lifecycle::of(&nsg.status);
                    let ready = life == Lifecycle::Ready && attached;
                    let (st, why, msg) = match (life, attached) {
                        (Lifecycle::Ready, true) => (
                            ConditionStatus::True,
                            reason::READY,
                            format!("NSG {} is Ready and attached", nsg.id),
                        ),
                        (Lifecycle::Error, _) => (
                            ConditionStatus::False,
                            reason::CLOUD_ERROR,
                            format!("NSG {} is in state Error", nsg.id),
                        ),
                        (_, false) => (
                            ConditionStatus::False,
                            reason::PROVISIONING,
                            format!("NSG {} is {} and not attached yet", nsg.id, nsg.status),
                        ),
                        _ => (
                            ConditionStatus::False,
                            reason::PROVISIONING,
                            format!("NSG {} is {}", nsg.id, nsg.status),
                        ),
                    };
                    set_condition(
                        &mut status.conditions,
                        cond(st, conditions::NSG_READY, why, msg),
                        ctx.now,
                    );
                    ready
                }
                (None, true) => {
                    blocked = true;
                    set_condition(
                        &mut status.conditions,
                        cond(
                            ConditionStatus::False,
                            conditions::NSG_READY,
                            reason::NAME_CONFLICT,
                            format!(
                                "an NSG named {:?} exists in the site but was not created for {owner}",
                                nsg_spec.name
                            ),
                        ),
                        ctx.now,
                    );
                    false
                }
                (None, false) => {
                    network.nsg_id = None;
                    let mut labels = BTreeMap::new();
                    labels.insert(OWNER_LABEL.to_string(), owner.clone());
                    actions.push(ClusterAction::CreateNsg(NsgCreate {
                        name: nsg_spec.name.clone(),
                        site_id: ctx.site_id.to_string(),
                        rules: nsg_spec.rules.iter().map(nsg_rule).collect(),
                        labels,
                    }));
                    set_condition(
                        &mut status.conditions,
                        cond(
                            ConditionStatus::False,
                            conditions::NSG_READY,
                            reason::PROVISIONING,
                            "creating the NSG",
                        ),
                        ctx.now,
                    );
                    false
                }
            }
        }
    };
    status.network_status = Some(network);

    // Summary.
    let network_ready = ip_block_ready && vpc_ready && subnets_ready && nsg_ready;
    let endpoint = match (
        spec.control_plane_endpoint
            .as_ref()
            .filter(|e| e.is_valid()),
        ctx.endpoint,
    ) {
        (Some(e), _) => Some(e.clone()),
        (None, EndpointSource::FirstControlPlane(Some(address))) => Some(ApiEndpoint {
            host: address.to_string(),
            port: DEFAULT_API_SERVER_PORT,
        }),
        (None, _) => None,
    };
    let already = status
        .initialization
        .as_ref()
        .and_then(|i| i.provisioned)
        .unwrap_or(false);
    let provisioned = already || (network_ready && endpoint.is_some());
    status.initialization = Some(Initialization {
        provisioned: Some(provisioned),
    });
    status.ready = network_ready && endpoint.is_some();
    let ready_condition = if blocked {
        cond(
            ConditionStatus::False,
            conditions::READY,
            reason::NAME_CONFLICT,
            "a network object's name is taken; see the other conditions",
        )
    } else if !network_ready {
        cond(
            ConditionStatus::False,
            conditions::READY,
            reason::PROVISIONING,
            "the network is being provisioned",
        )
    } else if endpoint.is_none() {
        cond(
            ConditionStatus::False,
            conditions::READY,
            reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT,
            "the network is Ready; spec.controlPlaneEndpoint is not set",
        )
    } else {
        cond(
            ConditionStatus::True,
            conditions::READY,
            reason::READY,
            "the network is Ready",
        )
    };
    set_condition(&mut status.conditions, ready_condition, ctx.now);

    if blocked {
        // Creating more objects for a cluster whose VPC or NSG name is taken would only leak.
        actions.clear();
        wait = Wait::Blocked;
    } else if !actions.is_empty() || !network_ready {
        wait = wait.most_urgent(Wait::Poll);
    } else if endpoint.is_none() {
        wait = wait.most_urgent(Wait::Dependency);
    }
    ClusterDecision {
        actions,
        status,
        control_plane_endpoint: endpoint,
        wait,
    }
}

/// The prefix a subnet got, as `a.b.c.d/len`.
fn allocated_prefix(subnet: &CloudSubnet) -> Option<String> {
    let prefix = subnet.ipv4_prefix.as_deref()?;
    if prefix.contains('/') {
        Some(prefix.to_string())
    } else {
        subnet.prefix_length.map(|len| format!("{prefix}/{len}"))
    }
}

mod actions;
mod deletion;
pub use actions::{
    ClusterAction, IpBlockCreate, NsgCreate, NsgRuleCreate, SubnetCreate, VpcCreate,
};
use deletion::decide_deletion;

#[cfg(test)]
mod tests;
