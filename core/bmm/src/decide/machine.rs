//! The machine decision: one instance per `NvidiaBMMMachine`, found by name, adopted when it
//! is ours, never created twice, never replaced when it disappears.

use std::collections::BTreeMap;

use nephrite_krm::condition::set_condition;
use nephrite_krm::{Condition, ConditionStatus};

use super::Wait;
use crate::cloud::{CloudInstance, Lifecycle, is_ours};
use crate::conditions::{self, reason};
use crate::crd::{
    Initialization, MachineAddress, MachineAddressType, NvidiaBMMMachineSpec,
    NvidiaBMMMachineStatus,
};
use crate::provider_id::ProviderId;
use crate::{OWNER_LABEL, owner_value};

/// What the machine needs to know about its cluster.
#[derive(Debug, Clone)]
pub struct ClusterView<'a> {
    /// Whether the cluster's infrastructure is far enough for machines (network Ready).
    pub ready: bool,
    /// The site.
    pub site_id: &'a str,
    /// The tenant.
    pub tenant_id: &'a str,
    /// The VPC.
    pub vpc_id: Option<&'a str>,
    /// Subnet name → id.
    pub subnet_ids: &'a BTreeMap<String, String>,
}

/// The bootstrap data of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bootstrap<'a> {
    /// Not there yet (`Machine.spec.bootstrap.dataSecretName` unset or the Secret missing).
    Missing,
    /// The user data (the Secret's `value`).
    Ready(&'a str),
    /// Standalone mode without bootstrap data: create the instance without user data.
    NotRequired,
}

/// Everything the machine decision looks at.
#[derive(Debug, Clone)]
pub struct MachineContext<'a> {
    /// The object's namespace.
    pub namespace: &'a str,
    /// The object's name, also the instance's name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a NvidiaBMMMachineSpec,
    /// Its current status.
    pub status: &'a NvidiaBMMMachineStatus,
    /// Whether the finalizer is on the object.
    pub has_finalizer: bool,
    /// Whether the object is being deleted.
    pub deleting: bool,
    /// Whether reconciliation is paused.
    pub paused: bool,
    /// The cluster, when found.
    pub cluster: Option<ClusterView<'a>>,
    /// The bootstrap data.
    pub bootstrap: Bootstrap<'a>,
    /// `Machine.spec.failureDomain`, when set.
    pub failure_domain: Option<&'a str>,
    /// The time, RFC 3339.
    pub now: &'a str,
}

/// One interface of an instance to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceCreate {
    /// The subnet.
    pub subnet_id: String,
    /// Physical function or not.
    pub is_physical: bool,
    /// The virtual function.
    pub virtual_function_id: Option<i32>,
}

/// Creates an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceCreate {
    /// Its name (the machine's).
    pub name: String,
    /// The tenant.
    pub tenant_id: String,
    /// The VPC.
    pub vpc_id: String,
    /// The instance type, unless a machine is targeted.
    pub instance_type_id: Option<String>,
    /// A targeted machine.
    pub machine_id: Option<String>,
    /// Allow a machine with health alerts.
    pub allow_unhealthy_machine: Option<bool>,
    /// The operating system.
    pub operating_system_id: Option<String>,
    /// The bootstrap data.
    pub user_data: Option<String>,
    /// Interfaces, primary first.
    pub interfaces: Vec<InterfaceCreate>,
    /// SSH key groups.
    pub ssh_key_group_ids: Vec<String>,
    /// The user's labels plus [`OWNER_LABEL`].
    pub labels: BTreeMap<String, String>,
}

/// One step of the machine reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineAction {
    /// Put the finalizer on the object.
    AddFinalizer,
    /// Create the instance.
    CreateInstance(Box<InstanceCreate>),
    /// Delete the instance.
    DeleteInstance {
        /// Its id.
        id: String,
    },
    /// Remove the finalizer: the instance is gone.
    RemoveFinalizer,
}

/// The outcome of [`decide_machine`].
#[derive(Debug, Clone, PartialEq)]
pub struct MachineDecision {
    /// Actions in order.
    pub actions: Vec<MachineAction>,
    /// The status to write.
    pub status: NvidiaBMMMachineStatus,
    /// `spec.providerID` to write, once the instance exists.
    pub provider_id: Option<String>,
    /// What to do afterwards.
    pub wait: Wait,
}

/// An instance's addresses as Cluster API and Kubernetes Nodes list them: each interface
/// address as `InternalIP`, then the instance name as `Hostname`.
pub fn instance_addresses(instance: &CloudInstance) -> Vec<MachineAddress> {
    instance
        .addresses
        .iter()
        .map(|a| MachineAddress {
            type_: MachineAddressType::InternalIP,
            address: a.clone(),
        })
        .chain(std::iter::once(MachineAddress {
            type_: MachineAddressType::Hostname,
            address: instance.name.clone(),
        }))
        .collect()
}

fn cond(status: ConditionStatus, type_: &str, why: &str, message: impl Into<String>) -> Condition {
    Condition::new(type_, status)
        .with_reason(why)
        .with_message(message)
}

fn not_ready(
    status: &mut NvidiaBMMMachineStatus,
    why: &str,
    message: impl Into<String>,
    now: &str,
) {
    status.ready = false;
    set_condition(
        &mut status.conditions,
        cond(ConditionStatus::False, conditions::READY, why, message),
        now,
    );
}

/// Decides what to do for one `NvidiaBMMMachine`. `instances` are the instances in the site
/// named like the machine (ours or not), plus the one `status.instanceID` names if it was
/// fetched by id.
pub fn decide_machine(ctx: &MachineContext<'_>, instances: &[CloudInstance]) -> MachineDecision {
    let mut status = ctx.status.clone();
    let now = ctx.now;
    let owner = owner_value(ctx.namespace, ctx.name);
    let provider_id = ctx.spec.provider_id.clone();
    let decision = |actions, status, provider_id, wait| MachineDecision {
        actions,
        status,
        provider_id,
        wait,
    };
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
        return decision(vec![], status, provider_id, Wait::Steady);
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

    let ours: Option<&CloudInstance> = instances.iter().find(|i| {
        is_ours(&i.labels, &owner)
            && (i.name == ctx.name || status.instance_id.as_deref() == Some(i.id.as_str()))
    });
    let conflict = ours.is_none() && instances.iter().any(|i| i.name == ctx.name);

    if ctx.deleting {
        if !ctx.has_finalizer {
            return decision(vec![], status, provider_id, Wait::Steady);
        }
        return match ours {
            Some(instance) if Lifecycle::of(&instance.status) == Lifecycle::Deleting => {
                not_ready(
                    &mut status,
                    reason::INSTANCE_TERMINATING,
                    format!("instance {} is terminating", instance.id),
                    now,
                );
                status.instance_state = Some(instance.status.clone());
                decision(vec![], status, provider_id, Wait::Poll)
            }
            Some(instance) => {
                not_ready(
                    &mut status,
                    reason::DELETING,
                    format!("deleting instance {}", instance.id),
                    now,
                );
                decision(
                    vec![MachineAction::DeleteInstance {
                        id: instance.id.clone(),
                    }],
                    status,
                    provider_id,
                    Wait::Poll,
                )
            }
            None => {
                not_ready(&mut status, reason::DELETING, "the instance is gone", now);
                decision(
                    vec![MachineAction::RemoveFinalizer],
                    status,
                    provider_id,
                    Wait::Steady,
                )
            }
        };
    }

    let Some(cluster) = ctx.cluster.as_ref().filter(|c| c.ready) else {
        not_ready(
            &mut status,
            reason::WAITING_FOR_CLUSTER,
            "waiting for the cluster's network to be Ready",
            now,
        );
        return decision(vec![], status, provider_id, Wait::Dependency);
    };
    if let Some(domain) = ctx.failure_domain.filter(|d| *d != cluster.site_id) {
        not_ready(
            &mut status,
            "FailureDomainNotFound",
            format!(
                "failure domain {domain:?} is not the cluster's site {}",
                cluster.site_id
            ),
            now,
        );
        return decision(vec![], status, provider_id, Wait::Blocked);
    }
    status.failure_domain = Some(cluster.site_id.to_string());

    let Some(instance) = ours else {
        if conflict {
            not_ready(
                &mut status,
                reason::NAME_CONFLICT,
                format!(
                    "an instance named {:?} exists but was not created for {owner}",
                    ctx.name
                ),
                now,
            );
            return decision(vec![], status, provider_id, Wait::Blocked);
        }
        if status.instance_id.is_some()
            || status.initialization.as_ref().and_then(|i| i.provisioned) == Some(true)
        {
            // It existed and is gone: report, never replace (the Machine's owner remediates).
            set_condition(
                &mut status.conditions,
                cond(
                    ConditionStatus::False,
                    conditions::INSTANCE_PROVISIONED,
                    reason::INSTANCE_NOT_FOUND,
                    "the instance is gone",
                ),
                now,
            );
            let gone = format!(
                "instance {} no longer exists",
                status.instance_id.clone().unwrap_or_default()
            );
            not_ready(&mut status, reason::INSTANCE_NOT_FOUND, gone, now);
            status.instance_state = None;
            return decision(vec![], status, provider_id, Wait::Steady);
        }
        let user_data = match ctx.bootstrap {
            Bootstrap::Missing => {
                not_ready(
                    &mut status,
                    reason::WAITING_FOR_BOOTSTRAP,
                    "waiting for the bootstrap data secret",
                    now,
                );
                return decision(vec![], status, provider_id, Wait::Dependency);
            }
            Bootstrap::Ready(data) => Some(data.to_string()),
            Bootstrap::NotRequired => None,
        };
        if !ctx.has_finalizer {
            return decision(
                vec![MachineAction::AddFinalizer],
                status,
                provider_id,
                Wait::Poll,
            );
        }
        let Some(vpc_id) = cluster.vpc_id else {
            not_ready(
                &mut status,
                reason::WAITING_FOR_CLUSTER,
                "the cluster has no VPC yet",
                now,
            );
            return decision(vec![], status, provider_id, Wait::Dependency);
        };
        let mut interfaces = Vec::new();
        let network = &ctx.spec.network;
        // The primary interface is the host's physical function.
        let wanted = std::iter::once((network.subnet_name.as_str(), true, None)).chain(
            network
                .additional_interfaces
                .iter()
                .map(|a| (a.subnet_name.as_str(), a.is_physical, a.virtual_function_id)),
        );
        for (subnet, is_physical, virtual_function_id) in wanted {
            let Some(id) = cluster.subnet_ids.get(subnet) else {
                not_ready(
                    &mut status,
                    reason::SUBNET_NOT_FOUND,
                    format!("subnet {subnet:?} is not one of the cluster's"),
                    now,
                );
                return decision(vec![], status, provider_id, Wait::Blocked);
            };
            interfaces.push(InterfaceCreate {
                subnet_id: id.clone(),
                is_physical,
                virtual_function_id,
            });
        }
        let mut labels = ctx.spec.labels.clone().unwrap_or_default();
        labels.insert(OWNER_LABEL.to_string(), owner.clone());
        let create = InstanceCreate {
            name: ctx.name.to_string(),
            tenant_id: cluster.tenant_id.to_string(),
            vpc_id: vpc_id.to_string(),
            instance_type_id: ctx
                .spec
                .instance_type
                .machine_id
                .is_none()
                .then(|| ctx.spec.instance_type.id.clone())
                .flatten(),
            machine_id: ctx.spec.instance_type.machine_id.clone(),
            allow_unhealthy_machine: ctx.spec.instance_type.allow_unhealthy_machine,
            operating_system_id: ctx.spec.operating_system.as_ref().map(|o| o.id.clone()),
            user_data,
            interfaces,
            ssh_key_group_ids: ctx.spec.ssh_key_groups.clone(),
            labels,
        };
        set_condition(
            &mut status.conditions,
            cond(
                ConditionStatus::False,
                conditions::INSTANCE_PROVISIONED,
                reason::PROVISIONING,
                "creating the instance",
            ),
            now,
        );
        not_ready(
            &mut status,
            reason::PROVISIONING,
            "creating the instance",
            now,
        );
        return decision(
            vec![MachineAction::CreateInstance(Box::new(create))],
            status,
            provider_id,
            Wait::Poll,
        );
    };

    // The instance exists and is ours: adopt it and report.
    let mut actions = Vec::new();
    if !ctx.has_finalizer {
        actions.push(MachineAction::AddFinalizer);
    }
    status.instance_id = Some(instance.id.clone());
    status.machine_id = instance.machine_id.clone();
    status.instance_state = Some(instance.status.clone());
    let provider_id = Some(ProviderId::new(cluster.site_id, &instance.id).to_string());
    set_condition(
        &mut status.conditions,
        cond(
            ConditionStatus::True,
            conditions::INSTANCE_PROVISIONED,
            reason::READY,
            format!("instance {}", instance.id),
        ),
        now,
    );
    let wait = match Lifecycle::of(&instance.status) {
        Lifecycle::Ready => {
            status.addresses = instance_addresses(instance);
            let configured = !instance.addresses.is_empty();
            set_condition(
                &mut status.conditions,
                if configured {
                    cond(
                        ConditionStatus::True,
                        conditions::NETWORK_CONFIGURED,
                        reason::READY,
                        instance.addresses.join(", "),
                    )
                } else {
                    cond(
                        ConditionStatus::False,
                        conditions::NETWORK_CONFIGURED,
                        reason::PROVISIONING,
                        "no address yet",
                    )
                },
                now,
            );
            status.ready = configured;
            if configured {
                status.initialization = Some(Initialization {
                    provisioned: Some(true),
                });
                set_condition(
                    &mut status.conditions,
                    cond(
                        ConditionStatus::True,
                        conditions::READY,
                        reason::READY,
                        "the instance is Ready",
                    ),
                    now,
                );
                Wait::Steady
            } else {
                not_ready(
                    &mut status,
                    reason::PROVISIONING,
                    "the instance has no address yet",
                    now,
                );
                Wait::Poll
            }
        }
        Lifecycle::InProgress => {
            not_ready(
                &mut status,
                reason::PROVISIONING,
                format!("instance {} is {}", instance.id, instance.status),
                now,
            );
            Wait::Poll
        }
        Lifecycle::Error => {
            not_ready(
                &mut status,
                reason::INSTANCE_ERROR,
                format!("instance {} is in state Error", instance.id),
                now,
            );
            Wait::Steady
        }
        Lifecycle::Deleting => {
            not_ready(
                &mut status,
                reason::INSTANCE_TERMINATING,
                format!("instance {} is terminating", instance.id),
                now,
            );
            Wait::Poll
        }
    };
    decision(actions, status, provider_id, wait)
}

#[cfg(test)]
mod tests;
