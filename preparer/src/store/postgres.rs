//! The PostgreSQL backend: the same SQL as SQLite over a few connections. Text columns use the
//! `C` collation so ids sort bytewise, as in SQLite (keyset paging and prefix ranges rely on
//! it). Several daemons may share one database: see [`super::sql`] for how they share work.

use std::collections::{HashMap, HashSet};

use postgres::types::{ToSql, Type};
use postgres::{Client, GenericClient, NoTls, Statement};

use super::StoreError;
use super::sql::{Commit, Connection, Row, SqlStore, SqlValue, Tx};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS templates (
  id TEXT COLLATE "C" PRIMARY KEY, metadata TEXT NOT NULL, package TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sites (
  id TEXT COLLATE "C" PRIMARY KEY, metadata TEXT NOT NULL, package TEXT NOT NULL,
  template_id TEXT NOT NULL, deployment_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS plugins (id TEXT COLLATE "C" PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS deployments (
  id TEXT COLLATE "C" PRIMARY KEY, parent_id TEXT COLLATE "C" NOT NULL,
  template_id TEXT COLLATE "C" NOT NULL, site_id TEXT COLLATE "C" NOT NULL,
  instance_key TEXT COLLATE "C" NOT NULL, metadata TEXT NOT NULL,
  created TEXT NOT NULL, updated TEXT NOT NULL, prepared BIGINT NOT NULL,
  approved BIGINT NOT NULL, error TEXT NOT NULL, package TEXT NOT NULL,
  mod_token TEXT, mod_expires BIGINT, failures BIGINT NOT NULL, retry_at BIGINT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS deployments_instance
  ON deployments (parent_id, template_id, site_id, instance_key) WHERE instance_key <> '';
CREATE INDEX IF NOT EXISTS deployments_parent ON deployments (parent_id, id);
CREATE INDEX IF NOT EXISTS deployments_unprepared ON deployments (prepared, id);
CREATE TABLE IF NOT EXISTS deployment_metadata (
  deployment_id TEXT COLLATE "C" NOT NULL, key TEXT COLLATE "C" NOT NULL,
  value TEXT COLLATE "C" NOT NULL, PRIMARY KEY (deployment_id, key));
CREATE INDEX IF NOT EXISTS deployment_metadata_value
  ON deployment_metadata (key, value, deployment_id);
CREATE TABLE IF NOT EXISTS changes (
  revision BIGINT PRIMARY KEY, kind TEXT NOT NULL,
  entity_id TEXT NOT NULL, op TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS deployment_revisions (
  deployment_id TEXT COLLATE "C" NOT NULL, number BIGINT NOT NULL, created TEXT NOT NULL,
  author TEXT NOT NULL, summary TEXT NOT NULL, package TEXT NOT NULL,
  PRIMARY KEY (deployment_id, number));
CREATE TABLE IF NOT EXISTS leases (
  name TEXT COLLATE "C" PRIMARY KEY, holder TEXT NOT NULL, token TEXT NOT NULL,
  expires_ms BIGINT NOT NULL, transitions BIGINT NOT NULL);
"#;

/// Whether the change log is an old one, numbered by a sequence (`BIGSERIAL`): its revision
/// column then has a default.
const NUMBERED_BY_SEQUENCE: &str = "SELECT 1 FROM information_schema.columns \
WHERE table_schema = current_schema() AND table_name = 'changes' AND column_name = 'revision' \
AND column_default IS NOT NULL";

/// Moves an old change log from its sequence to the revision counter (see
/// `sql::log_change`): the default goes first, which waits for the writers of the old
/// scheme in flight and makes any later one fail (a NOT NULL error) instead of taking a
/// revision out of commit order; then the counter starts after every revision used.
const FROM_SEQUENCE: &str = "
ALTER TABLE changes ALTER COLUMN revision DROP DEFAULT;
DROP SEQUENCE IF EXISTS changes_revision_seq;
";

/// The revision counter, created once: after the newest change and after the compaction mark
/// (a compacted log may be empty).
const COUNTER: &str = "
INSERT INTO store_meta (key, value)
SELECT 'revision', GREATEST(
  COALESCE((SELECT MAX(revision) FROM changes), 0),
  COALESCE((SELECT value FROM store_meta WHERE key = 'compacted'), 0))
ON CONFLICT (key) DO NOTHING;
";

/// Touches every table and index once (plans only; no rows are read).
const WARM_UP: &str = "
EXPLAIN SELECT * FROM templates WHERE id = '';
EXPLAIN SELECT * FROM sites WHERE id = '';
EXPLAIN SELECT * FROM plugins WHERE id = '';
EXPLAIN SELECT * FROM deployments WHERE id = '' OR parent_id = '' OR prepared = 0;
EXPLAIN SELECT * FROM deployment_metadata WHERE deployment_id = '' OR key = '';
EXPLAIN SELECT * FROM changes WHERE revision = 0;
EXPLAIN SELECT * FROM store_meta WHERE key = '';
";

/// Prepared statements kept per connection; beyond this many distinct SQL texts (listings
/// build their SQL from the filters) the cache starts over.
const STATEMENT_CACHE: usize = 256;

/// The statements of one connection. A SQL text seen for the first time runs as an unnamed
/// statement with its parameter types given (parse, bind and execute in one round trip); seen
/// again, it is prepared and kept, so from then on the server neither parses it nor, once its
/// plan is generic, plans it. One-off texts (a batch of unusual size) never cost a prepare.
#[derive(Default)]
struct Statements {
    prepared: HashMap<String, Statement>,
    seen: HashSet<String>,
}

impl Statements {
    /// The prepared statement of `sql`, when it is worth having: `None` the first time.
    fn lookup<G: GenericClient>(
        &mut self,
        client: &mut G,
        sql: &str,
    ) -> Result<Option<Statement>, StoreError> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(Some(statement.clone()));
        }
        if self.seen.len() >= STATEMENT_CACHE {
            self.seen.clear();
        }
        if self.seen.insert(sql.to_owned()) {
            return Ok(None);
        }
        let statement = client.prepare(&numbered(sql)).map_err(backend)?;
        if self.prepared.len() >= STATEMENT_CACHE {
            self.prepared.clear();
        }
        self.prepared.insert(sql.to_owned(), statement.clone());
        Ok(Some(statement))
    }

    /// A failed statement is prepared afresh next time (its plan may be what failed).
    fn forget(&mut self, sql: &str) {
        self.prepared.remove(sql);
    }
}

/// One PostgreSQL connection, with its statements.
pub struct PostgresConnection {
    client: Option<Client>,
    statements: Statements,
}

impl Drop for PostgresConnection {
    /// The synchronous client blocks while closing, which must not happen on an async thread
    /// (the last store handle may be dropped anywhere): close it on a thread of its own.
    fn drop(&mut self) {
        let statements = std::mem::take(&mut self.statements);
        if let Some(client) = self.client.take() {
            let _ = std::thread::Builder::new()
                .name("postgres-close".into())
                .spawn(move || {
                    drop(statements);
                    drop(client)
                });
        }
    }
}

fn backend(err: postgres::Error) -> StoreError {
    StoreError::Backend {
        backend: "postgres",
        message: err.to_string(),
    }
}

/// Connects `connections` times to `url` and migrates the schema (serialised by an advisory
/// lock, so daemons starting together do not race).
pub fn open(url: &str, connections: usize) -> Result<SqlStore<PostgresConnection>, StoreError> {
    Ok(SqlStore::new(connect(url, connections)?))
}

/// The connections [`open`] makes, migrated and warmed up, for a caller that builds its own
/// [`SqlStore`] over them (a test that wraps each connection, for one).
pub fn connect(url: &str, connections: usize) -> Result<Vec<PostgresConnection>, StoreError> {
    let mut clients = Vec::with_capacity(connections.max(1));
    for _ in 0..connections.max(1) {
        clients.push(
            Client::connect(url, NoTls).map_err(|e| StoreError::Backend {
                backend: "postgres",
                message: format!("cannot connect: {e}"),
            })?,
        );
    }
    let first = &mut clients[0];
    first
        .batch_execute("SELECT pg_advisory_lock(7207)")
        .map_err(backend)?;
    let migrated = migrate(first);
    first
        .batch_execute("SELECT pg_advisory_unlock(7207)")
        .map_err(backend)?;
    migrated?;
    // A backend loads a table's catalog entries the first time it touches the table: do that
    // now for every connection, not inside the first requests.
    for client in &mut clients {
        client.batch_execute(WARM_UP).map_err(backend)?;
    }
    Ok(clients
        .into_iter()
        .map(|client| PostgresConnection {
            client: Some(client),
            statements: Statements::default(),
        })
        .collect())
}

/// Creates what is missing of the schema and moves an old change log to the revision
/// counter, in one transaction (the caller holds the migration lock).
fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut transaction = client.transaction().map_err(backend)?;
    transaction.batch_execute(SCHEMA).map_err(backend)?;
    let old = !transaction
        .query(NUMBERED_BY_SEQUENCE, &[])
        .map_err(backend)?
        .is_empty();
    if old {
        transaction.batch_execute(FROM_SEQUENCE).map_err(backend)?;
    }
    transaction.batch_execute(COUNTER).map_err(backend)?;
    transaction.commit().map_err(backend)
}

/// `?` placeholders → `$1`, `$2`, … (the SQL here has no `?` inside literals).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// NULL as a bound value (typed text: the SQL here binds no NULL where a number is expected).
static NULL: Option<&str> = None;

/// The parameters with their types: integers as `int8`, text as `text`, borrowed.
fn typed(params: &[SqlValue]) -> Vec<(&(dyn ToSql + Sync), Type)> {
    params
        .iter()
        .map(|value| -> (&(dyn ToSql + Sync), Type) {
            match value {
                SqlValue::Null => (&NULL, Type::TEXT),
                SqlValue::Int(n) => (n, Type::INT8),
                SqlValue::Text(t) => (t, Type::TEXT),
                SqlValue::Texts(list) => (list, Type::TEXT_ARRAY),
                SqlValue::Ints(list) => (list, Type::INT8_ARRAY),
            }
        })
        .collect()
}

fn value(row: &postgres::Row, at: usize) -> Result<SqlValue, StoreError> {
    Ok(match *row.columns()[at].type_() {
        Type::INT8 => row
            .try_get::<_, Option<i64>>(at)
            .map_err(backend)?
            .map_or(SqlValue::Null, SqlValue::Int),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(at)
            .map_err(backend)?
            .map_or(SqlValue::Null, |n| SqlValue::Int(n.into())),
        _ => row
            .try_get::<_, Option<String>>(at)
            .map_err(backend)?
            .map_or(SqlValue::Null, SqlValue::Text),
    })
}

/// Statements on a client or inside a transaction of it.
struct PostgresTx<'a, G: GenericClient> {
    client: &'a mut G,
    statements: &'a mut Statements,
}

impl<G: GenericClient> PostgresTx<'_, G> {
    /// Runs `sql` through its prepared statement or, the first time, as an unnamed one.
    fn run<T>(
        &mut self,
        sql: &str,
        params: &[SqlValue],
        prepared: impl FnOnce(&mut G, &Statement, &[&(dyn ToSql + Sync)]) -> Result<T, postgres::Error>,
        unnamed: impl FnOnce(&mut G, &str, &[(&(dyn ToSql + Sync), Type)]) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let typed = typed(params);
        let result = match self.statements.lookup(self.client, sql)? {
            Some(statement) => {
                let values: Vec<&(dyn ToSql + Sync)> = typed.iter().map(|(v, _)| *v).collect();
                prepared(self.client, &statement, &values)
            }
            None => unnamed(self.client, &numbered(sql), &typed),
        };
        if result.is_err() {
            self.statements.forget(sql);
        }
        result.map_err(backend)
    }
}

impl<G: GenericClient> Tx for PostgresTx<'_, G> {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, StoreError> {
        self.run(
            sql,
            params,
            |client, statement, values| client.execute(statement, values),
            |client, sql, typed| client.execute_typed(sql, typed),
        )
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        let rows = self.run(
            sql,
            params,
            |client, statement, values| client.query(statement, values),
            |client, sql, typed| client.query_typed(sql, typed),
        )?;
        rows.iter()
            .map(|row| (0..row.len()).map(|at| value(row, at)).collect())
            .collect()
    }
}

impl Connection for PostgresConnection {
    const BACKEND: &'static str = "postgres";

    fn run<T>(
        &mut self,
        commit: Commit,
        work: &mut dyn FnMut(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let client = self.client.as_mut().ok_or_else(|| StoreError::Backend {
            backend: "postgres",
            message: "the connection is closed".to_owned(),
        })?;
        if commit == Commit::EachStatement {
            return work(&mut PostgresTx {
                client,
                statements: &mut self.statements,
            });
        }
        let mut transaction = client.transaction().map_err(backend)?;
        let result = work(&mut PostgresTx {
            client: &mut transaction,
            statements: &mut self.statements,
        });
        match result {
            Ok(value) => {
                transaction.commit().map_err(backend)?;
                Ok(value)
            }
            Err(err) => Err(err),
        }
    }
}
