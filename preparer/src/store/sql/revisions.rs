//! Deployment history: every package a deployment had, numbered from 1 (the package it was
//! created with), one more per write that changed it, with when, who and a one-line summary.
//! Written in the same transaction as the deployment, so a revision exists exactly when its
//! package was committed; a write that leaves the package as it was makes none. Each
//! deployment keeps its last `kept` revisions: a new one drops those older, and deleting a
//! deployment deletes its history.

use super::{Row, SqlValue, Tx, int, text};
use crate::store::{DeploymentRevision, NewDeployment, StoreError};

/// Columns of a revision, package last.
const COLUMNS: &str = "number, created, author, summary, package";

/// Records revision 1 of each deployment just created.
pub(super) fn record_created(tx: &mut dyn Tx, made: &[&NewDeployment]) -> Result<(), StoreError> {
    if made.is_empty() {
        return Ok(());
    }
    let groups = vec!["(?, 1, ?, ?, ?, ?)"; made.len()].join(", ");
    let mut params = Vec::with_capacity(made.len() * 5);
    for new in made {
        params.push(SqlValue::from(&new.info.id));
        params.push((&new.info.created).into());
        params.push((&new.author).into());
        params.push(created_summary(new).into());
        params.push((&new.package_yaml).into());
    }
    tx.execute(
        &format!(
            "INSERT INTO deployment_revisions (deployment_id, {COLUMNS}) VALUES {groups} \
             ON CONFLICT DO NOTHING"
        ),
        &params,
    )?;
    Ok(())
}

fn created_summary(new: &NewDeployment) -> String {
    let d = &new.info;
    let mut summary = "created".to_owned();
    if !d.template_id.is_empty() {
        summary.push_str(&format!(" from template {}", d.template_id));
    }
    if !d.site_id.is_empty() {
        summary.push_str(&format!(" for site {}", d.site_id));
    }
    if !d.parent_id.is_empty() {
        summary.push_str(&format!(" by parent {}", d.parent_id));
    }
    summary
}

/// What a write that may change a deployment's package records.
pub(super) struct Written<'a> {
    pub(super) id: &'a str,
    pub(super) package_yaml: &'a str,
    pub(super) created: &'a str,
    pub(super) author: &'a str,
    pub(super) summary: &'a str,
}

/// Records `written` as the deployment's next revision when its package differs from the
/// last one, then drops revisions beyond the newest `kept`.
pub(super) fn record(
    tx: &mut dyn Tx,
    written: &Written<'_>,
    previous_package: &str,
    kept: usize,
) -> Result<(), StoreError> {
    if written.package_yaml == previous_package {
        return Ok(());
    }
    let last = tx
        .query(
            "SELECT COALESCE(MAX(number), 0) FROM deployment_revisions WHERE deployment_id = ?",
            &[written.id.into()],
        )?
        .first()
        .map_or(0, |row| int(row, 0));
    let number = last + 1;
    tx.execute(
        &format!(
            "INSERT INTO deployment_revisions (deployment_id, {COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        ),
        &[
            written.id.into(),
            number.into(),
            written.created.into(),
            written.author.into(),
            written.summary.into(),
            written.package_yaml.into(),
        ],
    )?;
    let oldest_kept = number - i64::try_from(kept.max(1)).unwrap_or(i64::MAX) + 1;
    tx.execute(
        "DELETE FROM deployment_revisions WHERE deployment_id = ? AND number < ?",
        &[written.id.into(), oldest_kept.into()],
    )?;
    Ok(())
}

/// Deletes a deployment's history.
pub(super) fn delete(tx: &mut dyn Tx, id: &str) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM deployment_revisions WHERE deployment_id = ?",
        &[id.into()],
    )?;
    Ok(())
}

fn revision_row(row: &Row, with_package: bool) -> DeploymentRevision {
    DeploymentRevision {
        number: int(row, 0),
        created: text(row, 1),
        author: text(row, 2),
        summary: text(row, 3),
        package_yaml: if with_package {
            text(row, 4)
        } else {
            String::new()
        },
    }
}

/// A deployment's kept revisions, oldest first, without packages; NotFound when the
/// deployment does not exist.
pub(super) fn list(tx: &mut dyn Tx, id: &str) -> Result<Vec<DeploymentRevision>, StoreError> {
    if tx
        .query("SELECT 1 FROM deployments WHERE id = ?", &[id.into()])?
        .is_empty()
    {
        return Err(StoreError::NotFound {
            kind: "deployment",
            id: id.to_owned(),
        });
    }
    Ok(tx
        .query(
            "SELECT number, created, author, summary FROM deployment_revisions \
             WHERE deployment_id = ? ORDER BY number",
            &[id.into()],
        )?
        .iter()
        .map(|row| revision_row(row, false))
        .collect())
}

/// One kept revision with its package.
pub(super) fn get(
    tx: &mut dyn Tx,
    id: &str,
    number: i64,
) -> Result<DeploymentRevision, StoreError> {
    let rows = tx.query(
        &format!(
            "SELECT {COLUMNS} FROM deployment_revisions WHERE deployment_id = ? AND number = ?"
        ),
        &[id.into(), number.into()],
    )?;
    match rows.first() {
        Some(row) => Ok(revision_row(row, true)),
        None => Err(StoreError::NotFound {
            kind: "revision",
            id: format!("{number} of deployment {id}"),
        }),
    }
}
