//! Templates, sites and plugins: small tables, filtered by pattern in Rust after a keyset scan.

use nephrite_merge::metadata::Metadata;

use super::{Row, SqlValue, Tx, log_change, metadata_json, read_metadata, text};
use crate::store::{
    CatalogFilter, EntityKind, PluginRecord, SiteRecord, StoreError, TemplateRecord, Window,
};

const SCAN: i64 = 2000;

fn exists(tx: &mut dyn Tx, table: &str, key: &str, id: &str) -> Result<bool, StoreError> {
    Ok(!tx
        .query(
            &format!("SELECT 1 FROM {table} WHERE {key} = ?"),
            &[id.into()],
        )?
        .is_empty())
}

pub(super) fn put_template(tx: &mut dyn Tx, t: &TemplateRecord) -> Result<bool, StoreError> {
    let created = !exists(tx, "templates", "id", &t.id)?;
    tx.execute(
        "INSERT INTO templates (id, metadata, package) VALUES (?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, package = excluded.package",
        &[
            (&t.id).into(),
            metadata_json(&t.metadata).into(),
            (&t.package_yaml).into(),
        ],
    )?;
    log_change(tx, EntityKind::Template, &t.id, false)?;
    Ok(created)
}

pub(super) fn get_template(tx: &mut dyn Tx, id: &str) -> Result<TemplateRecord, StoreError> {
    let rows = tx.query(
        "SELECT id, metadata, package FROM templates WHERE id = ?",
        &[id.into()],
    )?;
    let row = rows.first().ok_or_else(|| StoreError::NotFound {
        kind: "template",
        id: id.to_owned(),
    })?;
    Ok(TemplateRecord {
        id: text(row, 0),
        metadata: read_metadata(&text(row, 1))?,
        package_yaml: text(row, 2),
    })
}

/// Scans `table` by id after `window.after_id`, keeping rows `keep` accepts, honouring offset
/// and page size.
fn scan<T>(
    tx: &mut dyn Tx,
    select: &str,
    window: &Window,
    mut keep: impl FnMut(&Row) -> Result<Option<T>, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let page = window.page_size();
    let mut skipped = 0;
    let mut after = window.after_id.clone();
    let mut out = Vec::new();
    loop {
        let rows = tx.query(
            &format!("{select} WHERE id > ? ORDER BY id LIMIT ?"),
            &[after.clone().into(), SqlValue::Int(SCAN)],
        )?;
        for row in &rows {
            after = text(row, 0);
            if let Some(item) = keep(row)? {
                if skipped < window.offset {
                    skipped += 1;
                    continue;
                }
                out.push(item);
                if out.len() == page {
                    return Ok(out);
                }
            }
        }
        if (rows.len() as i64) < SCAN {
            return Ok(out);
        }
    }
}

pub(super) fn list_templates(
    tx: &mut dyn Tx,
    filter: &CatalogFilter,
    window: &Window,
) -> Result<Vec<(String, Metadata)>, StoreError> {
    scan(tx, "SELECT id, metadata FROM templates", window, |row| {
        let id = text(row, 0);
        let metadata = read_metadata(&text(row, 1))?;
        Ok(filter.matches(&id, &metadata).then_some((id, metadata)))
    })
}

pub(super) fn put_site(tx: &mut dyn Tx, s: &SiteRecord) -> Result<bool, StoreError> {
    let created = !exists(tx, "sites", "id", &s.id)?;
    tx.execute(
        "INSERT INTO sites (id, metadata, package, template_id, deployment_id) VALUES (?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET metadata = excluded.metadata, package = excluded.package, \
         template_id = excluded.template_id, deployment_id = excluded.deployment_id",
        &[
            (&s.id).into(),
            metadata_json(&s.metadata).into(),
            (&s.package_yaml).into(),
            (&s.template_id).into(),
            (&s.deployment_id).into(),
        ],
    )?;
    log_change(tx, EntityKind::Site, &s.id, false)?;
    Ok(created)
}

fn site_row(row: &Row, with_package: bool) -> Result<SiteRecord, StoreError> {
    Ok(SiteRecord {
        id: text(row, 0),
        metadata: read_metadata(&text(row, 1))?,
        template_id: text(row, 2),
        deployment_id: text(row, 3),
        package_yaml: if with_package {
            text(row, 4)
        } else {
            String::new()
        },
    })
}

pub(super) fn get_site(tx: &mut dyn Tx, id: &str) -> Result<SiteRecord, StoreError> {
    let rows = tx.query(
        "SELECT id, metadata, template_id, deployment_id, package FROM sites WHERE id = ?",
        &[id.into()],
    )?;
    site_row(
        rows.first().ok_or_else(|| StoreError::NotFound {
            kind: "site",
            id: id.to_owned(),
        })?,
        true,
    )
}

pub(super) fn list_sites(
    tx: &mut dyn Tx,
    filter: &CatalogFilter,
    window: &Window,
) -> Result<Vec<SiteRecord>, StoreError> {
    scan(
        tx,
        "SELECT id, metadata, template_id, deployment_id FROM sites",
        window,
        |row| {
            let site = site_row(row, false)?;
            Ok(filter.matches(&site.id, &site.metadata).then_some(site))
        },
    )
}

pub(super) fn put_plugin(tx: &mut dyn Tx, p: &PluginRecord) -> Result<bool, StoreError> {
    let created = !exists(tx, "plugins", "id", &p.name)?;
    let body = serde_json::to_string(p).map_err(|e| StoreError::Corrupt {
        what: "plugin",
        message: e.to_string(),
    })?;
    tx.execute(
        "INSERT INTO plugins (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body",
        &[(&p.name).into(), body.into()],
    )?;
    log_change(tx, EntityKind::Plugin, &p.name, false)?;
    Ok(created)
}

fn plugin_row(row: &Row) -> Result<PluginRecord, StoreError> {
    serde_json::from_str(&text(row, 0)).map_err(|e| StoreError::Corrupt {
        what: "plugin",
        message: e.to_string(),
    })
}

pub(super) fn get_plugin(tx: &mut dyn Tx, name: &str) -> Result<PluginRecord, StoreError> {
    let rows = tx.query("SELECT body FROM plugins WHERE id = ?", &[name.into()])?;
    plugin_row(rows.first().ok_or_else(|| StoreError::NotFound {
        kind: "plugin",
        id: name.to_owned(),
    })?)
}

pub(super) fn list_plugins(tx: &mut dyn Tx) -> Result<Vec<PluginRecord>, StoreError> {
    tx.query("SELECT body FROM plugins ORDER BY id", &[])?
        .iter()
        .map(plugin_row)
        .collect()
}

pub(super) fn delete(tx: &mut dyn Tx, kind: EntityKind, id: &str) -> Result<bool, StoreError> {
    let table = match kind {
        EntityKind::Template => "templates",
        EntityKind::Site => "sites",
        EntityKind::Plugin => "plugins",
        EntityKind::Deployment => "deployments",
        EntityKind::Lease => {
            return Err(StoreError::Backend {
                backend: tx.backend(),
                message: format!("lease {id}: leases are released, not deleted"),
            });
        }
    };
    let deleted = tx.execute(&format!("DELETE FROM {table} WHERE id = ?"), &[id.into()])? > 0;
    if deleted {
        log_change(tx, kind, id, true)?;
    }
    Ok(deleted)
}
