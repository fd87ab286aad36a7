//! What a child waits for before it may be approved, with each gate's state.
//!
//! The planner names the gates ([`Plan::gates`]: one per connected instance of a type the
//! child's type waits for). Here each gate gets a state from the children as they are: open
//! when the waited-for child is approved, awaiting approval when it exists, awaiting creation
//! when it does not exist yet — which is the case of a UPF created in the same change as the
//! SMF that talks to it, or of one being recreated.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::plan::Plan;
use crate::replan::diff::{ChildChanges, ExistingChild};
use crate::replan::spec::{ChildKey, variant_key};

/// Where a gate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GateState {
    /// The waited-for child is approved (published): the gate is open.
    Open,
    /// The waited-for child exists but is not approved yet.
    AwaitingApproval,
    /// The waited-for child does not exist yet (or is being recreated).
    AwaitingCreation,
}

/// One gate of a child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateWait {
    /// The gate's condition type, `wait-for-<TYPE>-<id>`.
    pub condition_type: String,
    /// The child waited for.
    pub waits_for: ChildKey,
    /// Its deployed id.
    pub waits_for_id: String,
    /// Where the gate stands.
    pub state: GateState,
}

/// The gates of a child about to be created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewChildGates {
    /// The new child.
    pub key: ChildKey,
    /// Its deployed id.
    pub deployed_id: String,
    /// Its gates, in the plan's order (empty when it waits for nothing).
    pub waits: Vec<GateWait>,
}

impl NewChildGates {
    /// Whether it waits for nothing any more (no gate, or every gate open).
    pub fn is_open(&self) -> bool {
        self.waits.iter().all(|w| w.state == GateState::Open)
    }

    /// The condition types of the gates not open yet.
    pub fn closed(&self) -> Vec<&str> {
        self.waits
            .iter()
            .filter(|w| w.state != GateState::Open)
            .map(|w| w.condition_type.as_str())
            .collect()
    }
}

/// The gates of variant `v` of `plan` and their state, given the `existing` children.
pub fn gate_waits(plan: &Plan, v: usize, existing: &[ExistingChild]) -> Vec<GateWait> {
    let states = states(existing.iter());
    waits(plan, v, &states)
}

/// For every child `changes` creates (and every child it recreates), the gates it waits for,
/// as they will stand once `changes` is carried out on `existing`: a child the same change
/// creates or recreates is awaited for creation, a child it deletes or orphans no longer
/// counts.
pub fn new_child_gates(
    plan: &Plan,
    existing: &[ExistingChild],
    changes: &ChildChanges,
) -> Vec<NewChildGates> {
    let leaving: BTreeSet<&str> = changes
        .delete
        .iter()
        .chain(&changes.orphan)
        .map(|c| c.id.as_str())
        .chain(
            changes
                .update
                .iter()
                .filter(|u| u.recreate)
                .map(|u| u.id.as_str()),
        )
        .collect();
    let states = states(existing.iter().filter(|c| !leaving.contains(c.id.as_str())));
    changes
        .create
        .iter()
        .chain(
            changes
                .update
                .iter()
                .filter(|u| u.recreate)
                .map(|u| &u.child),
        )
        .map(|child| NewChildGates {
            key: child.key.clone(),
            deployed_id: child.spec.deployed_id.clone(),
            waits: waits(plan, child.variant, &states),
        })
        .collect()
}

/// Approved or not, per key, over the children that will be there.
pub(crate) fn states<'a>(
    children: impl Iterator<Item = &'a ExistingChild>,
) -> BTreeMap<&'a ChildKey, bool> {
    let mut states: BTreeMap<&ChildKey, bool> = BTreeMap::new();
    for child in children {
        *states.entry(&child.key).or_default() |= child.approved;
    }
    states
}

/// The gates of variant `v` with their state under `states`.
pub(crate) fn waits(plan: &Plan, v: usize, states: &BTreeMap<&ChildKey, bool>) -> Vec<GateWait> {
    plan.gates(v)
        .into_iter()
        .map(|gate| {
            let key = variant_key(plan, gate.waits_for);
            let state = match states.get(&key) {
                Some(true) => GateState::Open,
                Some(false) => GateState::AwaitingApproval,
                None => GateState::AwaitingCreation,
            };
            GateWait {
                condition_type: gate.condition_type,
                waits_for_id: plan.variants()[gate.waits_for].id.clone(),
                waits_for: key,
                state,
            }
        })
        .collect()
}
