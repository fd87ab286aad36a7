//! Batches of deployment writes (`ApplyDeployments`): creates, updates and deletes in one
//! transaction, in the order given, each logged as its single operation logs it — so a
//! controller that changes a thousand children pays one transaction, not a thousand, and a
//! watcher still sees one change per deployment, in order. A run of consecutive creates is
//! one multi-row insert (as a placement's children are).
//!
//! A fenced batch first reads the named lease (share-locked on PostgreSQL until the commit):
//! a writer whose holding has moved on writes nothing.

use super::deployments;
use super::{SqlValue, Tx, int, text};
use crate::store::{BatchResult, BatchWrite, DeploymentUpdate, Fence, NewDeployment, StoreError};

/// A batch's writes with consecutive creates gathered, each with its first write's index.
pub(super) enum Segment {
    /// Creates, from write `index` on.
    Creates {
        index: usize,
        rows: Vec<NewDeployment>,
    },
    /// One update.
    Update {
        index: usize,
        id: String,
        update: DeploymentUpdate,
        if_updated: Option<String>,
        now_ms: i64,
    },
    /// One delete.
    Delete { index: usize, id: String },
}

/// `writes` as segments, in order.
pub(super) fn segments(writes: Vec<BatchWrite>) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    for (index, write) in writes.into_iter().enumerate() {
        match write {
            BatchWrite::Create(row) => match segments.last_mut() {
                Some(Segment::Creates { rows, .. }) => rows.push(row),
                _ => segments.push(Segment::Creates {
                    index,
                    rows: vec![row],
                }),
            },
            BatchWrite::Update {
                id,
                update,
                if_updated,
                now_ms,
            } => segments.push(Segment::Update {
                index,
                id,
                update,
                if_updated,
                now_ms,
            }),
            BatchWrite::Delete { id } => segments.push(Segment::Delete { index, id }),
        }
    }
    segments
}

fn item(index: usize) -> impl Fn(StoreError) -> StoreError {
    move |source| StoreError::Item {
        index,
        source: Box::new(source),
    }
}

/// Refuses the batch unless lease `fence.name` still has holding `fence.transitions`.
fn check_fence(tx: &mut dyn Tx, fence: &Fence) -> Result<(), StoreError> {
    let lock = if tx.backend() == "postgres" {
        " FOR SHARE"
    } else {
        ""
    };
    let rows = tx.query(
        &format!("SELECT holder, transitions FROM leases WHERE name = ?{lock}"),
        &[SqlValue::from(fence.name.as_str())],
    )?;
    let (holder, current) = rows
        .first()
        .map_or((String::new(), 0), |row| (text(row, 0), int(row, 1)));
    if holder.is_empty() || current != fence.transitions {
        return Err(StoreError::Fenced {
            name: fence.name.clone(),
            transitions: fence.transitions,
            current,
            holder,
        });
    }
    Ok(())
}

/// Applies `segments` in `tx` (see the module docs); one result per write, in order.
pub(super) fn apply(
    tx: &mut dyn Tx,
    segments: &[Segment],
    fence: Option<&Fence>,
    revisions_kept: usize,
) -> Result<Vec<BatchResult>, StoreError> {
    if let Some(fence) = fence {
        check_fence(tx, fence)?;
    }
    let mut results = Vec::new();
    for segment in segments {
        match segment {
            Segment::Creates { index, rows } => {
                let made = deployments::create(tx, rows).map_err(item(*index))?;
                results.extend(
                    made.into_iter()
                        .map(|(created, id)| BatchResult::Created(created, id)),
                );
            }
            Segment::Update {
                index,
                id,
                update,
                if_updated,
                now_ms,
            } => {
                let info = deployments::write_unheld(
                    tx,
                    id,
                    update,
                    if_updated.as_deref(),
                    *now_ms,
                    revisions_kept,
                )
                .map_err(item(*index))?;
                results.push(BatchResult::Updated(info));
            }
            Segment::Delete { index, id } => {
                let deleted = deployments::delete(tx, id).map_err(item(*index))?;
                results.push(BatchResult::Deleted(deleted));
            }
        }
    }
    Ok(results)
}
