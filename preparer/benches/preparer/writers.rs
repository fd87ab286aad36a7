//! Concurrent writers: what numbering the change log in commit order costs.
//!
//! On PostgreSQL a revision is taken from one counter row inside the writing transaction
//! (`store::sql`), so writers queue on that row from their last statement to their commit.
//! This part measures changes committed per second with `PREPARER_BENCH_WRITERS` (default 8)
//! writers spread over two stores of four connections each (two replicas on one database),
//! each making `PREPARER_BENCH_WRITES` (default 300) writes of the daemon's common kinds in
//! turn: create a deployment (one change), take its modification and write it (one change).
//! `PREPARER_BENCH_WRITER_RUNS` (default 3) runs per backend, each on a fresh store, SQLite
//! and PostgreSQL taking turns; medians, fastest and slowest. Compare the figure with one of
//! an earlier build to see the cost of a change to the log.

use std::sync::Arc;
use std::time::Instant;

use nephrite_merge::metadata::Metadata;
use nephrite_preparer::store::{self, DeploymentInfo, DeploymentUpdate, NewDeployment, Store};
use nephrite_test_services::machine::load_average;

use super::{Backends, env_usize};

/// Prints the changes per second of concurrent writers, per backend.
pub async fn figures(backends: &mut Backends) {
    let writers = env_usize("PREPARER_BENCH_WRITERS", 8).max(1);
    let writes = env_usize("PREPARER_BENCH_WRITES", 300).max(2);
    let runs = env_usize("PREPARER_BENCH_WRITER_RUNS", 3).max(1);
    let dir = backends.dir.path().to_owned();
    let mut sqlite = Vec::new();
    let mut postgres = Vec::new();
    for run in 0..runs {
        let spec = format!("sqlite:{}", dir.join(format!("writers-{run}.db")).display());
        let replicas = vec![store::open(&spec).await.expect("sqlite store")];
        sqlite.push(changes_per_second(replicas, writers, writes).await);
        let Some((_, url)) = backends.database() else {
            continue;
        };
        let mut replicas = Vec::new();
        for _ in 0..2 {
            replicas.push(store::open(&url).await.expect("postgres store"));
        }
        postgres.push(changes_per_second(replicas, writers, writes).await);
    }
    for (backend, figures) in [("SQLite", sqlite), ("PostgreSQL", postgres)] {
        if figures.is_empty() {
            continue;
        }
        let mut sorted = figures.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "writers: {backend}, {writers} writers × {writes} writes: median {:.0} changes/s of \
             {} runs (slowest {:.0}, fastest {:.0}; runs {:?}) [load {}]",
            sorted[sorted.len() / 2],
            sorted.len(),
            sorted[0],
            sorted[sorted.len() - 1],
            figures.iter().map(|f| f.round()).collect::<Vec<_>>(),
            load_average()
        );
    }
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
