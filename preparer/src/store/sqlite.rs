//! The SQLite backend: one file (created on first start), WAL journal, one connection.

use std::path::Path;

use rusqlite::types::{Value as Sqlite, ValueRef};

use super::StoreError;
use super::sql::{Commit, Connection, Row, SqlStore, SqlValue, Tx};

/// The schema; every statement is idempotent, so it runs at every start.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS templates (
  id TEXT PRIMARY KEY, metadata TEXT NOT NULL, package TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sites (
  id TEXT PRIMARY KEY, metadata TEXT NOT NULL, package TEXT NOT NULL,
  template_id TEXT NOT NULL, deployment_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS plugins (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS deployments (
  id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, template_id TEXT NOT NULL,
  site_id TEXT NOT NULL, instance_key TEXT NOT NULL, metadata TEXT NOT NULL,
  created TEXT NOT NULL, updated TEXT NOT NULL, prepared INTEGER NOT NULL,
  approved INTEGER NOT NULL, error TEXT NOT NULL, package TEXT NOT NULL,
  mod_token TEXT, mod_expires INTEGER, failures INTEGER NOT NULL, retry_at INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS deployments_instance
  ON deployments (parent_id, template_id, site_id, instance_key) WHERE instance_key <> '';
CREATE INDEX IF NOT EXISTS deployments_parent ON deployments (parent_id, id);
CREATE INDEX IF NOT EXISTS deployments_unprepared ON deployments (prepared, id);
CREATE TABLE IF NOT EXISTS deployment_metadata (
  deployment_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY (deployment_id, key));
CREATE INDEX IF NOT EXISTS deployment_metadata_value
  ON deployment_metadata (key, value, deployment_id);
CREATE TABLE IF NOT EXISTS changes (
  revision INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,
  entity_id TEXT NOT NULL, op TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS deployment_revisions (
  deployment_id TEXT NOT NULL, number INTEGER NOT NULL, created TEXT NOT NULL,
  author TEXT NOT NULL, summary TEXT NOT NULL, package TEXT NOT NULL,
  PRIMARY KEY (deployment_id, number));
CREATE TABLE IF NOT EXISTS leases (
  name TEXT PRIMARY KEY, holder TEXT NOT NULL, token TEXT NOT NULL,
  expires_ms INTEGER NOT NULL, transitions INTEGER NOT NULL);
";

/// One SQLite connection.
pub struct SqliteConnection(rusqlite::Connection);

fn backend(err: rusqlite::Error) -> StoreError {
    StoreError::Backend {
        backend: "sqlite",
        message: err.to_string(),
    }
}

/// Opens (creating when absent) the SQLite store at `path` and migrates it.
pub fn open(path: &str) -> Result<SqlStore<SqliteConnection>, StoreError> {
    Ok(SqlStore::new(vec![connect(path)?]))
}

/// The connection [`open`] makes, migrated, for a caller that builds its own [`SqlStore`] over
/// it (a test that wraps the connection, for one). Several may share one file: their writes
/// take the file's write lock in turn.
pub fn connect(path: &str) -> Result<SqliteConnection, StoreError> {
    if let Some(dir) = Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Backend {
            backend: "sqlite",
            message: format!("cannot create {}: {e}", dir.display()),
        })?;
    }
    let connection = rusqlite::Connection::open(path).map_err(|e| StoreError::Backend {
        backend: "sqlite",
        message: format!("cannot open {path}: {e}"),
    })?;
    connection
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;",
        )
        .map_err(backend)?;
    connection.execute_batch(SCHEMA).map_err(backend)?;
    Ok(SqliteConnection(connection))
}

/// A text column as a `String`: checked as UTF-8 in one pass and copied once (the store
/// writes only UTF-8); the lossy decoder, several times slower on a megabyte package, only
/// for bytes that are not.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn bind(value: &SqlValue) -> Result<Sqlite, StoreError> {
    match value {
        SqlValue::Null => Ok(Sqlite::Null),
        SqlValue::Int(n) => Ok(Sqlite::Integer(*n)),
        SqlValue::Text(t) => Ok(Sqlite::Text(t.clone())),
        SqlValue::Texts(_) | SqlValue::Ints(_) => Err(StoreError::Backend {
            backend: "sqlite",
            message: "SQLite binds no arrays".to_owned(),
        }),
    }
}

/// Statements on a connection, inside a transaction or not.
struct SqliteTx<'a>(&'a rusqlite::Connection);

impl Tx for SqliteTx<'_> {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, StoreError> {
        let mut statement = self.0.prepare_cached(sql).map_err(backend)?;
        let bound = params.iter().map(bind).collect::<Result<Vec<_>, _>>()?;
        let changed = statement
            .execute(rusqlite::params_from_iter(bound))
            .map_err(backend)?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        let mut statement = self.0.prepare_cached(sql).map_err(backend)?;
        let columns = statement.column_count();
        let bound = params.iter().map(bind).collect::<Result<Vec<_>, _>>()?;
        let mut rows = statement
            .query(rusqlite::params_from_iter(bound))
            .map_err(backend)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(backend)? {
            let mut values = Vec::with_capacity(columns);
            for at in 0..columns {
                values.push(match row.get_ref(at).map_err(backend)? {
                    ValueRef::Null => SqlValue::Null,
                    ValueRef::Integer(n) => SqlValue::Int(n),
                    ValueRef::Real(f) => SqlValue::Int(f as i64),
                    ValueRef::Text(t) | ValueRef::Blob(t) => SqlValue::Text(text(t)),
                });
            }
            out.push(values);
        }
        Ok(out)
    }
}

impl Connection for SqliteConnection {
    const BACKEND: &'static str = "sqlite";

    fn run<T>(
        &mut self,
        commit: Commit,
        work: &mut dyn FnMut(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if commit == Commit::EachStatement {
            return work(&mut SqliteTx(&self.0));
        }
        let transaction = self
            .0
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(backend)?;
        let result = work(&mut SqliteTx(&transaction));
        match result {
            Ok(value) => {
                transaction.commit().map_err(backend)?;
                Ok(value)
            }
            Err(err) => {
                // Dropping the transaction rolls it back.
                drop(transaction);
                Err(err)
            }
        }
    }
}
