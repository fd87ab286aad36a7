//! Deployments: idempotent creation, cascading delete and the modification lease (listing is
//! in [`super::listing`]).

use nephrite_merge::metadata::Metadata;

use super::revisions::{self, Written};
use super::{
    Row, SqlValue, Tx, int, log_change, log_changes, metadata_json, opt_int, read_metadata, text,
};
use crate::store::{
    DeploymentInfo, DeploymentRecord, DeploymentUpdate, EntityKind, NewDeployment, StoreError,
};

pub(super) const INFO: &str = "id, parent_id, template_id, site_id, instance_key, metadata, created, updated, \
                    prepared, approved, error";
const FULL: &str = "id, parent_id, template_id, site_id, instance_key, metadata, created, updated, \
                    prepared, approved, error, package, mod_token, mod_expires, failures";

pub(super) fn info_row(row: &Row) -> Result<DeploymentInfo, StoreError> {
    Ok(DeploymentInfo {
        id: text(row, 0),
        parent_id: text(row, 1),
        template_id: text(row, 2),
        site_id: text(row, 3),
        instance_key: text(row, 4),
        metadata: read_metadata(&text(row, 5))?,
        created: text(row, 6),
        updated: text(row, 7),
        prepared: int(row, 8) != 0,
        approved: int(row, 9) != 0,
        error: text(row, 10),
    })
}

fn full_row(row: &Row) -> Result<DeploymentRecord, StoreError> {
    let info = info_row(row)?;
    let modification = match (row.get(12), opt_int(row, 13)) {
        (Some(SqlValue::Text(token)), Some(expires)) => Some((token.clone(), expires)),
        _ => None,
    };
    Ok(DeploymentRecord {
        info,
        package_yaml: text(row, 11),
        modification,
        failures: int(row, 14),
    })
}

fn not_found(id: &str) -> StoreError {
    StoreError::NotFound {
        kind: "deployment",
        id: id.to_owned(),
    }
}

fn find_instance(tx: &mut dyn Tx, d: &DeploymentInfo) -> Result<Option<String>, StoreError> {
    // `instance_key <> ''` lets the planner use the partial unique index (a bound parameter
    // alone does not prove the predicate); without it SQLite walks every child of the parent.
    Ok(tx
        .query(
            "SELECT id FROM deployments WHERE parent_id = ? AND template_id = ? AND site_id = ? \
             AND instance_key = ? AND instance_key <> ''",
            &[
                (&d.parent_id).into(),
                (&d.template_id).into(),
                (&d.site_id).into(),
                (&d.instance_key).into(),
            ],
        )?
        .first()
        .map(|row| text(row, 0)))
}

fn write_metadata(tx: &mut dyn Tx, id: &str, metadata: &Metadata) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM deployment_metadata WHERE deployment_id = ?",
        &[id.into()],
    )?;
    insert_metadata(
        tx,
        metadata.iter().map(|(k, v)| (id, k.as_str(), v.as_str())),
    )
}

/// Rows per multi-row statement: a deployment row binds 12 values, so this stays far below
/// the bind limits of SQLite (32,766) and PostgreSQL (65,535).
const BATCH: usize = 200;

/// `(?, ?, …), (?, ?, …), …`: `rows` groups of `columns` placeholders.
fn placeholders(rows: usize, columns: usize) -> String {
    let group = format!("({})", vec!["?"; columns].join(", "));
    vec![group; rows].join(", ")
}

/// Inserts metadata rows `(deployment, key, value)` in multi-row statements.
fn insert_metadata<'a>(
    tx: &mut dyn Tx,
    rows: impl Iterator<Item = (&'a str, &'a str, &'a str)>,
) -> Result<(), StoreError> {
    let rows: Vec<_> = rows.collect();
    for batch in rows.chunks(BATCH) {
        let params: Vec<SqlValue> = batch
            .iter()
            .flat_map(|(id, key, value)| [(*id).into(), (*key).into(), (*value).into()])
            .collect();
        tx.execute(
            &format!(
                "INSERT INTO deployment_metadata (deployment_id, key, value) VALUES {} \
                 ON CONFLICT (deployment_id, key) DO UPDATE SET value = excluded.value",
                placeholders(batch.len(), 3)
            ),
            &params,
        )?;
    }
    Ok(())
}

/// The columns a new deployment row sets (`failures` and `retry_at` start at 0).
const NEW_COLUMNS: &str = "id, parent_id, template_id, site_id, instance_key, metadata, created, \
                           updated, prepared, approved, error, package";

/// Inserts `batch` in one statement; the ids actually inserted (a row whose instance — or id —
/// exists already is skipped).
fn insert_rows(
    tx: &mut dyn Tx,
    batch: &[NewDeployment],
) -> Result<std::collections::HashSet<String>, StoreError> {
    if tx.backend() == "postgres" {
        return insert_columns(tx, batch);
    }
    let mut params: Vec<SqlValue> = Vec::with_capacity(batch.len() * 12);
    for new in batch {
        let d = &new.info;
        params.extend([
            (&d.id).into(),
            (&d.parent_id).into(),
            (&d.template_id).into(),
            (&d.site_id).into(),
            (&d.instance_key).into(),
            metadata_json(&d.metadata).into(),
            (&d.created).into(),
            (&d.updated).into(),
            d.prepared.into(),
            d.approved.into(),
            (&d.error).into(),
            (&new.package_yaml).into(),
        ]);
    }
    let groups = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)"; batch.len()].join(", ");
    Ok(tx
        .query(
            &format!(
                "INSERT INTO deployments ({NEW_COLUMNS}, failures, retry_at) VALUES {groups} \
                 ON CONFLICT DO NOTHING RETURNING id"
            ),
            &params,
        )?
        .iter()
        .map(|row| text(row, 0))
        .collect())
}

/// [`insert_rows`] on PostgreSQL: each column bound as one array and the rows made by
/// `unnest` — twelve parameters however many rows, so the server parses and binds a short
/// statement instead of one with twelve parameters per row.
fn insert_columns(
    tx: &mut dyn Tx,
    batch: &[NewDeployment],
) -> Result<std::collections::HashSet<String>, StoreError> {
    let texts = |field: &dyn Fn(&NewDeployment) -> String| {
        SqlValue::Texts(batch.iter().map(field).collect())
    };
    let ints = |field: &dyn Fn(&NewDeployment) -> bool| {
        SqlValue::Ints(batch.iter().map(|new| i64::from(field(new))).collect())
    };
    let params = [
        texts(&|new| new.info.id.clone()),
        texts(&|new| new.info.parent_id.clone()),
        texts(&|new| new.info.template_id.clone()),
        texts(&|new| new.info.site_id.clone()),
        texts(&|new| new.info.instance_key.clone()),
        texts(&|new| metadata_json(&new.info.metadata)),
        texts(&|new| new.info.created.clone()),
        texts(&|new| new.info.updated.clone()),
        ints(&|new| new.info.prepared),
        ints(&|new| new.info.approved),
        texts(&|new| new.info.error.clone()),
        texts(&|new| new.package_yaml.clone()),
    ];
    Ok(tx
        .query(
            &format!(
                "INSERT INTO deployments ({NEW_COLUMNS}, failures, retry_at) \
                 SELECT {NEW_COLUMNS}, 0, 0 FROM unnest(?::text[], ?::text[], ?::text[], \
                 ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::int8[], ?::int8[], \
                 ?::text[], ?::text[]) AS new_rows ({NEW_COLUMNS}) \
                 ON CONFLICT DO NOTHING RETURNING id"
            ),
            &params,
        )?
        .iter()
        .map(|row| text(row, 0))
        .collect())
}

/// Creates deployments a batch per statement: one multi-row insert that skips existing
/// instances, then the metadata rows and change-log entries of the rows it made. A row it
/// skipped resolves to the deployment already holding its instance.
pub(super) fn create(
    tx: &mut dyn Tx,
    deployments: &[NewDeployment],
) -> Result<Vec<(bool, String)>, StoreError> {
    let mut out = Vec::with_capacity(deployments.len());
    for batch in deployments.chunks(BATCH) {
        let inserted = insert_rows(tx, batch)?;
        let mut made = Vec::with_capacity(inserted.len());
        let mut made_new = Vec::with_capacity(inserted.len());
        for new in batch {
            let d = &new.info;
            if inserted.contains(&d.id) {
                made.push(d);
                made_new.push(new);
                out.push((true, d.id.clone()));
                continue;
            }
            let existing = match d.instance_key.is_empty() {
                true => None,
                false => find_instance(tx, d)?,
            };
            let existing = existing.ok_or_else(|| StoreError::Backend {
                backend: "sql",
                message: format!("deployment {} could not be inserted (its id exists)", d.id),
            })?;
            out.push((false, existing));
        }
        insert_metadata(
            tx,
            made.iter().flat_map(|d| {
                d.metadata
                    .iter()
                    .map(|(k, v)| (d.id.as_str(), k.as_str(), v.as_str()))
            }),
        )?;
        revisions::record_created(tx, &made_new)?;
        log_changes(
            tx,
            EntityKind::Deployment,
            made.iter().map(|d| d.id.as_str()),
        )?;
    }
    Ok(out)
}

pub(super) fn get(tx: &mut dyn Tx, id: &str) -> Result<DeploymentRecord, StoreError> {
    let rows = tx.query(
        &format!("SELECT {FULL} FROM deployments WHERE id = ?"),
        &[id.into()],
    )?;
    full_row(rows.first().ok_or_else(|| not_found(id))?)
}

pub(super) fn get_info(tx: &mut dyn Tx, id: &str) -> Result<DeploymentInfo, StoreError> {
    let rows = tx.query(
        &format!("SELECT {INFO} FROM deployments WHERE id = ?"),
        &[id.into()],
    )?;
    info_row(rows.first().ok_or_else(|| not_found(id))?)
}

pub(super) fn delete(tx: &mut dyn Tx, id: &str) -> Result<Vec<String>, StoreError> {
    if tx
        .query("SELECT 1 FROM deployments WHERE id = ?", &[id.into()])?
        .is_empty()
    {
        return Ok(Vec::new());
    }
    let mut doomed = vec![id.to_owned()];
    let mut at = 0;
    while at < doomed.len() {
        let children = tx.query(
            "SELECT id FROM deployments WHERE parent_id = ?",
            &[doomed[at].clone().into()],
        )?;
        doomed.extend(children.iter().map(|row| text(row, 0)));
        at += 1;
    }
    for id in &doomed {
        tx.execute("DELETE FROM deployments WHERE id = ?", &[id.into()])?;
        tx.execute(
            "DELETE FROM deployment_metadata WHERE deployment_id = ?",
            &[id.into()],
        )?;
        revisions::delete(tx, id)?;
        log_change(tx, EntityKind::Deployment, id, true)?;
    }
    Ok(doomed)
}

pub(super) fn due(tx: &mut dyn Tx, now_ms: i64, limit: usize) -> Result<Vec<String>, StoreError> {
    Ok(tx
        .query(
            "SELECT id FROM deployments WHERE prepared = 0 AND retry_at <= ? \
             AND (mod_token IS NULL OR mod_expires < ?) ORDER BY id LIMIT ?",
            &[
                SqlValue::Int(now_ms),
                SqlValue::Int(now_ms),
                SqlValue::Int(limit as i64),
            ],
        )?
        .iter()
        .map(|row| text(row, 0))
        .collect())
}

fn lease_state(tx: &mut dyn Tx, id: &str) -> Result<Option<i64>, StoreError> {
    let rows = tx.query(
        "SELECT mod_expires FROM deployments WHERE id = ?",
        &[id.into()],
    )?;
    let row = rows.first().ok_or_else(|| not_found(id))?;
    Ok(opt_int(row, 0))
}

pub(super) fn start_modification(
    tx: &mut dyn Tx,
    id: &str,
    token: &str,
    now_ms: i64,
    expires_ms: i64,
) -> Result<DeploymentRecord, StoreError> {
    // One statement (the lease taken and the row read together), so it needs no transaction.
    let taken = tx.query(
        &format!(
            "UPDATE deployments SET mod_token = ?, mod_expires = ? \
             WHERE id = ? AND (mod_token IS NULL OR mod_expires < ?) RETURNING {FULL}"
        ),
        &[
            token.into(),
            SqlValue::Int(expires_ms),
            id.into(),
            SqlValue::Int(now_ms),
        ],
    )?;
    match taken.first() {
        Some(row) => full_row(row),
        None => {
            let until_ms = lease_state(tx, id)?.unwrap_or(now_ms);
            Err(StoreError::Busy {
                id: id.to_owned(),
                until_ms,
            })
        }
    }
}

fn lost(tx: &mut dyn Tx, id: &str, token: &str) -> StoreError {
    match lease_state(tx, id) {
        Err(err) => err,
        Ok(_) => StoreError::LeaseLost {
            id: id.to_owned(),
            token: token.to_owned(),
        },
    }
}

/// A lease is lost only when another token took it (after it expired): a holder whose lease
/// ran out while nobody else wanted the deployment still holds it.
pub(super) fn renew_modification(
    tx: &mut dyn Tx,
    id: &str,
    token: &str,
    _now_ms: i64,
    expires_ms: i64,
) -> Result<(), StoreError> {
    let renewed = tx.execute(
        "UPDATE deployments SET mod_expires = ? WHERE id = ? AND mod_token = ?",
        &[SqlValue::Int(expires_ms), id.into(), token.into()],
    )?;
    if renewed == 0 {
        return Err(lost(tx, id, token));
    }
    Ok(())
}

pub(super) fn write_modification(
    tx: &mut dyn Tx,
    id: &str,
    token: &str,
    _now_ms: i64,
    update: Option<&DeploymentUpdate>,
    release: bool,
    revisions_kept: usize,
) -> Result<DeploymentInfo, StoreError> {
    // The package before the write, for the history (read under the token: none when the
    // lease is lost, which the UPDATE below reports).
    let previous = match update {
        Some(_) => tx
            .query(
                "SELECT package FROM deployments WHERE id = ? AND mod_token = ?",
                &[id.into(), token.into()],
            )?
            .first()
            .map(|row| text(row, 0)),
        None => None,
    };
    // Each UPDATE returns the row it wrote: no read after it.
    let written = match update {
        Some(u) => {
            let release_sql = if release {
                ", mod_token = NULL, mod_expires = NULL"
            } else {
                ""
            };
            // A prepared package ends the retries; so does a package written and released
            // (a person's or a plugin's new input, which may fix what failed): it is due at
            // once. The loop's failure record writes without releasing, then backs off.
            let reset = if u.prepared || release {
                ", failures = 0, retry_at = 0"
            } else {
                ""
            };
            tx.query(
                &format!(
                    "UPDATE deployments SET package = ?, prepared = ?, approved = ?, error = ?, \
                     metadata = ?, updated = ?{release_sql}{reset} \
                     WHERE id = ? AND mod_token = ? RETURNING {INFO}"
                ),
                &[
                    (&u.package_yaml).into(),
                    u.prepared.into(),
                    u.approved.into(),
                    (&u.error).into(),
                    metadata_json(&u.metadata).into(),
                    (&u.updated).into(),
                    id.into(),
                    token.into(),
                ],
            )?
        }
        None if release => tx.query(
            &format!(
                "UPDATE deployments SET mod_token = NULL, mod_expires = NULL \
                 WHERE id = ? AND mod_token = ? RETURNING {INFO}"
            ),
            &[id.into(), token.into()],
        )?,
        None => tx.query(
            &format!(
                "UPDATE deployments SET mod_token = mod_token \
                 WHERE id = ? AND mod_token = ? RETURNING {INFO}"
            ),
            &[id.into(), token.into()],
        )?,
    };
    let Some(row) = written.first() else {
        return Err(lost(tx, id, token));
    };
    let info = info_row(row)?;
    if let Some(u) = update {
        let written = Written {
            id,
            package_yaml: &u.package_yaml,
            created: &u.updated,
            author: &u.author,
            summary: &u.summary,
        };
        revisions::record(
            tx,
            &written,
            previous.as_deref().unwrap_or_default(),
            revisions_kept,
        )?;
        write_metadata(tx, id, &u.metadata)?;
        log_change(tx, EntityKind::Deployment, id, false)?;
    }
    Ok(info)
}

pub(super) fn record_failure(
    tx: &mut dyn Tx,
    id: &str,
    token: &str,
    error: &str,
    retry_at_ms: i64,
) -> Result<(), StoreError> {
    let changed = tx.execute(
        "UPDATE deployments SET error = ?, retry_at = ?, failures = failures + 1 \
         WHERE id = ? AND mod_token = ?",
        &[
            error.into(),
            SqlValue::Int(retry_at_ms),
            id.into(),
            token.into(),
        ],
    )?;
    if changed == 0 {
        return Err(lost(tx, id, token));
    }
    Ok(())
}

/// Writes `update` to deployment `id` as a one-shot modification does (the package, its
/// fields, a revision when the package changed, the metadata rows, a change), when no live
/// modification holds it at `now_ms` ([`StoreError::Busy`]) and, with `if_updated`, when its
/// `updated` is still that ([`StoreError::Changed`]). On PostgreSQL the row is locked from
/// the check to the commit, so a modification cannot start in between.
pub(super) fn write_unheld(
    tx: &mut dyn Tx,
    id: &str,
    update: &DeploymentUpdate,
    if_updated: Option<&str>,
    now_ms: i64,
    revisions_kept: usize,
) -> Result<DeploymentInfo, StoreError> {
    let lock = if tx.backend() == "postgres" {
        " FOR UPDATE"
    } else {
        ""
    };
    let rows = tx.query(
        &format!(
            "SELECT package, updated, mod_token, mod_expires FROM deployments WHERE id = ?{lock}"
        ),
        &[id.into()],
    )?;
    let row = rows.first().ok_or_else(|| not_found(id))?;
    if let Some(expected) = if_updated {
        let actual = text(row, 1);
        if actual != expected {
            return Err(StoreError::Changed {
                id: id.to_owned(),
                expected: expected.to_owned(),
                actual,
            });
        }
    }
    if let (Some(SqlValue::Text(_)), Some(until_ms)) = (row.get(2), opt_int(row, 3))
        && until_ms >= now_ms
    {
        return Err(StoreError::Busy {
            id: id.to_owned(),
            until_ms,
        });
    }
    let previous = text(row, 0);
    let written = tx.query(
        &format!(
            "UPDATE deployments SET package = ?, prepared = ?, approved = ?, error = ?, \
             metadata = ?, updated = ?, mod_token = NULL, mod_expires = NULL, failures = 0, \
             retry_at = 0 WHERE id = ? RETURNING {INFO}"
        ),
        &[
            (&update.package_yaml).into(),
            update.prepared.into(),
            update.approved.into(),
            (&update.error).into(),
            metadata_json(&update.metadata).into(),
            (&update.updated).into(),
            id.into(),
        ],
    )?;
    let info = info_row(written.first().ok_or_else(|| not_found(id))?)?;
    let record = Written {
        id,
        package_yaml: &update.package_yaml,
        created: &update.updated,
        author: &update.author,
        summary: &update.summary,
    };
    revisions::record(tx, &record, &previous, revisions_kept)?;
    write_metadata(tx, id, &update.metadata)?;
    log_change(tx, EntityKind::Deployment, id, false)?;
    Ok(info)
}
