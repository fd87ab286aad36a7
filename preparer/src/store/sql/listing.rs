//! Listing deployments: keyset pages in id order, narrowed in SQL and checked against the
//! whole filter in Rust. What drives a page, cheapest first:
//!
//! 1. A metadata prefix pattern whose range holds at most [`DISTINCT_VALUES`] distinct values
//!    (`Site.region=r042/*` over `r042/0` … `r042/6`): the `(key, value, deployment_id)`
//!    index is sorted by id within each value, so the lowest ids of the range are the merge
//!    of one short, id-ordered read per value ([`values_chunk`]) — about a page of index
//!    entries in all, however wide the range, and no statistics or visibility map needed for
//!    a good plan (a table bulk-loaded a second ago pages as fast as a vacuumed one).
//! 2. Otherwise a prefix range of fewer than [`NARROW_RANGE`] entries: read once from the
//!    same index, its lowest ids taken ([`range_chunk`]).
//! 3. Otherwise deployments walked by id with what SQL can narrow ([`prefilter`]); a wide
//!    range is dense, so a page needs few probes.

use super::deployments::{INFO, info_row};
use super::{Row, SqlValue, Tx, int, text};
use crate::store::{DeploymentFilter, DeploymentInfo, StoreError, Window};

/// A prefix range with at most this many distinct values is read value by value.
const DISTINCT_VALUES: usize = 32;

/// A prefix range of metadata values holding fewer rows than this is *narrow*: a page is
/// read from the `(key, value, deployment_id)` index — the range's ids, the lowest first —
/// instead of walking the deployments in id order and probing each, which needs
/// `page / density` probes (at most `page × total / NARROW_RANGE` once a range is wider).
const NARROW_RANGE: i64 = 20_000;

/// The end of a prefix range: every text starting with `prefix` sorts below it.
fn prefix_end(prefix: &str) -> String {
    format!("{prefix}\u{10FFFF}")
}

/// The metadata pattern that can drive a listing from the metadata index: the first with a
/// wildcard after a non-empty literal prefix.
fn prefix_driver(filter: &DeploymentFilter) -> Option<(&str, &str)> {
    filter
        .metadata
        .entries()
        .iter()
        .find(|(_, pattern)| pattern.exact().is_none() && !pattern.literal_prefix().is_empty())
        .map(|(key, pattern)| (key.as_str(), pattern.literal_prefix()))
}

/// The distinct values of `key` in the prefix range, lowest first: one index probe each (a
/// loose index scan), at most [`DISTINCT_VALUES`] + 1 of them — one more than the cap says
/// the range has too many to be read value by value.
fn range_values(tx: &mut dyn Tx, key: &str, prefix: &str) -> Result<Vec<String>, StoreError> {
    let end = prefix_end(prefix);
    let rows = tx.query(
        "WITH RECURSIVE range_values(value, n) AS (\
         SELECT (SELECT value FROM deployment_metadata WHERE key = ? AND value >= ? AND value < ? \
         ORDER BY value LIMIT 1), CAST(1 AS BIGINT) \
         UNION ALL \
         SELECT (SELECT m.value FROM deployment_metadata m WHERE m.key = ? AND m.value > r.value \
         AND m.value < ? ORDER BY m.value LIMIT 1), r.n + 1 \
         FROM range_values r WHERE r.value IS NOT NULL AND r.n <= ?) \
         SELECT value FROM range_values WHERE value IS NOT NULL",
        &[
            key.into(),
            prefix.into(),
            end.clone().into(),
            key.into(),
            end.into(),
            SqlValue::Int(DISTINCT_VALUES as i64),
        ],
    )?;
    Ok(rows.iter().map(|row| text(row, 0)).collect())
}

/// A chunk driven value by value: the rows of the `chunk` lowest ids after `after` among the
/// entries of `key` with one of `values` — per value an id-ordered index read of at most
/// `chunk` entries, merged (PostgreSQL reads each only as far as the merge needs).
fn values_chunk(key: &str, values: &[String], after: &str, chunk: i64) -> (String, Vec<SqlValue>) {
    let arms: Vec<String> = (0..values.len())
        .map(|at| {
            format!(
                "SELECT deployment_id FROM (SELECT deployment_id FROM deployment_metadata \
                 WHERE key = ? AND value = ? AND deployment_id > ? ORDER BY deployment_id \
                 LIMIT ?) v{at}"
            )
        })
        .collect();
    let sql = format!(
        "SELECT {INFO} FROM deployments d WHERE d.id IN (SELECT deployment_id FROM ({}) u \
         ORDER BY deployment_id LIMIT ?) ORDER BY d.id",
        arms.join(" UNION ALL ")
    );
    let mut params: Vec<SqlValue> = Vec::with_capacity(values.len() * 4 + 1);
    for value in values {
        params.push(key.into());
        params.push(value.into());
        params.push(after.into());
        params.push(SqlValue::Int(chunk));
    }
    params.push(SqlValue::Int(chunk));
    (sql, params)
}

/// A chunk driven by a narrow prefix range: the rows of the `chunk` lowest ids after `after`
/// in the range, each with the size of the range (counted up to [`NARROW_RANGE`]) as a last
/// column. One pass over at most [`NARROW_RANGE`] index entries (index-only once the table is
/// vacuumed), then `chunk` row lookups; every other filter is checked in Rust, so the chunk
/// holds exactly the ids the range yields.
fn range_chunk(key: &str, prefix: &str, after: &str, chunk: i64) -> (String, Vec<SqlValue>) {
    (
        format!(
            "WITH range_ids AS MATERIALIZED (SELECT m.deployment_id FROM deployment_metadata m \
             WHERE m.key = ? AND m.value >= ? AND m.value < ? AND m.deployment_id > ? LIMIT ?) \
             SELECT {INFO}, (SELECT COUNT(*) FROM range_ids) FROM deployments d \
             WHERE d.id IN (SELECT deployment_id FROM range_ids ORDER BY deployment_id LIMIT ?) \
             ORDER BY d.id"
        ),
        vec![
            key.into(),
            prefix.into(),
            prefix_end(prefix).into(),
            after.into(),
            SqlValue::Int(NARROW_RANGE),
            SqlValue::Int(chunk),
        ],
    )
}

/// The SQL part of a filter walking deployments by id: what an index can narrow. The rest
/// is checked in Rust.
fn prefilter(filter: &DeploymentFilter, after: &str, chunk: i64) -> (String, Vec<SqlValue>) {
    let mut sql = format!("SELECT {INFO} FROM deployments d WHERE d.id > ?");
    let mut params: Vec<SqlValue> = vec![after.into()];
    if let Some(parent) = &filter.parent_id {
        sql.push_str(" AND d.parent_id = ?");
        params.push(parent.into());
    }
    if let Some(prepared) = filter.prepared {
        sql.push_str(" AND d.prepared = ?");
        params.push(prepared.into());
    }
    if let Some(approved) = filter.approved {
        sql.push_str(" AND d.approved = ?");
        params.push(approved.into());
    }
    for (column, patterns) in [
        ("template_id", &filter.template_patterns),
        ("site_id", &filter.site_patterns),
    ] {
        if let [pattern] = patterns.as_slice() {
            if let Some(exact) = pattern.exact() {
                sql.push_str(&format!(" AND d.{column} = ?"));
                params.push(exact.into());
            } else if !pattern.literal_prefix().is_empty() {
                let prefix = pattern.literal_prefix();
                sql.push_str(&format!(" AND d.{column} >= ? AND d.{column} < ?"));
                params.push(prefix.into());
                params.push(prefix_end(prefix).into());
            }
        }
    }
    for (key, pattern) in filter.metadata.entries() {
        if let Some(exact) = pattern.exact() {
            // Driven from the (key, value, deployment_id) index: already in id order.
            sql.push_str(
                " AND d.id IN (SELECT m.deployment_id FROM deployment_metadata m \
                 WHERE m.key = ? AND m.value = ? AND m.deployment_id > ?)",
            );
            params.push(key.into());
            params.push(exact.into());
            params.push(after.into());
        } else {
            // A wide range: dense enough that walking by id finds a page quickly.
            let prefix = pattern.literal_prefix();
            sql.push_str(
                " AND EXISTS (SELECT 1 FROM deployment_metadata m WHERE m.deployment_id = d.id \
                 AND m.key = ? AND m.value >= ? AND m.value < ?)",
            );
            params.push(key.into());
            params.push(prefix.into());
            params.push(prefix_end(prefix).into());
        }
    }
    sql.push_str(" ORDER BY d.id LIMIT ?");
    params.push(SqlValue::Int(chunk));
    (sql, params)
}

/// What drives the chunks of a listing (see the module documentation).
enum Driver<'a> {
    /// The distinct values of a prefix range, each read in id order.
    Values { key: &'a str, values: Vec<String> },
    /// A narrow prefix range, read whole.
    Range { key: &'a str, prefix: &'a str },
    /// Deployments by id.
    Ids,
}

/// A page of deployments in id order, chunk by chunk from the cheapest [`Driver`]; rows are
/// checked against the whole filter in Rust.
pub(super) fn list(
    tx: &mut dyn Tx,
    filter: &DeploymentFilter,
    window: &Window,
) -> Result<(Vec<DeploymentInfo>, bool), StoreError> {
    let page = window.page_size();
    let chunk = (page as i64 * 2).max(200);
    let mut skipped = 0;
    let mut after = window.after_id.clone();
    let mut out = Vec::with_capacity(page);
    let mut driver = match prefix_driver(filter) {
        Some((key, prefix)) => {
            let values = range_values(tx, key, prefix)?;
            if values.is_empty() {
                return Ok((out, false));
            }
            if values.len() <= DISTINCT_VALUES {
                Driver::Values { key, values }
            } else {
                Driver::Range { key, prefix }
            }
        }
        None => Driver::Ids,
    };
    loop {
        let rows: Vec<Row> = match &driver {
            Driver::Values { key, values } => {
                let (sql, params) = values_chunk(key, values, &after, chunk);
                tx.query(&sql, &params)?
            }
            Driver::Range { key, prefix } => {
                let (sql, params) = range_chunk(key, prefix, &after, chunk);
                let rows = tx.query(&sql, &params)?;
                if rows.first().is_some_and(|row| int(row, 11) >= NARROW_RANGE) {
                    // A wide range: walk by id from here on.
                    driver = Driver::Ids;
                    continue;
                }
                rows
            }
            Driver::Ids => {
                let (sql, params) = prefilter(filter, &after, chunk);
                tx.query(&sql, &params)?
            }
        };
        for row in &rows {
            let info = info_row(row)?;
            after = info.id.clone();
            if !filter.matches(&info) {
                continue;
            }
            if skipped < window.offset {
                skipped += 1;
                continue;
            }
            out.push(info);
            if out.len() == page {
                return Ok((out, true));
            }
        }
        if (rows.len() as i64) < chunk {
            return Ok((out, false));
        }
    }
}
