//! Named leases: one holder at a time for a name, on the store's clock (`now()` on
//! PostgreSQL, so several daemons on one database agree; the same clock on SQLite).
//!
//! Acquire is one upsert whose `WHERE` admits only a free, expired or same-holder row, and
//! renew one `UPDATE … WHERE token = ?`: the database decides each under its row lock, so two
//! candidates never both win, whichever daemon they call. `transitions` grows by one with
//! every new holding (a new token): a later holder always has a larger number (fencing).
//! A new holding and a release are logged as changes of kind `lease` (put and delete), so a
//! standby watching leases campaigns at once; renewals are not logged.

use super::{Row, SqlValue, Tx, int, log_change, text};
use crate::store::{EntityKind, LeaseRecord, StoreError};

/// The store's clock in unix ms, as an SQL expression of `backend`.
fn now(backend: &str) -> &'static str {
    if backend == "postgres" {
        "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)"
    } else {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    }
}

fn record(row: &Row) -> LeaseRecord {
    LeaseRecord {
        name: text(row, 0),
        holder: text(row, 1),
        token: text(row, 2),
        transitions: int(row, 3),
        expires_ms: int(row, 4),
        now_ms: int(row, 5),
    }
}

fn columns(backend: &str) -> String {
    format!(
        "name, holder, token, transitions, expires_ms, {}",
        now(backend)
    )
}

pub(super) fn acquire(
    tx: &mut dyn Tx,
    name: &str,
    holder: &str,
    token: &str,
    duration_ms: i64,
) -> Result<LeaseRecord, StoreError> {
    let backend = tx.backend();
    let now = now(backend);
    // The existing row's own live holding keeps its token and transitions (an acquire
    // retried after a lost answer is the same holding); any other grant is a new one.
    let same_live = format!("leases.holder = excluded.holder AND leases.expires_ms >= {now}");
    let granted = tx.query(
        &format!(
            "INSERT INTO leases (name, holder, token, expires_ms, transitions) \
             VALUES (?, ?, ?, {now} + ?, 1) \
             ON CONFLICT (name) DO UPDATE SET \
               token = CASE WHEN {same_live} THEN leases.token ELSE excluded.token END, \
               transitions = CASE WHEN {same_live} THEN leases.transitions \
                 ELSE leases.transitions + 1 END, \
               holder = excluded.holder, expires_ms = excluded.expires_ms \
             WHERE leases.holder = '' OR leases.expires_ms < {now} \
               OR leases.holder = excluded.holder \
             RETURNING {}",
            columns(backend)
        ),
        &[
            name.into(),
            holder.into(),
            token.into(),
            SqlValue::Int(duration_ms),
        ],
    )?;
    match granted.first() {
        Some(row) => {
            let lease = record(row);
            if lease.token == token {
                log_change(tx, EntityKind::Lease, name, false)?;
            }
            Ok(lease)
        }
        None => {
            let held = get(tx, name)?;
            Err(StoreError::LeaseHeld {
                name: name.to_owned(),
                holder: held.holder,
                until_ms: held.expires_ms,
            })
        }
    }
}

pub(super) fn renew(
    tx: &mut dyn Tx,
    name: &str,
    token: &str,
    duration_ms: i64,
) -> Result<LeaseRecord, StoreError> {
    let backend = tx.backend();
    let renewed = tx.query(
        &format!(
            "UPDATE leases SET expires_ms = {} + ? WHERE name = ? AND token = ? AND token <> '' \
             RETURNING {}",
            now(backend),
            columns(backend)
        ),
        &[SqlValue::Int(duration_ms), name.into(), token.into()],
    )?;
    renewed.first().map(record).ok_or(StoreError::LeaseNotHeld {
        name: name.to_owned(),
    })
}

pub(super) fn release(tx: &mut dyn Tx, name: &str, token: &str) -> Result<(), StoreError> {
    let released = tx.execute(
        &format!(
            "UPDATE leases SET holder = '', token = '', expires_ms = {} \
             WHERE name = ? AND token = ? AND token <> ''",
            now(tx.backend())
        ),
        &[name.into(), token.into()],
    )?;
    if released == 0 {
        return Err(StoreError::LeaseNotHeld {
            name: name.to_owned(),
        });
    }
    log_change(tx, EntityKind::Lease, name, true)
}

pub(super) fn get(tx: &mut dyn Tx, name: &str) -> Result<LeaseRecord, StoreError> {
    let backend = tx.backend();
    let rows = tx.query(
        &format!("SELECT {} FROM leases WHERE name = ?", columns(backend)),
        &[name.into()],
    )?;
    rows.first().map(record).ok_or(StoreError::NotFound {
        kind: "lease",
        id: name.to_owned(),
    })
}
