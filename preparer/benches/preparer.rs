//! Preparer benchmarks (`cargo bench -p nephrite-preparer --bench preparer`), printing figures
//! and ratios for the targets, each with the load average (two shared cores):
//!
//! 1. merging a 1,000-resource merge package into a 1,000-resource template (target < 5 ms),
//!    and the ratio for 10× the input (target ≤ 12×): after a warm-up, interleaved pairs of
//!    runs (`PREPARER_BENCH_MERGE_RUNS`, default 31), medians and the spread of the ratios;
//! 2. a Placement over N sites (default 10,000; `PREPARER_BENCH_SITES`) on SQLite and, when a
//!    PostgreSQL can be started, on PostgreSQL: time until all N children exist and are
//!    prepared (target ≤ 60 s; PostgreSQL within 2× of SQLite), `PREPARER_BENCH_LARGE_RUNS`
//!    (default 3) runs per backend, the backends taking turns run by run. It also runs at 200
//!    sites (`PREPARER_BENCH_SMALL_SITES`), `PREPARER_BENCH_SMALL_RUNS` (default 5) times per
//!    backend, where fixed per-statement costs dominate: median, fastest and slowest.
//!    `PREPARER_BENCH_PG_LOG=1` has the server log every statement of those runs and prints
//!    their count and server time by protocol step;
//! 3. M deployments (default 1,000,000; `PREPARER_BENCH_DEPLOYMENTS`) filled through the store
//!    trait, then one page of 100 by an exact and by a prefix metadata pattern matching ~1%
//!    (target < 50 ms) — on PostgreSQL also after `VACUUM (ANALYZE)`, the state autovacuum
//!    brings a bulk-loaded table to; then the real `preparer serve` binary on that store while
//!    a client pages through all M rows over the Data API, its RSS sampled from `/proc`
//!    (target < 200 MB).
//!
//! 4. concurrent writers: changes committed per second by 8 writers on two stores sharing one
//!    database, per backend, and on PostgreSQL the ratio to a yardstick run beside it (the same
//!    transactions without the commit-order step): what numbering the change log in commit
//!    order costs (`preparer/writers.rs`).
//!
//! `PREPARER_BENCH_PARTS` picks parts (default `merge,writers,placement,pages`);
//! `PREPARER_BENCH_SKIP_PAGES=1` stops after the placements.
//!
//! The bench allocates with the daemon's allocator (mimalloc, as `src/main.rs` sets it), so the
//! merges and the in-process placements are measured as `preparer serve` runs them.

#[path = "preparer/merge.rs"]
mod merge;
#[path = "preparer/pages.rs"]
mod pages;
#[path = "preparer/placement.rs"]
mod placement;
#[path = "preparer/writers.rs"]
mod writers;

use std::time::Duration;

use nephrite_test_services::Postgres;
use nephrite_test_services::machine::load_average;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Where the stores live: SQLite files in a temporary directory and, when one can be started,
/// a throwaway PostgreSQL with a fresh database for each store.
struct Backends {
    dir: tempfile::TempDir,
    pg: Option<Postgres>,
    databases: usize,
}

impl Backends {
    fn start() -> Self {
        let pg = match Postgres::start() {
            Ok(pg) => Some(pg),
            Err(err) => {
                println!("PostgreSQL: skipped ({err})");
                None
            }
        };
        Backends {
            dir: tempfile::tempdir().expect("tempdir"),
            pg,
            databases: 0,
        }
    }

    /// A fresh PostgreSQL database: (name, URL); `None` without PostgreSQL.
    fn database(&mut self) -> Option<(String, String)> {
        let pg = self.pg.as_ref()?;
        self.databases += 1;
        let name = format!("bench{}", self.databases);
        let url = pg.create_database(&name).expect("create database");
        Some((name, url))
    }
}

#[tokio::main]
async fn main() {
    println!("load average at start: {}", load_average());
    let parts = std::env::var("PREPARER_BENCH_PARTS")
        .unwrap_or_else(|_| "merge,writers,placement,pages".to_owned());
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    if part("merge") {
        merge::figures(env_usize("PREPARER_BENCH_MERGE_RUNS", 31));
    }
    if !part("placement") && !part("pages") && !part("writers") {
        return;
    }
    let mut backends = Backends::start();
    if part("writers") {
        writers::figures(&mut backends).await;
    }
    if part("placement") {
        placement::figures(&mut backends).await;
    }
    if part("pages") && std::env::var_os("PREPARER_BENCH_SKIP_PAGES").is_none() {
        pages::figures(&mut backends).await;
    }
}
