//! The change log behind `Watch` promises what etcd and the Kubernetes API promise: a watcher
//! resuming after revision N gets every later change exactly once, in order — also with
//! several writers and several daemons ("replicas") on one database.
//!
//! The danger is a revision taken before its transaction commits: a transaction that took
//! revision 41 and commits after the one that took 42 is skipped by a watcher already past 42.
//! Real writers only rarely commit that way round, so the test makes them: every writing
//! transaction is held, after its statements (change-log rows included) and before its
//! commit, at a [`Gate`], which lets the held transactions commit one at a time in a random
//! order while watchers read the log. A log numbered by commit order passes whatever the
//! order; one numbered at insert (PostgreSQL's `BIGSERIAL` under READ COMMITTED) fails.
//!
//! The writers are 8, on two stores of 4 connections each (two replicas); the 4 watchers read
//! through a third store and start at random revisions during the writes. The seed is printed
//! and may be set with `CHANGE_LOG_SEED` to replay a run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use nephrite_merge::metadata::Metadata;
use nephrite_preparer::store::sql::{Commit, Connection, SqlStore, Tx};
use nephrite_preparer::store::{
    self, Change, DeploymentInfo, DeploymentUpdate, EntityKind, NewDeployment, Store, StoreError,
    TemplateRecord,
};

/// Concurrent writers.
const WRITERS: usize = 8;
/// Store operations each writer makes.
const OPERATIONS: usize = 20;
/// Watchers.
const WATCHERS: usize = 4;

/// A small deterministic generator (splitmix64), so a failing run replays from its seed.
#[derive(Clone)]
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn seed() -> u64 {
    let seed = std::env::var("CHANGE_LOG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    println!("CHANGE_LOG_SEED={seed}");
    seed
}

/// Where writing transactions wait, after their statements and before their commit, until
/// the gate's keeper lets them commit — one at a time, in a random order.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    /// Tickets of the transactions waiting.
    held: Vec<u64>,
    /// The ticket allowed to commit.
    released: Option<u64>,
    next_ticket: u64,
    /// Once open, nobody waits.
    open: bool,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until this transaction's turn to commit.
    fn hold(&self) {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.held.push(ticket);
        self.changed.notify_all();
        while !state.open && state.released != Some(ticket) {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.held.retain(|t| *t != ticket);
        if state.released == Some(ticket) {
            state.released = None;
        }
        self.changed.notify_all();
    }

    /// Lets the held transactions commit one at a time in a random order until `stop`: waits
    /// for one to be held, gives the other writers a moment to reach the gate too, then
    /// releases a random one of those waiting and waits until it has gone.
    fn keep(&self, mut random: Random, stop: &AtomicBool) {
        loop {
            let mut state = self.lock();
            while state.held.is_empty() && !stop.load(Ordering::SeqCst) {
                state = self
                    .changed
                    .wait_timeout(state, Duration::from_millis(20))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            if stop.load(Ordering::SeqCst) {
                state.open = true;
                self.changed.notify_all();
                return;
            }
            drop(state);
            std::thread::sleep(Duration::from_millis(4));
            let mut state = self.lock();
            let ticket = state.held[random.below(state.held.len())];
            state.released = Some(ticket);
            self.changed.notify_all();
            while state.released == Some(ticket) {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

/// A connection whose transactions wait at the gate before they commit.
struct Held<C> {
    inner: C,
    gate: Arc<Gate>,
}

impl<C: Connection> Connection for Held<C> {
    const BACKEND: &'static str = C::BACKEND;

    fn run<T>(
        &mut self,
        commit: Commit,
        work: &mut dyn FnMut(&mut dyn Tx) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let gate = Arc::clone(&self.gate);
        self.inner.run(commit, &mut |tx| {
            let done = work(tx)?;
            if commit == Commit::Together {
                gate.hold();
            }
            Ok(done)
        })
    }
}

fn deployment(id: &str, parent: &str) -> NewDeployment {
    NewDeployment {
        info: DeploymentInfo {
            id: id.into(),
            parent_id: parent.into(),
            template_id: "t".into(),
            site_id: String::new(),
            instance_key: String::new(),
            metadata: Metadata::new(),
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-01T00:00:00Z".into(),
            prepared: false,
            approved: false,
            error: String::new(),
        },
        package_yaml: String::new(),
        author: "test".into(),
    }
}

/// One writer's operations, on its own deployments (children included) and its own template;
/// how many changes it logged.
async fn write(store: Arc<dyn Store>, writer: usize, mut random: Random) -> usize {
    let mut logged = 0;
    let mut alive: BTreeMap<String, String> = BTreeMap::new(); // id → parent
    let mut made = 0;
    for op in 0..OPERATIONS {
        let choice = if alive.is_empty() { 0 } else { random.below(4) };
        match choice {
            0 => {
                // One to three deployments in one transaction, some children of its own.
                let count = 1 + random.below(3);
                let mut batch = Vec::new();
                for _ in 0..count {
                    made += 1;
                    let id = format!("w{writer}-d{made}");
                    let parent = match alive.keys().nth(random.below(alive.len() + 1)) {
                        Some(parent) if random.below(2) == 0 => parent.clone(),
                        _ => String::new(),
                    };
                    batch.push(deployment(&id, &parent));
                }
                let created = store.create_deployments(batch.clone()).await.unwrap();
                assert!(created.iter().all(|(new, _)| *new), "{created:?}");
                logged += created.len();
                for d in batch {
                    alive.insert(d.info.id, d.info.parent_id);
                }
            }
            1 => {
                let id = alive.keys().nth(random.below(alive.len())).unwrap().clone();
                let token = format!("w{writer}-op{op}");
                store
                    .start_modification(&id, &token, 0, i64::MAX)
                    .await
                    .unwrap();
                let update = DeploymentUpdate {
                    package_yaml: format!("op {op}"),
                    prepared: true,
                    approved: false,
                    error: String::new(),
                    metadata: Metadata::new(),
                    updated: "2026-01-01T00:00:01Z".into(),
                    author: "test".into(),
                    summary: "write".into(),
                };
                store
                    .write_modification(&id, &token, 0, Some(update), true)
                    .await
                    .unwrap();
                logged += 1;
            }
            2 => {
                // Deletes a deployment with its descendants: one change each, one transaction.
                let id = alive.keys().nth(random.below(alive.len())).unwrap().clone();
                let deleted = store.delete_deployment(&id).await.unwrap();
                assert!(!deleted.is_empty(), "{id} was there to delete");
                logged += deleted.len();
                for gone in deleted {
                    alive.remove(&gone);
                }
            }
            _ => {
                store
                    .put_template(TemplateRecord {
                        id: format!("w{writer}-template"),
                        metadata: Metadata::new(),
                        package_yaml: format!("op {op}"),
                    })
                    .await
                    .unwrap();
                logged += 1;
            }
        }
    }
    logged
}

/// What one watcher saw: the revision it started after and every change it read.
struct Watched {
    from: i64,
    changes: Vec<Change>,
}

/// Starts once the log has reached a random revision (at most `target`), at a random revision
/// at or below the current one, then reads until the writers are done and the log is read.
async fn watch(
    store: Arc<dyn Store>,
    mut random: Random,
    target: i64,
    done: Arc<AtomicBool>,
) -> Watched {
    let wait_for = random.below(target.max(1) as usize) as i64;
    while store.current_revision().await.unwrap() < wait_for && !done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let current = store.current_revision().await.unwrap();
    let from = random.below(current as usize + 1) as i64;
    let mut revision = from;
    let mut changes = Vec::new();
    loop {
        let finished = done.load(Ordering::SeqCst);
        let read = store.changes_since(revision, 16).await.unwrap();
        match read.last() {
            Some(last) => revision = last.revision,
            None if finished => return Watched { from, changes },
            None => tokio::time::sleep(Duration::from_millis(1)).await,
        }
        changes.extend(read);
    }
}

fn describe(change: &Change) -> String {
    format!(
        "{} {} {}{}",
        change.revision,
        change.kind.as_str(),
        change.id,
        if change.deleted { " (deleted)" } else { "" }
    )
}

/// Every watcher saw exactly the log after its start, in order; the log holds every change
/// the writers made, in increasing revisions.
fn check(log: &[Change], logged: usize, watched: &[Watched]) {
    assert_eq!(
        log.len(),
        logged,
        "the log holds one change per write ({logged} made)"
    );
    assert!(
        log.windows(2).all(|w| w[0].revision < w[1].revision),
        "the log's revisions increase"
    );
    for (n, watcher) in watched.iter().enumerate() {
        let expected: Vec<&Change> = log.iter().filter(|c| c.revision > watcher.from).collect();
        let seen: Vec<&Change> = watcher.changes.iter().collect();
        if seen == expected {
            continue;
        }
        let missed: Vec<String> = expected
            .iter()
            .filter(|c| !seen.contains(c))
            .map(|c| describe(c))
            .collect();
        let out_of_order = seen
            .windows(2)
            .find(|w| w[0].revision >= w[1].revision)
            .map(|w| format!("{} then {}", describe(w[0]), describe(w[1])));
        panic!(
            "watcher {n}, resuming after revision {}, saw {} changes of the {} after it: \
             missed {missed:?}; first out of order or repeated: {out_of_order:?}",
            watcher.from,
            seen.len(),
            expected.len()
        );
    }
}

/// Runs the writers on `replicas` (their connections held at `gate`) and the watchers on
/// `reader`, then checks what the watchers saw.
async fn run(replicas: Vec<Arc<dyn Store>>, reader: Arc<dyn Store>, gate: Arc<Gate>) {
    let mut random = Random(seed());
    let stop = Arc::new(AtomicBool::new(false));
    let keeper = {
        let (gate, stop, random) = (Arc::clone(&gate), Arc::clone(&stop), Random(random.next()));
        std::thread::spawn(move || gate.keep(random, &stop))
    };
    let done = Arc::new(AtomicBool::new(false));
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| {
            let target = (WRITERS * OPERATIONS) as i64;
            tokio::spawn(watch(
                Arc::clone(&reader),
                Random(random.next()),
                target,
                Arc::clone(&done),
            ))
        })
        .collect();
    let finished = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = Arc::clone(&replicas[writer % replicas.len()]);
            let random = Random(random.next());
            let finished = Arc::clone(&finished);
            tokio::spawn(async move {
                let logged = write(store, writer, random).await;
                finished.fetch_add(1, Ordering::SeqCst);
                logged
            })
        })
        .collect();
    let mut logged = 0;
    for writer in writers {
        logged += writer.await.expect("writer");
    }
    done.store(true, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    keeper.join().expect("gate keeper");
    let mut watched = Vec::new();
    for watcher in watchers {
        watched.push(watcher.await.expect("watcher"));
    }
    let log = reader.changes_since(0, usize::MAX >> 1).await.unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), WRITERS);
    check(&log, logged, &watched);
    assert!(
        log.iter()
            .any(|c| c.kind == EntityKind::Deployment && c.deleted),
        "the run deleted something"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_watchers_see_every_change_once_in_order_whatever_the_commit_order() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => {
            return e.skip(
                "postgres_watchers_see_every_change_once_in_order_whatever_the_commit_order",
            );
        }
    };
    let url = pg.url();
    let gate = Arc::new(Gate::default());
    let mut replicas: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..2 {
        let url = url.clone();
        let connections = tokio::task::spawn_blocking(move || store::postgres::connect(&url, 4))
            .await
            .unwrap()
            .unwrap();
        let held = connections
            .into_iter()
            .map(|inner| Held {
                inner,
                gate: Arc::clone(&gate),
            })
            .collect();
        replicas.push(Arc::new(SqlStore::new(held)));
    }
    let reader = store::open(&url).await.unwrap();
    run(replicas, reader, gate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_watchers_see_every_change_once_in_order_whatever_the_commit_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.db").display().to_string();
    let gate = Arc::new(Gate::default());
    let mut replicas: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..WRITERS {
        let path = path.clone();
        let inner = tokio::task::spawn_blocking(move || store::sqlite::connect(&path))
            .await
            .unwrap()
            .unwrap();
        replicas.push(Arc::new(SqlStore::new(vec![Held {
            inner,
            gate: Arc::clone(&gate),
        }])));
    }
    let reader = store::open(&format!("sqlite:{path}")).await.unwrap();
    run(replicas, reader, gate).await;
}

/// A database written by the sequence-numbered change log (`BIGSERIAL`) keeps working: its
/// changes stay readable at their revisions, new ones follow them, and a writer of the old
/// scheme can no longer take a revision out of commit order (its insert is refused).
#[tokio::test]
async fn postgres_change_log_numbered_by_a_sequence_moves_to_the_counter() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => return e.skip("postgres_change_log_numbered_by_a_sequence_moves_to_the_counter"),
    };
    // The old log: three changes numbered by the sequence, the first compacted away.
    pg.psql(
        "postgres",
        "CREATE TABLE changes (revision BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, \
           entity_id TEXT NOT NULL, op TEXT NOT NULL); \
         CREATE TABLE store_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL); \
         INSERT INTO changes (kind, entity_id, op) VALUES \
           ('template', 'a', 'put'), ('template', 'b', 'put'), ('site', 'c', 'delete'); \
         DELETE FROM changes WHERE revision = 1; \
         INSERT INTO store_meta VALUES ('compacted', 1);",
    )
    .expect("the old schema");
    let store = store::open(&pg.url()).await.expect("opens the old schema");
    assert_eq!(store.current_revision().await.unwrap(), 3);
    let old = store.changes_since(1, 10).await.unwrap();
    assert_eq!(
        old.iter().map(describe).collect::<Vec<_>>(),
        ["2 template b", "3 site c (deleted)"]
    );
    store
        .put_template(TemplateRecord {
            id: "d".into(),
            metadata: Metadata::new(),
            package_yaml: String::new(),
        })
        .await
        .unwrap();
    let new = store.changes_since(3, 10).await.unwrap();
    assert_eq!(
        new.iter().map(describe).collect::<Vec<_>>(),
        ["4 template d"]
    );
    // Opening again (another replica starting) changes nothing.
    let again = store::open(&pg.url()).await.expect("opens again");
    assert_eq!(again.current_revision().await.unwrap(), 4);
    let old_writer = pg.psql(
        "postgres",
        "INSERT INTO changes (kind, entity_id, op) VALUES ('template', 'e', 'put')",
    );
    let refused = old_writer.expect_err("an insert without a revision is refused");
    assert!(refused.to_string().contains("revision"), "{refused}");
}

/// A log compacted to nothing still numbers after the compaction mark.
#[tokio::test]
async fn postgres_counter_of_an_emptied_old_log_starts_after_the_compaction_mark() {
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => pg,
        Err(e) => {
            return e
                .skip("postgres_counter_of_an_emptied_old_log_starts_after_the_compaction_mark");
        }
    };
    pg.psql(
        "postgres",
        "CREATE TABLE changes (revision BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, \
           entity_id TEXT NOT NULL, op TEXT NOT NULL); \
         CREATE TABLE store_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL); \
         INSERT INTO store_meta VALUES ('compacted', 7);",
    )
    .expect("the old schema");
    let store = store::open(&pg.url()).await.expect("opens the old schema");
    store
        .put_template(TemplateRecord {
            id: "a".into(),
            metadata: Metadata::new(),
            package_yaml: String::new(),
        })
        .await
        .unwrap();
    let log = store.changes_since(7, 10).await.unwrap();
    assert_eq!(
        log.iter().map(describe).collect::<Vec<_>>(),
        ["8 template a"]
    );
}
