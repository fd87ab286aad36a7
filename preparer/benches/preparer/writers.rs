//! Concurrent writers: what numbering the change log in commit order costs, against a
//! yardstick measured in the same run.
//!
//! On PostgreSQL a revision is taken from one counter row inside the writing transaction
//! (`store::sql`), so writers queue on that row from their last statement to their commit.
//! This part measures changes committed per second with `PREPARER_BENCH_WRITERS` (default 8)
//! writers spread over two stores of four connections each (two replicas on one database),
//! each making `PREPARER_BENCH_WRITES` (default 1,000) writes of the daemon's common kinds in
//! turn: create a deployment (one change), take its modification and write it (one change).
//!
//! The yardstick runs the very same store code and transactions on a database where the
//! commit-order step is taken out: once the store has created its schema, `store_meta` becomes
//! a view over the renamed table whose `INSTEAD OF UPDATE` trigger draws the revision from a
//! sequence (as the `BIGSERIAL` did before the counter row) and touches no row, so no writer
//! waits for another's commit ([`without_commit_order`]). The yardstick pays a PL/pgSQL call a
//! change that the old `BIGSERIAL` default did not, which flatters the ratio slightly.
//!
//! After one uncounted warm-up run on PostgreSQL (the first run of a fresh server was the
//! slowest of every set), `PREPARER_BENCH_WRITER_RUNS` (default 3) runs, each on fresh
//! stores: SQLite, then
//! PostgreSQL in commit order and the yardstick, the two taking turns at going first. Per run
//! the ratio commit order / yardstick; the median of the runs' ratios, their spread, and the
//! medians of each figure.

use std::sync::Arc;
use std::time::Instant;

use nephrite_merge::metadata::Metadata;
use nephrite_preparer::store::{self, DeploymentInfo, DeploymentUpdate, NewDeployment, Store};
use nephrite_test_services::Postgres;
use nephrite_test_services::machine::load_average;

use super::{Backends, env_usize};

/// Turns a migrated store's database into the yardstick: the revision counter row replaced by
/// a sequence drawn in an `INSTEAD OF UPDATE` trigger (no row lock, so revisions in draw
/// order, not commit order). A statement appending more than one change is refused (the
/// sequence would not give consecutive numbers); the bench's writes append one each.
const WITHOUT_COMMIT_ORDER: &str = r#"
BEGIN;
ALTER TABLE store_meta RENAME TO store_meta_kept;
CREATE SEQUENCE yardstick_revision MINVALUE 0 START 0;
SELECT setval('yardstick_revision', (SELECT value FROM store_meta_kept WHERE key = 'revision'));
CREATE VIEW store_meta AS SELECT key, value FROM store_meta_kept;
CREATE FUNCTION yardstick_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.key <> 'revision' OR NEW.value - OLD.value <> 1 THEN
    RAISE EXCEPTION 'the yardstick numbers one change a statement (key %, % changes)',
      NEW.key, NEW.value - OLD.value;
  END IF;
  NEW.value := nextval('yardstick_revision');
  RETURN NEW;
END $$;
CREATE TRIGGER yardstick_revision INSTEAD OF UPDATE ON store_meta
  FOR EACH ROW EXECUTE FUNCTION yardstick_revision();
COMMIT;
"#;

/// Applies [`WITHOUT_COMMIT_ORDER`] to `database`; the counter row's value, which stays as it
/// is while the yardstick runs.
fn without_commit_order(pg: &Postgres, database: &str) -> String {
    pg.psql(database, WITHOUT_COMMIT_ORDER)
        .expect("the yardstick's schema");
    counter(pg, database)
}

fn counter(pg: &Postgres, database: &str) -> String {
    pg.psql(
        database,
        "SELECT value FROM store_meta_kept WHERE key = 'revision'",
    )
    .expect("the counter row")
}

fn median(figures: &[f64]) -> f64 {
    let mut sorted = figures.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn spread(figures: &[f64]) -> (f64, f64) {
    let mut sorted = figures.to_vec();
    sorted.sort_by(f64::total_cmp);
    (sorted[0], sorted[sorted.len() - 1])
}

/// Prints the changes per second of concurrent writers, per backend, and the ratio of
/// PostgreSQL in commit order to the yardstick.
pub async fn figures(backends: &mut Backends) {
    let writers = env_usize("PREPARER_BENCH_WRITERS", 8).max(1);
    let writes = env_usize("PREPARER_BENCH_WRITES", 1_000).max(2);
    let runs = env_usize("PREPARER_BENCH_WRITER_RUNS", 3).max(1);
    let dir = backends.dir.path().to_owned();
    let mut sqlite = Vec::new();
    let mut ordered = Vec::new();
    let mut yardstick = Vec::new();
    let mut ratios = Vec::new();
    if let Some((_, url)) = backends.database() {
        let mut replicas = Vec::new();
        for _ in 0..2 {
            replicas.push(store::open(&url).await.expect("postgres store"));
        }
        let warm = changes_per_second(replicas, writers, writes).await;
        println!("writers: PostgreSQL warm-up run (not counted): {warm:.0} changes/s");
    }
    for run in 0..runs {
        let spec = format!("sqlite:{}", dir.join(format!("writers-{run}.db")).display());
        let replicas = vec![store::open(&spec).await.expect("sqlite store")];
        sqlite.push(changes_per_second(replicas, writers, writes).await);
        if backends.pg.is_none() {
            continue;
        }
        let mut this_run = [0.0; 2];
        for in_commit_order in [run % 2 == 0, run % 2 == 1] {
            let (name, url) = backends.database().expect("a PostgreSQL database");
            let mut replicas = Vec::new();
            for _ in 0..2 {
                replicas.push(store::open(&url).await.expect("postgres store"));
            }
            let pg = backends.pg.as_ref().expect("PostgreSQL");
            let kept = (!in_commit_order).then(|| without_commit_order(pg, &name));
            let figure = changes_per_second(replicas, writers, writes).await;
            if let Some(kept) = kept {
                assert_eq!(
                    counter(pg, &name),
                    kept,
                    "the yardstick left the counter row alone"
                );
                yardstick.push(figure);
                this_run[1] = figure;
            } else {
                ordered.push(figure);
                this_run[0] = figure;
            }
        }
        ratios.push(this_run[0] / this_run[1]);
    }
    let line = |what: &str, figures: &[f64]| {
        let (slowest, fastest) = spread(figures);
        println!(
            "writers: {what}, {writers} writers × {writes} writes: median {:.0} changes/s of \
             {} runs (slowest {slowest:.0}, fastest {fastest:.0}; runs {:?}) [load {}]",
            median(figures),
            figures.len(),
            figures.iter().map(|f| f.round()).collect::<Vec<_>>(),
            load_average()
        );
    };
    line("SQLite", &sqlite);
    if ratios.is_empty() {
        return;
    }
    line("PostgreSQL, commit order", &ordered);
    line(
        "PostgreSQL, yardstick (same transactions, no commit-order step)",
        &yardstick,
    );
    let (low, high) = spread(&ratios);
    println!(
        "writers: PostgreSQL commit order / yardstick: median ratio {:.2}× of {} interleaved \
         runs (spread {low:.2}–{high:.2}; runs {:?}; ratio of the medians {:.2}×; goal ≥ 0.8×)",
        median(&ratios),
        ratios.len(),
        ratios
            .iter()
            .map(|r| (r * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        median(&ordered) / median(&yardstick),
    );
}

/// Runs the writers over `replicas` (writer i on replica i mod n): changes committed per
/// second, counted in the log.
async fn changes_per_second(replicas: Vec<Arc<dyn Store>>, writers: usize, writes: usize) -> f64 {
    let before = replicas[0].current_revision().await.expect("revision");
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let store = Arc::clone(&replicas[writer % replicas.len()]);
            tokio::spawn(async move { write(store, writer, writes).await })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
    let elapsed = started.elapsed();
    let after = replicas[0].current_revision().await.expect("revision");
    let changes = after - before;
    assert_eq!(
        changes,
        (writers * (writes / 2) * 2) as i64,
        "one change per write"
    );
    changes as f64 / elapsed.as_secs_f64()
}

/// One writer: creates a deployment, then writes it under a modification, `writes / 2` times.
async fn write(store: Arc<dyn Store>, writer: usize, writes: usize) {
    for n in 0..writes / 2 {
        let id = format!("w{writer}-{n}");
        let info = DeploymentInfo {
            id: id.clone(),
            template_id: "t".into(),
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-01T00:00:00Z".into(),
            ..DeploymentInfo::default()
        };
        store
            .create_deployments(vec![NewDeployment {
                info,
                package_yaml: "kind: Deployment\n".into(),
                author: "bench".into(),
            }])
            .await
            .expect("create");
        let token = format!("{id}-modification");
        store
            .start_modification(&id, &token, 0, i64::MAX)
            .await
            .expect("start modification");
        let update = DeploymentUpdate {
            package_yaml: "kind: Deployment\nprepared: true\n".into(),
            prepared: true,
            approved: true,
            error: String::new(),
            metadata: Metadata::new(),
            updated: "2026-01-01T00:00:01Z".into(),
            author: "bench".into(),
            summary: "write".into(),
        };
        store
            .write_modification(&id, &token, 0, Some(update), true)
            .await
            .expect("write");
    }
}
