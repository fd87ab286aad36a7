//! The store written once over SQL that SQLite and PostgreSQL both run: a backend supplies a
//! [`Connection`] (transactions, `?` placeholders, three value types), [`SqlStore`] does the
//! rest — so both backends behave the same by construction, and the shared test suite checks
//! it.
//!
//! Work sharing between daemons needs no row locks held across calls: a modification is taken
//! by one conditional `UPDATE … WHERE mod_token IS NULL OR mod_expires < now`, which exactly one
//! writer wins, and idempotent child creation rests on a unique index over
//! (parent, template, site, instance key) with `INSERT … ON CONFLICT DO NOTHING`.
//!
//! The change log behind `Watch` is numbered in commit order, so that a watcher resuming after
//! revision N gets every later change exactly once, in order, however many writers and
//! daemons there are: on PostgreSQL a revision is taken from a counter row inside the writing
//! transaction, by its last statement (a sequence, under READ COMMITTED, hands out numbers in
//! the order transactions *ask*, and a watcher already past 42 would skip a 41 committed
//! later); SQLite has one writer at a time. Writes log their changes through the transaction
//! ([`Tx::deferred_changes`]), which appends them just before it commits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nephrite_merge::metadata::Metadata;

use super::{
    BatchResult, BatchWrite, CatalogFilter, Change, DEFAULT_REVISIONS_KEPT, DeploymentFilter,
    DeploymentInfo, DeploymentRecord, DeploymentRevision, DeploymentUpdate, EntityKind, Fence,
    LeaseRecord, NewDeployment, PluginRecord, SiteRecord, Store, StoreError, TemplateRecord,
    Window,
};

mod batch;
mod catalog;
mod changes;
mod deployments;
mod leases;
mod listing;
mod revisions;

/// A value bound to or read from SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    /// NULL.
    Null,
    /// An integer (booleans are 0 / 1).
    Int(i64),
    /// Text.
    Text(String),
    /// A column of texts, bound as one array (`text[]`; PostgreSQL only).
    Texts(Vec<String>),
    /// A column of integers, bound as one array (`int8[]`; PostgreSQL only).
    Ints(Vec<i64>),
}

impl From<&str> for SqlValue {
    fn from(text: &str) -> Self {
        SqlValue::Text(text.to_owned())
    }
}
impl From<String> for SqlValue {
    fn from(text: String) -> Self {
        SqlValue::Text(text)
    }
}
impl From<&String> for SqlValue {
    fn from(text: &String) -> Self {
        SqlValue::Text(text.clone())
    }
}
impl From<i64> for SqlValue {
    fn from(n: i64) -> Self {
        SqlValue::Int(n)
    }
}
impl From<bool> for SqlValue {
    fn from(b: bool) -> Self {
        SqlValue::Int(i64::from(b))
    }
}

/// One row.
pub type Row = Vec<SqlValue>;

/// Statements inside one transaction. SQL uses `?` placeholders.
pub trait Tx {
    /// `sqlite` or `postgres`: where the backends' planners differ, the SQL may too.
    fn backend(&self) -> &'static str;
    /// Runs a statement; the number of rows changed.
    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, StoreError>;
    /// Runs a query; its rows.
    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError>;
    /// Where the changes this transaction logs wait, when it appends them at its end (the
    /// transactions of [`SqlStore`] do; the module's docs say why); `None`, the default: each
    /// is appended to the log at once.
    fn deferred_changes(&mut self) -> Option<&mut Vec<LoggedChange>> {
        None
    }
}

/// A change a transaction logs, waiting to be appended to the change log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedChange {
    /// What kind of entry.
    pub kind: EntityKind,
    /// Which one.
    pub id: String,
    /// Whether it was deleted (else created or updated).
    pub deleted: bool,
}

/// A transaction that keeps the changes it logs until its work is done, so that they are
/// appended by its last statement (see [`log_change`] for why).
struct Deferring<'a> {
    tx: &'a mut dyn Tx,
    changes: Vec<LoggedChange>,
}

impl Tx for Deferring<'_> {
    fn backend(&self) -> &'static str {
        self.tx.backend()
    }
    fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, StoreError> {
        self.tx.execute(sql, params)
    }
    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, StoreError> {
        self.tx.query(sql, params)
    }
    fn deferred_changes(&mut self) -> Option<&mut Vec<LoggedChange>> {
        Some(&mut self.changes)
    }
}

/// How the statements of one store operation are committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// In one transaction: committed when the work returns `Ok`, rolled back otherwise.
    Together,
    /// Each statement on its own (no `BEGIN` / `COMMIT`: on PostgreSQL two round trips fewer).
    /// For reads — PostgreSQL's READ COMMITTED gives each statement of a transaction its own
    /// snapshot anyway — and for writes that are one statement.
    EachStatement,
}

/// A database connection of one backend.
pub trait Connection: Send + 'static {
    /// `sqlite` or `postgres`.
    const BACKEND: &'static str;
    /// Runs `work`, its statements committed as `commit` says.
    fn run<T>(
        &mut self,
        commit: Commit,
        work: &mut dyn FnMut(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError>;
}

/// The store over `C` connections (one for SQLite; a few for PostgreSQL).
pub struct SqlStore<C: Connection> {
    connections: Arc<Vec<Mutex<C>>>,
    next: Arc<AtomicUsize>,
    /// One permit per connection: a call waits for a connection here, on the async side, and
    /// takes a blocking thread only once one is free. Waiting on a blocking thread instead
    /// grew the blocking pool to its 512 threads (a stack and an allocator arena each) under
    /// a burst of calls on one SQLite connection.
    permits: Arc<tokio::sync::Semaphore>,
    /// Revisions each deployment keeps ([`Store::keep_revisions`]).
    revisions_kept: Arc<AtomicUsize>,
}

impl<C: Connection> Clone for SqlStore<C> {
    fn clone(&self) -> Self {
        SqlStore {
            connections: Arc::clone(&self.connections),
            next: Arc::clone(&self.next),
            permits: Arc::clone(&self.permits),
            revisions_kept: Arc::clone(&self.revisions_kept),
        }
    }
}

impl<C: Connection> SqlStore<C> {
    /// A store over these (migrated) connections.
    pub fn new(connections: Vec<C>) -> Self {
        let permits = Arc::new(tokio::sync::Semaphore::new(connections.len().max(1)));
        SqlStore {
            connections: Arc::new(connections.into_iter().map(Mutex::new).collect()),
            next: Arc::new(AtomicUsize::new(0)),
            permits,
            revisions_kept: Arc::new(AtomicUsize::new(DEFAULT_REVISIONS_KEPT)),
        }
    }

    /// Runs `work` in a transaction on a free connection, off the async threads; the changes
    /// it logs are appended to the change log by the transaction's last statement.
    async fn run<T: Send + 'static>(
        &self,
        mut work: impl FnMut(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run_as(Commit::Together, move |tx| {
            let mut deferring = Deferring {
                tx,
                changes: Vec::new(),
            };
            let done = work(&mut deferring)?;
            append_changes(deferring.tx, &deferring.changes)?;
            Ok(done)
        })
        .await
    }

    /// Runs `work` with each statement committed on its own ([`Commit::EachStatement`]).
    async fn run_each<T: Send + 'static>(
        &self,
        work: impl FnMut(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.run_as(Commit::EachStatement, work).await
    }

    async fn run_as<T: Send + 'static>(
        &self,
        commit: Commit,
        work: impl FnMut(&mut dyn Tx) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        let mut work = work;
        // Held until the blocking work ends (also when this call is dropped meanwhile).
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Backend {
                backend: C::BACKEND,
                message: "the store is closed".to_owned(),
            })?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            // The first free connection, lowest first: work stays on few connections, whose
            // prepared statements are then already there. When all are busy, wait in turn.
            let count = store.connections.len().max(1);
            let guard = (0..count)
                .find_map(|i| store.connections[i].try_lock().ok())
                .map(Ok)
                .unwrap_or_else(|| {
                    let start = store.next.fetch_add(1, Ordering::Relaxed);
                    store.connections[start % count].lock()
                });
            let mut connection = guard.map_err(|_| StoreError::Backend {
                backend: C::BACKEND,
                message: "a connection was poisoned by a panic".to_owned(),
            })?;
            connection.run(commit, &mut work)
        })
        .await
        .map_err(|e| StoreError::Backend {
            backend: C::BACKEND,
            message: format!("store task failed: {e}"),
        })?
    }
}

pub(crate) fn text(row: &Row, at: usize) -> String {
    match row.get(at) {
        Some(SqlValue::Text(text)) => text.clone(),
        Some(SqlValue::Int(n)) => n.to_string(),
        _ => String::new(),
    }
}

pub(crate) fn int(row: &Row, at: usize) -> i64 {
    match row.get(at) {
        Some(SqlValue::Int(n)) => *n,
        Some(SqlValue::Text(text)) => text.parse().unwrap_or_default(),
        _ => 0,
    }
}

pub(crate) fn opt_int(row: &Row, at: usize) -> Option<i64> {
    match row.get(at) {
        Some(SqlValue::Int(n)) => Some(*n),
        _ => None,
    }
}

pub(crate) fn metadata_json(metadata: &Metadata) -> String {
    serde_json::to_string(metadata).unwrap_or_else(|_| "{}".to_owned())
}

pub(crate) fn read_metadata(text: &str) -> Result<Metadata, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        what: "metadata",
        message: e.to_string(),
    })
}

/// Logs a change of the transaction `tx`.
///
/// A watcher resuming after revision N must get every later change exactly once, in order, so
/// a revision may become visible only after every smaller one. On PostgreSQL, under READ
/// COMMITTED and with several connections and daemons writing at once, a number drawn from a
/// sequence does not keep that: a transaction that drew 41 and commits after the one that drew
/// 42 is skipped by a watcher already past 42. Revisions are therefore taken from one counter
/// row (`store_meta` key `revision`) inside the writing transaction: its row lock passes from
/// writer to writer only at commit, so revision order is commit order. That lock serialises
/// writers from the moment they take it, so the changes a transaction logs wait (see
/// [`Tx::deferred_changes`]) and are appended by its last statement, just before its commit:
/// the lock is held for that statement and the commit only, and a writer never waits for
/// another row while holding it. SQLite has one writer at a time (every write transaction is
/// `BEGIN IMMEDIATE`), so its `AUTOINCREMENT` already numbers in commit order.
pub(crate) fn log_change(
    tx: &mut dyn Tx,
    kind: EntityKind,
    id: &str,
    deleted: bool,
) -> Result<(), StoreError> {
    log(
        tx,
        vec![LoggedChange {
            kind,
            id: id.to_owned(),
            deleted,
        }],
    )
}

/// Logs a change (created or updated) per id, in order, as [`log_change`] does.
pub(crate) fn log_changes<'a>(
    tx: &mut dyn Tx,
    kind: EntityKind,
    ids: impl Iterator<Item = &'a str>,
) -> Result<(), StoreError> {
    let changes = ids
        .map(|id| LoggedChange {
            kind,
            id: id.to_owned(),
            deleted: false,
        })
        .collect();
    log(tx, changes)
}

fn log(tx: &mut dyn Tx, changes: Vec<LoggedChange>) -> Result<(), StoreError> {
    match tx.deferred_changes() {
        Some(deferred) => {
            deferred.extend(changes);
            Ok(())
        }
        None => append_changes(tx, &changes),
    }
}

/// How a PostgreSQL transaction appends its changes: the counter moves by their number and
/// they take the revisions it moved over, in one statement.
const APPEND_POSTGRES: &str = "WITH counter AS (
  UPDATE store_meta SET value = value + ? WHERE key = 'revision' RETURNING value)
INSERT INTO changes (revision, kind, entity_id, op)
SELECT counter.value - ? + c.n, c.kind, c.entity_id, c.op
FROM counter, unnest(?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS c(kind, entity_id, op, n)";

/// Appends `changes` to the log in `tx`, in order, with increasing revisions that follow
/// every revision committed before (see [`log_change`]).
pub(crate) fn append_changes(tx: &mut dyn Tx, changes: &[LoggedChange]) -> Result<(), StoreError> {
    if changes.is_empty() {
        return Ok(());
    }
    let op = |c: &LoggedChange| if c.deleted { "delete" } else { "put" };
    if tx.backend() == "postgres" {
        let count = changes.len() as i64;
        let appended = tx.execute(
            APPEND_POSTGRES,
            &[
                SqlValue::Int(count),
                SqlValue::Int(count),
                SqlValue::Texts(changes.iter().map(|c| c.kind.as_str().to_owned()).collect()),
                SqlValue::Texts(changes.iter().map(|c| c.id.clone()).collect()),
                SqlValue::Texts(changes.iter().map(|c| op(c).to_owned()).collect()),
            ],
        )?;
        if appended != count as u64 {
            return Err(StoreError::Corrupt {
                what: "change log revision counter",
                message: format!(
                    "store_meta has no 'revision' row, so {count} changes could not be \
                     numbered: the database was not migrated by this version's open"
                ),
            });
        }
        return Ok(());
    }
    for batch in changes.chunks(300) {
        let values = vec!["(?, ?, ?)"; batch.len()].join(", ");
        let params: Vec<SqlValue> = batch
            .iter()
            .flat_map(|c| [c.kind.as_str().into(), c.id.as_str().into(), op(c).into()])
            .collect();
        tx.execute(
            &format!("INSERT INTO changes (kind, entity_id, op) VALUES {values}"),
            &params,
        )?;
    }
    Ok(())
}

#[async_trait]
impl<C: Connection> Store for SqlStore<C> {
    fn backend(&self) -> &'static str {
        C::BACKEND
    }

    async fn put_template(&self, template: TemplateRecord) -> Result<bool, StoreError> {
        self.run(move |tx| catalog::put_template(tx, &template))
            .await
    }
    async fn get_template(&self, id: &str) -> Result<TemplateRecord, StoreError> {
        let id = id.to_owned();
        self.run_each(move |tx| catalog::get_template(tx, &id))
            .await
    }
    async fn list_templates(
        &self,
        filter: &CatalogFilter,
        window: &Window,
    ) -> Result<Vec<(String, Metadata)>, StoreError> {
        let (filter, window) = (filter.clone(), window.clone());
        self.run_each(move |tx| catalog::list_templates(tx, &filter, &window))
            .await
    }
    async fn delete_template(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run(move |tx| catalog::delete(tx, EntityKind::Template, &id))
            .await
    }

    async fn put_site(&self, site: SiteRecord) -> Result<bool, StoreError> {
        self.run(move |tx| catalog::put_site(tx, &site)).await
    }
    async fn get_site(&self, id: &str) -> Result<SiteRecord, StoreError> {
        let id = id.to_owned();
        self.run_each(move |tx| catalog::get_site(tx, &id)).await
    }
    async fn list_sites(
        &self,
        filter: &CatalogFilter,
        window: &Window,
    ) -> Result<Vec<SiteRecord>, StoreError> {
        let (filter, window) = (filter.clone(), window.clone());
        self.run_each(move |tx| catalog::list_sites(tx, &filter, &window))
            .await
    }
    async fn delete_site(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run(move |tx| catalog::delete(tx, EntityKind::Site, &id))
            .await
    }

    async fn put_plugin(&self, plugin: PluginRecord) -> Result<bool, StoreError> {
        self.run(move |tx| catalog::put_plugin(tx, &plugin)).await
    }
    async fn get_plugin(&self, name: &str) -> Result<PluginRecord, StoreError> {
        let name = name.to_owned();
        self.run_each(move |tx| catalog::get_plugin(tx, &name))
            .await
    }
    async fn list_plugins(&self) -> Result<Vec<PluginRecord>, StoreError> {
        self.run_each(catalog::list_plugins).await
    }
    async fn delete_plugin(&self, name: &str) -> Result<bool, StoreError> {
        let name = name.to_owned();
        self.run(move |tx| catalog::delete(tx, EntityKind::Plugin, &name))
            .await
    }

    async fn create_deployments(
        &self,
        deployments: Vec<NewDeployment>,
    ) -> Result<Vec<(bool, String)>, StoreError> {
        self.run(move |tx| deployments::create(tx, &deployments))
            .await
    }
    async fn apply_deployments(
        &self,
        writes: Vec<BatchWrite>,
        fence: Option<Fence>,
    ) -> Result<Vec<BatchResult>, StoreError> {
        let kept = self.revisions_kept.load(Ordering::Relaxed);
        let segments = batch::segments(writes);
        self.run(move |tx| batch::apply(tx, &segments, fence.as_ref(), kept))
            .await
    }
    async fn get_deployment(&self, id: &str) -> Result<DeploymentRecord, StoreError> {
        let id = id.to_owned();
        self.run_each(move |tx| deployments::get(tx, &id)).await
    }
    async fn get_deployment_info(&self, id: &str) -> Result<DeploymentInfo, StoreError> {
        let id = id.to_owned();
        self.run_each(move |tx| deployments::get_info(tx, &id))
            .await
    }
    async fn list_deployments(
        &self,
        filter: &DeploymentFilter,
        window: &Window,
    ) -> Result<(Vec<DeploymentInfo>, bool), StoreError> {
        let (filter, window) = (filter.clone(), window.clone());
        self.run_each(move |tx| listing::list(tx, &filter, &window))
            .await
    }
    async fn delete_deployment(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let id = id.to_owned();
        self.run(move |tx| deployments::delete(tx, &id)).await
    }
    async fn due_for_preparation(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.run_each(move |tx| deployments::due(tx, now_ms, limit))
            .await
    }

    async fn start_modification(
        &self,
        id: &str,
        token: &str,
        now_ms: i64,
        expires_ms: i64,
    ) -> Result<DeploymentRecord, StoreError> {
        let (id, token) = (id.to_owned(), token.to_owned());
        self.run_each(move |tx| {
            deployments::start_modification(tx, &id, &token, now_ms, expires_ms)
        })
        .await
    }
    async fn renew_modification(
        &self,
        id: &str,
        token: &str,
        now_ms: i64,
        expires_ms: i64,
    ) -> Result<(), StoreError> {
        let (id, token) = (id.to_owned(), token.to_owned());
        self.run_each(move |tx| {
            deployments::renew_modification(tx, &id, &token, now_ms, expires_ms)
        })
        .await
    }
    async fn write_modification(
        &self,
        id: &str,
        token: &str,
        now_ms: i64,
        update: Option<DeploymentUpdate>,
        release: bool,
    ) -> Result<DeploymentInfo, StoreError> {
        let (id, token) = (id.to_owned(), token.to_owned());
        let kept = self.revisions_kept.load(Ordering::Relaxed);
        self.run(move |tx| {
            deployments::write_modification(tx, &id, &token, now_ms, update.as_ref(), release, kept)
        })
        .await
    }
    async fn record_failure(
        &self,
        id: &str,
        token: &str,
        error: &str,
        retry_at_ms: i64,
    ) -> Result<(), StoreError> {
        let (id, token, error) = (id.to_owned(), token.to_owned(), error.to_owned());
        self.run_each(move |tx| deployments::record_failure(tx, &id, &token, &error, retry_at_ms))
            .await
    }

    async fn changes_since(&self, revision: i64, limit: usize) -> Result<Vec<Change>, StoreError> {
        self.run_each(move |tx| changes::since(tx, revision, limit))
            .await
    }
    async fn current_revision(&self) -> Result<i64, StoreError> {
        self.run_each(changes::current).await
    }
    async fn compact_changes(&self, keep: i64) -> Result<(), StoreError> {
        self.run(move |tx| changes::compact(tx, keep)).await
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        token: &str,
        duration_ms: i64,
    ) -> Result<LeaseRecord, StoreError> {
        let (name, holder, token) = (name.to_owned(), holder.to_owned(), token.to_owned());
        self.run(move |tx| leases::acquire(tx, &name, &holder, &token, duration_ms))
            .await
    }
    async fn renew_lease(
        &self,
        name: &str,
        token: &str,
        duration_ms: i64,
    ) -> Result<LeaseRecord, StoreError> {
        let (name, token) = (name.to_owned(), token.to_owned());
        self.run_each(move |tx| leases::renew(tx, &name, &token, duration_ms))
            .await
    }
    async fn release_lease(&self, name: &str, token: &str) -> Result<(), StoreError> {
        let (name, token) = (name.to_owned(), token.to_owned());
        self.run(move |tx| leases::release(tx, &name, &token)).await
    }
    async fn get_lease(&self, name: &str) -> Result<LeaseRecord, StoreError> {
        let name = name.to_owned();
        self.run_each(move |tx| leases::get(tx, &name)).await
    }

    async fn deployment_revisions(&self, id: &str) -> Result<Vec<DeploymentRevision>, StoreError> {
        let id = id.to_owned();
        self.run_each(move |tx| revisions::list(tx, &id)).await
    }
    async fn deployment_revision(
        &self,
        id: &str,
        number: i64,
    ) -> Result<DeploymentRevision, StoreError> {
        let id = id.to_owned();
        self.run_each(move |tx| revisions::get(tx, &id, number))
            .await
    }
    fn keep_revisions(&self, kept: usize) {
        self.revisions_kept.store(kept.max(1), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads of this process now.
    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_calls_waits_for_the_connection_without_a_thread_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.db");
        let store = crate::store::sqlite::open(&path.display().to_string()).expect("sqlite");
        let baseline = threads();
        let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let sampler = {
            let sampling = Arc::clone(&sampling);
            std::thread::spawn(move || {
                let mut peak = 0;
                while sampling.load(Ordering::Relaxed) {
                    peak = peak.max(threads());
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                peak
            })
        };
        let calls = (0..300).map(|i| {
            let store = store.clone();
            async move { store.get_template(&format!("t{i}")).await }
        });
        let answers = futures::future::join_all(calls).await;
        sampling.store(false, Ordering::Relaxed);
        let peak = sampler.join().expect("sampler");
        assert!(
            answers
                .iter()
                .all(|a| matches!(a, Err(StoreError::NotFound { .. }))),
            "{:?}",
            answers.first()
        );
        // One connection: one blocking thread at a time (and the sampler). Without the permits
        // each waiting call held a thread of its own: ~300.
        assert!(
            peak <= baseline + 8,
            "{peak} threads at the peak, {baseline} before"
        );
    }
}
