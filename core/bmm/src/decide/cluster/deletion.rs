//! The way down: NSG (detached first) → subnets → VPC → IP block, each stage waiting until the
//! previous one is gone, then the finalizer.

use nephrite_krm::ConditionStatus;
use nephrite_krm::condition::set_condition;

use super::{
    ClusterAction, ClusterContext, ClusterDecision, ClusterObservation, Wait, cond, ip_block_name,
};
use crate::cloud::{CloudSubnet, Lifecycle, is_ours};
use crate::conditions::{self, reason};
use crate::crd::NvidiaBMMClusterStatus;
use crate::owner_value;

pub(super) fn decide_deletion(
    ctx: &ClusterContext<'_>,
    seen: &ClusterObservation,
    mut status: NvidiaBMMClusterStatus,
) -> ClusterDecision {
    let done = |status, actions| ClusterDecision {
        actions,
        status,
        control_plane_endpoint: None,
        wait: Wait::Poll,
    };
    if !ctx.has_finalizer {
        return ClusterDecision {
            actions: vec![],
            status,
            control_plane_endpoint: None,
            wait: Wait::Steady,
        };
    }
    let owner = owner_value(ctx.namespace, ctx.name);
    let spec = ctx.spec;
    status.ready = false;
    let deleting = |msg: String, status: &mut NvidiaBMMClusterStatus| {
        set_condition(
            &mut status.conditions,
            cond(
                ConditionStatus::False,
                conditions::READY,
                reason::DELETING,
                msg,
            ),
            ctx.now,
        );
    };
    let vpc = seen
        .vpcs
        .iter()
        .find(|v| v.name == spec.vpc.name && is_ours(&v.labels, &owner));

    // 0. Instances still in the VPC: their machines delete them; wait.
    if vpc.is_some() && seen.instances_in_vpc > 0 {
        let n = seen.instances_in_vpc;
        set_condition(
            &mut status.conditions,
            cond(
                ConditionStatus::False,
                conditions::READY,
                reason::WAITING_FOR_INSTANCES,
                format!("{n} instance(s) still in the VPC"),
            ),
            ctx.now,
        );
        return done(status, vec![]);
    }
    // 1. NSG, detached first.
    if let Some(nsg_spec) = &spec.vpc.network_security_group
        && let Some(nsg) = seen
            .nsgs
            .iter()
            .find(|n| n.name == nsg_spec.name && is_ours(&n.labels, &owner))
    {
        deleting(format!("deleting NSG {}", nsg.id), &mut status);
        if let Some(v) = vpc.filter(|v| v.nsg_id.as_deref() == Some(nsg.id.as_str())) {
            return done(
                status,
                vec![ClusterAction::DetachNsg {
                    vpc_id: v.id.clone(),
                }],
            );
        }
        let actions = if Lifecycle::of(&nsg.status) == Lifecycle::Deleting {
            vec![]
        } else {
            vec![ClusterAction::DeleteNsg { id: nsg.id.clone() }]
        };
        return done(status, actions);
    }
    // 2. Subnets of our VPC.
    if let Some(v) = vpc {
        let subnets: Vec<&CloudSubnet> = seen.subnets.iter().filter(|s| s.vpc_id == v.id).collect();
        if !subnets.is_empty() {
            deleting(format!("deleting {} subnet(s)", subnets.len()), &mut status);
            let actions = subnets
                .iter()
                .filter(|s| Lifecycle::of(&s.status) != Lifecycle::Deleting)
                .map(|s| ClusterAction::DeleteSubnet { id: s.id.clone() })
                .collect();
            return done(status, actions);
        }
        // 3. The VPC.
        deleting(format!("deleting VPC {}", v.id), &mut status);
        let actions = if Lifecycle::of(&v.status) == Lifecycle::Deleting {
            vec![]
        } else {
            vec![ClusterAction::DeleteVpc { id: v.id.clone() }]
        };
        return done(status, actions);
    }
    // 4. The IP block, only when the provider created it.
    if spec.ip_block_id.is_none() {
        let wanted = ip_block_name(ctx.namespace, ctx.name);
        if let Some(block) = seen.ip_blocks.iter().find(|b| b.name == wanted) {
            deleting(format!("deleting IP block {}", block.id), &mut status);
            let actions = if Lifecycle::of(&block.status) == Lifecycle::Deleting {
                vec![]
            } else {
                vec![ClusterAction::DeleteIpBlock {
                    id: block.id.clone(),
                }]
            };
            return done(status, actions);
        }
    }
    deleting("every cloud object is gone".to_string(), &mut status);
    ClusterDecision {
        actions: vec![ClusterAction::RemoveFinalizer],
        status,
        control_plane_endpoint: None,
        wait: Wait::Steady,
    }
}
