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
//! `PREPARER_BENCH_PARTS` picks parts (default `merge,placement,pages`);
//! `PREPARER_BENCH_SKIP_PAGES=1` stops after the placements.
//!
//! The bench allocates with the daemon's allocator (mimalloc, as `src/main.rs` sets it), so the
//! merges and the in-process placements are measured as `preparer serve` runs them.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use futures::StreamExt;
use nephrite_krm::{Gvk, Object, Package, keys};
use nephrite_merge::merge_package;
use nephrite_merge::metadata::MetadataSelector;
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_preparer::store::{
    self, DeploymentFilter, DeploymentInfo, NewDeployment, Store, Window,
};
use nephrite_proto::nephrite::data::v1 as pb;
use nephrite_proto::nephrite::data::v1::data_client::DataClient;
use nephrite_runtime::ServeArgs;
use nephrite_test_services::machine::{CpuTimes, load_average};
use nephrite_test_services::stats::median;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn packages(n: usize) -> (Package, Package) {
    let gvk = Gvk::new("example.org", "v1", "Tuning");
    let mut template = Package::new();
    let mut merge = Package::new();
    for i in 0..n {
        let mut object = Object::new(&gvk, format!("r{i}"));
        object
            .spec_mut()
            .expect("spec")
            .insert("a".into(), serde_json::json!({"x": i, "y": [1, 2]}));
        template.push(object.clone());
        let mut over = Object::new(&gvk, format!("r{}", i * 2));
        over.set_annotation(keys::MERGE, if i % 2 == 0 { "Override" } else { "Replace" });
        over.spec_mut()
            .expect("spec")
            .insert("a".into(), serde_json::json!({"x": -1}));
        merge.push(over);
    }
    (template, merge)
}

/// One timed merge of `merge` into a fresh copy of `template` (copying and dropping are not
/// timed). With `evict`, the caches are filled with other data between the copy and the
/// merge, so that neither size starts with its data in cache (a diagnostic: it separates
/// cache capacity from the work itself).
fn time_merge(template: &Package, merge: &Package, evict: Option<&mut Vec<u64>>) -> Duration {
    let mut target = template.clone();
    if let Some(buffer) = evict {
        for (at, word) in buffer.iter_mut().enumerate() {
            *word = word.wrapping_add(at as u64);
        }
        std::hint::black_box(&buffer);
    }
    let start = Instant::now();
    merge_package(&mut target, merge, |_| false).expect("merge");
    let took = start.elapsed();
    drop(target);
    took
}

/// Merge 1,000 into 1,000 and 10,000 into 10,000: after a warm-up, `runs` interleaved pairs
/// (small, large), so that load from other processes falls on both sizes alike. Prints the
/// medians, the ratio of the medians and the spread of the per-pair ratios (the noise).
fn merge_figures(runs: usize) {
    let (small_template, small_merge) = packages(1000);
    let (large_template, large_merge) = packages(10_000);
    for _ in 0..3 {
        time_merge(&small_template, &small_merge, None);
        time_merge(&large_template, &large_merge, None);
    }
    let (mut small, mut large, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut small_cold, mut large_cold) = (Vec::new(), Vec::new());
    // 64 MB: more than the caches this data could stay in.
    let mut evict = vec![0u64; 8 << 20];
    let times = CpuTimes::now();
    for _ in 0..runs.max(1) {
        let s = ms(time_merge(&small_template, &small_merge, None));
        let l = ms(time_merge(&large_template, &large_merge, None));
        small.push(s);
        large.push(l);
        ratios.push(l / s);
        small_cold.push(ms(time_merge(
            &small_template,
            &small_merge,
            Some(&mut evict),
        )));
        large_cold.push(ms(time_merge(
            &large_template,
            &large_merge,
            Some(&mut evict),
        )));
    }
    let shares = CpuTimes::now().since(&times);
    let (small_median, large_median) = (median(&mut small), median(&mut large));
    let ratio_median = median(&mut ratios);
    let quartile = |at: f64| ratios[((ratios.len() - 1) as f64 * at).round() as usize];
    println!(
        "merge 1,000 into 1,000:   median {small_median:>7.2} ms of {} runs (fastest {:.2}, slowest {:.2}; target < 5 ms)",
        small.len(),
        small[0],
        small[small.len() - 1]
    );
    println!(
        "merge 10,000 into 10,000: median {large_median:>7.2} ms (fastest {:.2}, slowest {:.2})",
        large[0],
        large[large.len() - 1]
    );
    println!(
        "merge 10× input: ratio of medians {:.2}×; per-pair ratios median {ratio_median:.2}×, quartiles {:.2}..{:.2}×, range {:.2}..{:.2}× (target ≤ 12×)",
        large_median / small_median,
        quartile(0.25),
        quartile(0.75),
        ratios[0],
        ratios[ratios.len() - 1]
    );
    let (small_cold, large_cold) = (median(&mut small_cold), median(&mut large_cold));
    println!(
        "  diagnostic, caches evicted before each merge: median {small_cold:.2} ms and {large_cold:.2} ms, ratio {:.2}× (the work without the cache advantage of the small size)",
        large_cold / small_cold
    );
    println!(
        "  machine during the merge runs: steal {:.1}% of the CPU time (the hypervisor running other guests), load average {}",
        shares.steal_pct,
        load_average()
    );
}

/// Placements over `sites` sites on a fresh daemon over `store_spec`, `rounds` in turn (each
/// a new parent deployment over the same sites; the first on a cold daemon, later ones on a
/// warm one — its connections have their statements prepared): for each, the time from the
/// create call until the parent is prepared (its children exist, prepared) and, with `log`
/// (the PostgreSQL server log), the statements the server ran in that time.
async fn placement(
    store_spec: &str,
    sites: usize,
    rounds: usize,
    log: Option<&std::path::Path>,
) -> Vec<(Duration, Option<String>)> {
    let command = ServeCommand {
        serve: ServeArgs::try_parse_from(["serve", "--listen", "127.0.0.1:0"]).expect("args"),
        store: store_spec.to_owned(),
        auto_approve: true,
        interval: Duration::from_millis(200),
        plugin_timeout: Duration::from_secs(30),
        lease: Duration::from_secs(30),
        retry_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        concurrency: 4,
    };
    let daemon = start(&command, false).await.expect("daemon");
    let mut client = DataClient::new(
        nephrite_runtime::dial(&daemon.endpoint)
            .await
            .expect("dial"),
    );
    let gateway =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gateway}\ndata: {workers: '2'}\n";
    let topology = "apiVersion: topology.nephio.org/v1alpha1
kind: Placement
metadata: {name: place}
spec:
  templates:
  - {template: nf, sites: [all]}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Template
metadata: {name: nf}
spec: {templateId: nf}
---
apiVersion: topology.nephio.org/v1alpha1
kind: Sites
metadata: {name: all}
spec: {select: {metadata: {Site.region: metro}}}
";
    for (id, yaml) in [("nf", gateway), ("topo", topology)] {
        client
            .register_template(pb::RegisterTemplateRequest {
                id: id.into(),
                package_yaml: yaml.into(),
                ..Default::default()
            })
            .await
            .expect("template");
    }
    futures::stream::iter(0..sites)
        .map(|n| {
            let mut client = client.clone();
            async move {
                client
                    .register_site(pb::RegisterSiteRequest {
                        id: format!("dc/{n:06}"),
                        metadata: [("Site.region".to_owned(), "metro".to_owned())].into(),
                        ..Default::default()
                    })
                    .await
                    .expect("site");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let mut rounds_taken = Vec::new();
    for _ in 0..rounds.max(1) {
        // Woken by the daemon's own change signal (the loop signals when it has written the
        // parent prepared), not by polling, which would load the store it measures.
        let mut wake = daemon.changes.subscribe();
        let log_from = log.map(|log| std::fs::metadata(log).map_or(0, |m| m.len()));
        let started = Instant::now();
        let parent = client
            .create_deployment(pb::CreateDeploymentRequest {
                template_id: "topo".into(),
                ..Default::default()
            })
            .await
            .expect("create")
            .into_inner()
            .deployment_id;
        loop {
            let info = daemon
                .store
                .get_deployment(&parent)
                .await
                .expect("get")
                .info;
            if info.prepared {
                break;
            }
            tokio::select! {
                _ = wake.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        let elapsed = started.elapsed();
        let statements = log
            .zip(log_from)
            .map(|(log, from)| statement_summary(log, from));
        let filter = DeploymentFilter {
            parent_id: Some(parent.clone()),
            prepared: Some(true),
            ..Default::default()
        };
        let mut window = Window {
            limit: 1000,
            ..Window::default()
        };
        let mut count = 0;
        loop {
            let (page, more) = daemon
                .store
                .list_deployments(&filter, &window)
                .await
                .expect("list");
            count += page.len();
            match (more, page.last()) {
                (true, Some(last)) => window.after_id = last.id.clone(),
                _ => break,
            }
        }
        assert_eq!(count, sites, "every child created and prepared");
        rounds_taken.push((elapsed, statements));
    }
    daemon.stop().await.expect("stop");
    rounds_taken
}

async fn fill(store: &Arc<dyn Store>, total: usize) {
    let batch = 5000;
    let mut made = 0;
    while made < total {
        let rows: Vec<_> = (made..(made + batch).min(total))
            .map(|n| NewDeployment {
                info: DeploymentInfo {
                    id: format!("d{n:09}"),
                    template_id: "nf".into(),
                    metadata: [(
                        "Site.region".to_owned(),
                        format!("r{:03}/{}", n % 100, n % 7),
                    )]
                    .into(),
                    created: "2026-01-01T00:00:00Z".into(),
                    updated: "2026-01-01T00:00:00Z".into(),
                    prepared: true,
                    ..DeploymentInfo::default()
                },
                package_yaml: String::new(),
            })
            .collect();
        made += rows.len();
        store.create_deployments(rows).await.expect("fill");
    }
}

/// One page of 100 by metadata `pattern`, nine times: the first run and the median.
async fn page_query(store: &Arc<dyn Store>, pattern: &str) -> (Duration, Duration) {
    let filter = DeploymentFilter {
        metadata: MetadataSelector::new([("Site.region", pattern)]).expect("pattern"),
        ..Default::default()
    };
    let mut took = Vec::new();
    for _ in 0..9 {
        let start = Instant::now();
        let (page, _) = store
            .list_deployments(&filter, &Window::default())
            .await
            .expect("page");
        took.push(start.elapsed());
        assert_eq!(page.len(), 100);
    }
    let first = took[0];
    took.sort();
    (first, took[took.len() / 2])
}

/// The resident set of process `pid`, in bytes (`VmRSS`, or `VmHWM` for the peak).
fn rss_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Kills the daemon when dropped.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real `preparer serve` on `store`, listening on a free loopback port.
async fn spawn_daemon(store: &str) -> (Daemon, nephrite_runtime::Endpoint) {
    let port = nephrite_test_services::free_loopback_port().expect("port");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_preparer"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--store",
            store,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("preparer serve starts");
    let daemon = Daemon(child);
    let endpoint: nephrite_runtime::Endpoint = format!("http://127.0.0.1:{port}")
        .parse()
        .expect("endpoint");
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (daemon, endpoint);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("preparer serve did not listen on {port} within 30 s");
}

/// Pages through every deployment over the Data API (1,000 a page) against a real daemon,
/// sampling its RSS: (rows seen, time, peak RSS sampled, RSS before).
async fn stream_all(store: &str) -> (usize, Duration, u64, u64) {
    let (daemon, endpoint) = spawn_daemon(store).await;
    let pid = daemon.0.id();
    let before = rss_bytes(pid, "VmRSS:").unwrap_or_default();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(before));
    let sampler = {
        let peak = Arc::clone(&peak);
        tokio::spawn(async move {
            loop {
                if let Some(rss) = rss_bytes(pid, "VmRSS:") {
                    peak.fetch_max(rss, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut client = DataClient::new(nephrite_runtime::dial(&endpoint).await.expect("dial"))
        .max_decoding_message_size(64 << 20);
    let started = Instant::now();
    let mut after = String::new();
    let mut rows = 0;
    loop {
        let page = client
            .list_deployments(pb::ListDeploymentsRequest {
                window: Some(pb::Window {
                    max_count: 1000,
                    after_id: after.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .expect("page")
            .into_inner();
        rows += page.deployments.len();
        if page.next_after_id.is_empty() {
            break;
        }
        after = page.next_after_id;
    }
    let elapsed = started.elapsed();
    sampler.abort();
    let peak = peak
        .load(std::sync::atomic::Ordering::Relaxed)
        .max(rss_bytes(pid, "VmHWM:").unwrap_or_default());
    drop(daemon);
    (rows, elapsed, peak, before)
}

/// Several timings: median, fastest, slowest.
struct Runs(Vec<Duration>);

impl Runs {
    fn sorted(mut took: Vec<Duration>) -> Runs {
        took.sort();
        Runs(took)
    }
    fn median(&self) -> Duration {
        self.0.get(self.0.len() / 2).copied().unwrap_or_default()
    }
    /// `median ms (median of N; fastest..slowest ms)`.
    fn describe(&self) -> String {
        format!(
            "{:>8.1} ms (median of {}; {:.1}..{:.1} ms)",
            ms(self.median()),
            self.0.len(),
            ms(self.0.first().copied().unwrap_or_default()),
            ms(self.0.last().copied().unwrap_or_default())
        )
    }
}

/// Sums the server log from byte `from`: statements by protocol step (and simple statements
/// by their first word) with their server time.
fn statement_summary(log: &std::path::Path, from: u64) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]).into_owned();
    let mut counts = std::collections::BTreeMap::<String, (usize, f64)>::new();
    let mut slowest: Vec<(f64, String)> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.split("duration: ").nth(1) else {
            continue;
        };
        let Some((number, what)) = rest.split_once(" ms  ") else {
            continue;
        };
        let step = match what.split_whitespace().next().unwrap_or("") {
            "statement:" => what
                .split_whitespace()
                .nth(1)
                .unwrap_or("statement")
                .to_owned(),
            step => step.trim_end_matches(':').to_owned(),
        };
        let took = number.parse::<f64>().unwrap_or(0.0);
        let entry = counts.entry(step).or_default();
        entry.0 += 1;
        entry.1 += took;
        slowest.push((took, what.chars().take(90).collect()));
    }
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut summary = counts
        .iter()
        .map(|(step, (n, ms))| format!("{step} {n} ({ms:.1} ms)"))
        .collect::<Vec<_>>()
        .join(", ");
    for (took, what) in slowest.iter().take(6) {
        summary.push_str(&format!("\n      {took:.2} ms {what}"));
    }
    summary
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    println!("load average at start: {}", load_average());
    let parts = std::env::var("PREPARER_BENCH_PARTS")
        .unwrap_or_else(|_| "merge,placement,pages".to_owned());
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    // 1. Merge.
    if part("merge") {
        merge_figures(env_usize("PREPARER_BENCH_MERGE_RUNS", 31));
    }
    if !part("placement") && !part("pages") {
        return;
    }

    // 2. Placement over N sites, on both backends in this run.
    let dir = tempfile::tempdir().expect("tempdir");
    let pg = match nephrite_test_services::Postgres::start() {
        Ok(pg) => Some(pg),
        Err(err) => {
            println!("PostgreSQL: skipped ({err})");
            None
        }
    };
    let mut databases = 0;
    let mut pg_database = |pg: &nephrite_test_services::Postgres| {
        databases += 1;
        let name = format!("bench{databases}");
        let url = pg.create_database(&name).expect("create database");
        (name, url)
    };
    // PREPARER_BENCH_PG_LOG=1: the server logs every statement of the small placements with
    // its duration, summed up per run below (where PostgreSQL's time goes).
    let pg_log = std::env::var_os("PREPARER_BENCH_PG_LOG").is_some();
    let small_sites = env_usize("PREPARER_BENCH_SMALL_SITES", 200);
    let sites = env_usize("PREPARER_BENCH_SITES", 10_000);
    let small_runs = env_usize("PREPARER_BENCH_SMALL_RUNS", 5);
    let large_runs = env_usize("PREPARER_BENCH_LARGE_RUNS", 3);
    let placements = if part("placement") {
        vec![(small_sites, small_runs), (sites, large_runs)]
    } else {
        Vec::new()
    };
    for (count, runs) in placements {
        let times = CpuTimes::now();
        // At the small size each daemon runs a second placement: the first pays for the cold
        // start (statements prepared per connection), the second shows the steady state.
        let rounds = if count == small_sites { 2 } else { 1 };
        // Run by run a SQLite daemon, then a PostgreSQL one, each on a fresh store, so that
        // load from elsewhere falls on both backends alike.
        let mut sqlite = vec![Vec::new(); rounds];
        let mut postgres = vec![Vec::new(); rounds];
        for run in 0..runs.max(1) {
            let spec = format!(
                "sqlite:{}",
                dir.path()
                    .join(format!("placement-{count}-{run}.db"))
                    .display()
            );
            for (round, (elapsed, _)) in placement(&spec, count, rounds, None)
                .await
                .into_iter()
                .enumerate()
            {
                sqlite[round].push(elapsed);
            }
            let Some(pg) = &pg else { continue };
            let (name, url) = pg_database(pg);
            let log = (pg_log && count == small_sites).then(|| pg.log_path());
            if log.is_some() {
                pg.psql(
                    "postgres",
                    &format!("ALTER DATABASE {name} SET log_min_duration_statement = 0"),
                )
                .expect("log statements");
            }
            for (round, (elapsed, statements)) in placement(&url, count, rounds, log)
                .await
                .into_iter()
                .enumerate()
            {
                if let Some(statements) = statements {
                    println!(
                        "  run {run}, round {round}: {:.1} ms; statements: {statements}",
                        ms(elapsed)
                    );
                }
                postgres[round].push(elapsed);
            }
        }
        for (round, (sqlite, postgres)) in sqlite.into_iter().zip(postgres).enumerate() {
            let daemon = if round == 0 { "cold" } else { "warm" };
            // Per run, PostgreSQL over the SQLite run just before it.
            let mut pairs: Vec<f64> = postgres
                .iter()
                .zip(&sqlite)
                .map(|(p, s)| p.as_secs_f64() / s.as_secs_f64())
                .collect();
            pairs.sort_by(f64::total_cmp);
            let (sqlite, postgres) = (Runs::sorted(sqlite), Runs::sorted(postgres));
            println!(
                "placement over {count} sites, {daemon} daemon, SQLite:     {} (target ≤ 60 s at 10,000; goal 5 s)",
                sqlite.describe()
            );
            if let (Some(first), Some(last)) = (pairs.first(), pairs.last()) {
                println!(
                    "placement over {count} sites, {daemon} daemon, PostgreSQL: {}; {:.2}× SQLite (medians; target ≤ 2×), run by run {first:.2}..{last:.2}×; load average {}",
                    postgres.describe(),
                    postgres.median().as_secs_f64() / sqlite.median().as_secs_f64(),
                    load_average()
                );
            }
        }
        println!(
            "placements over {count} sites: steal {:.1}% of the CPU time while they ran",
            CpuTimes::now().since(&times).steal_pct
        );
    }

    if !part("pages") || std::env::var_os("PREPARER_BENCH_SKIP_PAGES").is_some() {
        return;
    }

    // 3. A page by metadata pattern over M deployments, then the daemon's RSS while a client
    //    streams through all of them.
    let total = env_usize("PREPARER_BENCH_DEPLOYMENTS", 1_000_000);
    let mut stores: Vec<(&str, String, Option<String>)> = vec![(
        "SQLite",
        format!("sqlite:{}", dir.path().join("million.db").display()),
        None,
    )];
    if let Some(pg) = &pg {
        let (database, url) = pg_database(pg);
        stores.push(("PostgreSQL", url, Some(database)));
    }
    for (name, spec, database) in &stores {
        let store = store::open(spec).await.expect("store");
        let start = Instant::now();
        fill(&store, total).await;
        println!(
            "{name}: filled {total} deployments in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let print_pages = |when: &str,
                           exact: (Duration, Duration),
                           prefix: (Duration, Duration)| {
            println!(
                "{name}{when}: page of 100, exact metadata (~0.14%): median {:>7.2} ms (first {:.2} ms); prefix metadata (~1%): median {:>7.2} ms (first {:.2} ms) (target < 50 ms; goal 10 ms); load average {}",
                ms(exact.1),
                ms(exact.0),
                ms(prefix.1),
                ms(prefix.0),
                load_average()
            );
        };
        let exact = page_query(&store, "r042/0").await;
        let prefix = page_query(&store, "r042/*").await;
        print_pages("", exact, prefix);
        if let (Some(pg), Some(database)) = (&pg, database) {
            // What autovacuum does to a table after a bulk load (PostgreSQL 13+ vacuums on
            // inserts too): statistics for the planner and the visibility map, which lets
            // index-only scans skip the heap.
            let start = Instant::now();
            pg.psql(database, "VACUUM (ANALYZE)").expect("vacuum");
            println!(
                "{name}: VACUUM (ANALYZE) after the fill, as autovacuum would: {:.1} s",
                start.elapsed().as_secs_f64()
            );
            let exact = page_query(&store, "r042/0").await;
            let prefix = page_query(&store, "r042/*").await;
            print_pages(" after VACUUM (ANALYZE)", exact, prefix);
        }
        drop(store);
        let (rows, took, peak, before) = stream_all(spec).await;
        assert_eq!(rows, total, "every deployment streamed");
        println!(
            "{name}: client paged through {rows} deployments in {:.1} s; daemon RSS {:.0} MB at start, peak {:.0} MB (target < 200 MB)",
            took.as_secs_f64(),
            before as f64 / 1048576.0,
            peak as f64 / 1048576.0
        );
    }
}
