//! The `NFTopology` status and the `ntc plan` report, computed from a plan and what was
//! observed.

use indexmap::IndexMap;
use nephrite_krm::condition::set_condition;
use nephrite_krm::{Condition, ConditionStatus};
use serde::Serialize;
use serde_json::Value;

use crate::api::{Capacity, NFDeployedTopology, NFTopologyStatus};
use crate::deployed::DeployedTopologyBuilder;
use crate::error::TopologyError;
use crate::plan::Plan;
use crate::porch::{self, Observation};

/// Condition type: every package is published.
pub const READY: &str = "Ready";
/// Condition type: every instance matched at least one cluster.
pub const PLACED: &str = "Placed";

/// The status of a planned topology: `numNFDeployed`, the published instances, one package
/// entry per variant, and the `Ready` / `Placed` conditions (kept from `previous`, so an
/// unchanged state gives an equal status).
pub fn topology_status(
    plan: &Plan,
    observation: &Observation,
    deployed: &DeployedTopologyBuilder<'_>,
    previous: &[Condition],
    now: &str,
) -> NFTopologyStatus {
    let mut conditions = previous.to_vec();
    let placed = if plan.unplaced().is_empty() {
        Condition::new(PLACED, ConditionStatus::True).with_reason("Placed")
    } else {
        Condition::new(PLACED, ConditionStatus::False)
            .with_reason("NoMatchingCluster")
            .with_message(format!(
                "no cluster matches the selector of instance {}",
                plan.unplaced().join(", ")
            ))
    };
    set_condition(&mut conditions, placed, now);
    let total = plan.variants().len();
    let published = deployed.published_count();
    let ready = if !plan.unplaced().is_empty() {
        Condition::new(READY, ConditionStatus::False)
            .with_reason("NoMatchingCluster")
            .with_message(format!(
                "no cluster matches the selector of instance {}",
                plan.unplaced().join(", ")
            ))
    } else if published == total {
        Condition::new(READY, ConditionStatus::True)
            .with_reason("Published")
            .with_message(format!("{published} of {total} packages published"))
    } else {
        Condition::new(READY, ConditionStatus::False)
            .with_reason("Deploying")
            .with_message(format!("{published} of {total} packages published"))
    };
    set_condition(&mut conditions, ready, now);
    NFTopologyStatus {
        num_nf_deployed: u32::try_from(published).unwrap_or(u32::MAX),
        conditions,
        nf_instances: deployed.spec().nf_instances,
        packages: observation.package_statuses(plan),
    }
}

/// The status of a topology that could not be planned: `Ready=False` with reason
/// `ClassNotFound`, `DuplicateInstance`, … and the error as message.
pub fn error_status(error: &TopologyError, previous: &[Condition], now: &str) -> NFTopologyStatus {
    let reason = match error {
        TopologyError::ClassNotFound { .. } => "ClassNotFound",
        TopologyError::DuplicateInstance { .. } => "DuplicateInstance",
        TopologyError::UnnamedInstance { .. } => "UnnamedInstance",
        TopologyError::InvalidSelector { .. } => "InvalidSelector",
        TopologyError::InvalidRule { .. } | TopologyError::PolicyCycle { .. } => "InvalidPolicy",
        TopologyError::DuplicateCluster { .. } => "DuplicateCluster",
    };
    let mut conditions = previous.to_vec();
    set_condition(
        &mut conditions,
        Condition::new(READY, ConditionStatus::False)
            .with_reason(reason)
            .with_message(error.to_string()),
        now,
    );
    NFTopologyStatus {
        conditions,
        ..NFTopologyStatus::default()
    }
}

/// What `ntc plan` prints: the PackageVariantSets, the gates of each variant, the expected
/// deployed topology once everything is published, the rollout order, the capacities injected
/// and the instances no cluster matched.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanReport {
    /// One PackageVariantSet per placed instance.
    pub package_variant_sets: Vec<Value>,
    /// Deployed id → gate condition types, for every variant (empty when ungated).
    pub gates: IndexMap<String, Vec<String>>,
    /// The NFDeployedTopology once everything is published.
    pub deployed_topology: NFDeployedTopology,
    /// NF types, stage by stage.
    pub rollout_order: Vec<Vec<String>>,
    /// The Capacity resources injected into the packages.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capacities: Vec<Capacity>,
    /// Instances that matched no cluster.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unplaced: Vec<String>,
}

/// Builds the report of `plan`.
pub fn plan_report(plan: &Plan) -> PlanReport {
    let gates = plan
        .variants()
        .iter()
        .enumerate()
        .map(|(v, variant)| {
            let gates = plan
                .gates(v)
                .into_iter()
                .map(|g| g.condition_type)
                .collect();
            (variant.id.clone(), gates)
        })
        .collect();
    PlanReport {
        package_variant_sets: porch::package_variant_sets(plan)
            .iter()
            .map(nephrite_krm::Object::to_json)
            .collect(),
        gates,
        deployed_topology: DeployedTopologyBuilder::all_published(plan).resource(),
        rollout_order: plan
            .rollout_order()
            .into_iter()
            .map(|stage| stage.into_iter().map(|t| t.to_string()).collect())
            .collect(),
        capacities: (0..plan.instances().len())
            .filter_map(|i| porch::capacity(plan, i))
            .collect(),
        unplaced: plan.unplaced().to_vec(),
    }
}
