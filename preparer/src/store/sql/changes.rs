//! The change log behind `Watch`: one row per write, numbered by a revision that increases in
//! commit order (the writers' side is `log_change` in the parent module);
//! compaction drops old rows and remembers up to where, so a watcher asking for a dropped
//! revision is told (OUT_OF_RANGE) instead of silently missing changes.

use super::{SqlValue, Tx, int, text};
use crate::store::{Change, EntityKind, StoreError};

fn compacted(tx: &mut dyn Tx) -> Result<i64, StoreError> {
    Ok(tx
        .query("SELECT value FROM store_meta WHERE key = 'compacted'", &[])?
        .first()
        .map(|row| int(row, 0))
        .unwrap_or(0))
}

pub(super) fn since(
    tx: &mut dyn Tx,
    revision: i64,
    limit: usize,
) -> Result<Vec<Change>, StoreError> {
    // The rows first, the compaction mark after: the statements may run in separate
    // snapshots, and a compaction between them is then seen (the mark only grows), never
    // silently missed.
    let rows = tx.query(
        "SELECT revision, kind, entity_id, op FROM changes WHERE revision > ? ORDER BY revision LIMIT ?",
        &[SqlValue::Int(revision), SqlValue::Int(limit as i64)],
    )?;
    let compacted = compacted(tx)?;
    if revision < compacted {
        return Err(StoreError::Compacted {
            revision,
            oldest: compacted + 1,
        });
    }
    rows.iter()
        .map(|row| {
            Ok(Change {
                revision: int(row, 0),
                kind: EntityKind::parse(&text(row, 1)).ok_or_else(|| StoreError::Corrupt {
                    what: "change kind",
                    message: text(row, 1),
                })?,
                id: text(row, 2),
                deleted: text(row, 3) == "delete",
            })
        })
        .collect()
}

pub(super) fn current(tx: &mut dyn Tx) -> Result<i64, StoreError> {
    let latest = tx
        .query("SELECT MAX(revision) FROM changes", &[])?
        .first()
        .map(|row| int(row, 0))
        .unwrap_or(0);
    Ok(latest.max(compacted(tx)?))
}

pub(super) fn compact(tx: &mut dyn Tx, keep: i64) -> Result<(), StoreError> {
    let cutoff = current(tx)? - keep;
    if cutoff <= compacted(tx)? {
        return Ok(());
    }
    tx.execute(
        "DELETE FROM changes WHERE revision <= ?",
        &[SqlValue::Int(cutoff)],
    )?;
    tx.execute(
        "INSERT INTO store_meta (key, value) VALUES ('compacted', ?) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[SqlValue::Int(cutoff)],
    )?;
    Ok(())
}
