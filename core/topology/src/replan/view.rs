//! The operator's view of a topology's rollout: for each (instance, site), whether its child is
//! only planned, created, prepared, waiting for named gates, approved, about to be deleted or
//! left as an orphan — and whether its content is about to change. This is what `ntc status`
//! prints ([`render_table`]) and what a status field can carry ([`StatusRow`] serialises).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use crate::api::DeletionPolicy;
use crate::plan::Plan;
use crate::replan::diff::{ExistingChild, diff};
use crate::replan::gating::{GateState, states, waits};
use crate::replan::spec::{ChildKey, desired_children};

/// Where one (instance, site) stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "gates", rename_all = "camelCase")]
pub enum InstanceStatus {
    /// The instance's selector matches no site: nothing is planned for it.
    Unplaced,
    /// Planned; its child is not created yet.
    Planned,
    /// Its child exists, not prepared yet.
    Created,
    /// Its child is prepared, not approved yet, and waits for no gate.
    Prepared,
    /// Its child waits for these gates (condition types `wait-for-<TYPE>-<id>`).
    WaitingFor(Vec<String>),
    /// Its child is approved (published).
    Approved,
    /// The topology no longer wants it; its child is to be deleted.
    ToBeDeleted,
    /// The topology no longer wants it; its child is left in place (`deletionPolicy: orphan`).
    Orphaned,
}

impl InstanceStatus {
    /// The one-word name shown in the STATUS column.
    pub fn name(&self) -> &'static str {
        match self {
            InstanceStatus::Unplaced => "Unplaced",
            InstanceStatus::Planned => "Planned",
            InstanceStatus::Created => "Created",
            InstanceStatus::Prepared => "Prepared",
            InstanceStatus::WaitingFor(_) => "Waiting",
            InstanceStatus::Approved => "Approved",
            InstanceStatus::ToBeDeleted => "ToBeDeleted",
            InstanceStatus::Orphaned => "Orphaned",
        }
    }
}

/// A pending change to an existing child's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PendingUpdate {
    /// Updated in place.
    Update,
    /// Recreated (its deployed id or template changes).
    Recreate,
}

/// One (instance, site) of the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    /// The NF instance.
    pub instance: String,
    /// The site; `None` for an unplaced instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The deployed id, when the plan has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployed_id: Option<String>,
    /// The NF type, when the plan knows the instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nf_type: Option<String>,
    /// The backend's id of its child, when one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
    /// Where it stands.
    pub status: InstanceStatus,
    /// A change to its content the next re-plan makes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingUpdate>,
}

/// The view of `plan` over the `existing` children under `policy`: one row per planned
/// (instance, site) in the plan's order, one per unplaced instance, then one per child the
/// plan no longer wants, by key.
pub fn instance_statuses(
    plan: &Plan,
    existing: &[ExistingChild],
    policy: DeletionPolicy,
) -> Vec<StatusRow> {
    let desired = desired_children(plan);
    let changes = diff(existing, &desired, policy);
    let retired: BTreeSet<&str> = changes
        .delete
        .iter()
        .chain(&changes.orphan)
        .map(|c| c.id.as_str())
        .collect();
    let kept: BTreeMap<&ChildKey, &ExistingChild> = existing
        .iter()
        .filter(|c| !retired.contains(c.id.as_str()))
        .map(|c| (&c.key, c))
        .collect();
    // Gates count the children that stay: an approved copy about to be deleted opens none.
    let gate_states = states(existing.iter().filter(|c| !retired.contains(c.id.as_str())));
    let pending: BTreeMap<&ChildKey, PendingUpdate> = changes
        .update
        .iter()
        .map(|u| {
            let kind = if u.recreate {
                PendingUpdate::Recreate
            } else {
                PendingUpdate::Update
            };
            (&u.child.key, kind)
        })
        .collect();

    let mut rows = Vec::with_capacity(desired.len() + changes.delete.len() + changes.orphan.len());
    let mut unplaced = plan.unplaced().iter().peekable();
    for (i, instance) in plan.instances().iter().enumerate() {
        if unplaced.peek().is_some_and(|name| **name == instance.name) {
            unplaced.next();
            rows.push(StatusRow {
                instance: instance.name.clone(),
                site: None,
                deployed_id: None,
                nf_type: Some(instance.nf_type.to_string()),
                child: None,
                status: InstanceStatus::Unplaced,
                pending: None,
            });
            continue;
        }
        for v in plan.variant_range(i) {
            let planned = &desired[v];
            let child = kept.get(&planned.key).copied();
            let status = match child {
                None => InstanceStatus::Planned,
                Some(c) if c.approved => InstanceStatus::Approved,
                Some(c) => {
                    let closed: Vec<String> = waits(plan, v, &gate_states)
                        .into_iter()
                        .filter(|w| w.state != GateState::Open)
                        .map(|w| w.condition_type)
                        .collect();
                    if !closed.is_empty() {
                        InstanceStatus::WaitingFor(closed)
                    } else if c.prepared {
                        InstanceStatus::Prepared
                    } else {
                        InstanceStatus::Created
                    }
                }
            };
            rows.push(StatusRow {
                instance: instance.name.clone(),
                site: Some(planned.key.site.clone()),
                deployed_id: Some(planned.spec.deployed_id.clone()),
                nf_type: Some(instance.nf_type.to_string()),
                child: child.map(|c| c.id.clone()),
                status,
                pending: pending.get(&planned.key).copied(),
            });
        }
    }
    let mut gone: Vec<(&ExistingChild, InstanceStatus)> = changes
        .delete
        .iter()
        .map(|c| (c, InstanceStatus::ToBeDeleted))
        .chain(changes.orphan.iter().map(|c| (c, InstanceStatus::Orphaned)))
        .collect();
    gone.sort_by(|a, b| a.0.key.cmp(&b.0.key).then_with(|| a.0.id.cmp(&b.0.id)));
    rows.extend(gone.into_iter().map(|(c, status)| StatusRow {
        instance: c.key.instance.clone(),
        site: Some(c.key.site.clone()),
        deployed_id: None,
        nf_type: None,
        child: Some(c.id.clone()),
        status,
        pending: None,
    }));
    rows
}

const HEADERS: [&str; 7] = [
    "INSTANCE", "SITE", "ID", "TYPE", "CHILD", "STATUS", "DETAIL",
];

/// The rows as a text table, columns aligned as kubectl aligns them (two spaces apart), a
/// header first, `-` for an empty cell. Control characters in names are shown as `?`, so a
/// name cannot move the cursor or rewrite the terminal.
pub fn render_table(rows: &[StatusRow]) -> String {
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|row| {
            let text = |s: Option<&str>| s.map_or_else(|| "-".to_owned(), sanitise);
            [
                sanitise(&row.instance),
                text(row.site.as_deref()),
                text(row.deployed_id.as_deref()),
                text(row.nf_type.as_deref()),
                text(row.child.as_deref()),
                row.status.name().to_owned(),
                sanitise(&detail(row)),
            ]
        })
        .collect();
    let mut widths = HEADERS.map(|h| h.chars().count());
    for line in &cells {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header = HEADERS.map(str::to_owned);
    for line in std::iter::once(&header).chain(&cells) {
        let mut text = String::new();
        for (cell, width) in line.iter().zip(widths) {
            let _ = write!(text, "{cell:<width$}  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

fn detail(row: &StatusRow) -> String {
    let mut parts = Vec::new();
    match &row.status {
        InstanceStatus::Unplaced => parts.push("no site matches its selector".to_owned()),
        InstanceStatus::WaitingFor(gates) => parts.push(format!("for {}", gates.join(", "))),
        InstanceStatus::Orphaned => parts.push("left in place (deletionPolicy orphan)".to_owned()),
        _ => {}
    }
    match row.pending {
        Some(PendingUpdate::Update) => parts.push("update pending".to_owned()),
        Some(PendingUpdate::Recreate) => parts.push("recreate pending".to_owned()),
        None => {}
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

fn sanitise(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
