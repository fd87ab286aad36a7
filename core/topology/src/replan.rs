//! Re-planning: what to create, update, delete or leave when the intent or the sites change.
//!
//! The planner answers "what should exist"; a controller that follows the world also needs
//! "what must change so that it does", without touching what is already right (a child that
//! is recreated loses its revision, its approval and, under Porch, its published package). This
//! module answers that for both backends from one model:
//!
//! - a child (a Porch downstream package, a TKO child deployment) is identified by a
//!   [`ChildKey`] — topology, NF instance, site — which stays the same when the instance's
//!   capacity, networks or class change, so such an edit is an update in place;
//! - its content is a [`ChildSpec`], the union of what either backend renders into it, carried
//!   on the child as a [`Fingerprint`] so that an unchanged child is recognised without reading
//!   its package;
//! - [`diff`] compares the children observed with the children a fresh plan wants and gives
//!   the [`ChildChanges`]; site membership (a site registered, removed or relabelled) needs no
//!   separate path: the plan is recomputed from the current sites and diffed like any edit;
//! - [`apply`] is the model of carrying the changes out, which the property tests hold `diff`
//!   to: applying `diff(old children, plan(new))` to the old children gives exactly the new
//!   plan's children, in the fewest changes;
//! - [`new_child_gates`] says what a newly created child waits for (an SMF on a new site waits
//!   for the UPFs it talks to, including UPFs created in the same change);
//! - [`instance_statuses`] is the operator's view per (instance, site), and [`render_table`]
//!   its text form for `ntc status`.

mod diff;
mod gating;
mod spec;
mod view;

pub use diff::{Applied, ChildChanges, ChildUpdate, ExistingChild, apply, diff};
pub use gating::{GateState, GateWait, NewChildGates, gate_waits, new_child_gates};
pub use spec::{
    ChildKey, ChildSpec, Fingerprint, PlannedChild, ReplanError, SPEC_FINGERPRINT_KEY,
    desired_children,
};
pub use view::{InstanceStatus, PendingUpdate, StatusRow, instance_statuses, render_table};

#[cfg(test)]
mod tests;
