//! Preparer benchmarks (`cargo bench -p nephrite-preparer --bench preparer`), printing figures
//! and ratios for the targets:
//!
//! 1. merging a 1,000-resource merge package into a 1,000-resource template (target < 5 ms),
//!    and the ratio for 10× the input (target ≤ 12×);
//! 2. a Placement over N sites (default 10,000; `PREPARER_BENCH_SITES`) on SQLite and, when a
//!    PostgreSQL can be started, on PostgreSQL: time until all N children exist and are
//!    prepared (target ≤ 60 s; PostgreSQL within 2× of SQLite);
//! 3. M deployments (default 1,000,000; `PREPARER_BENCH_DEPLOYMENTS`) filled through the store
//!    trait, then one page of 100 by an exact and by a prefix metadata pattern matching ~1%
//!    (target < 50 ms); then the real `preparer serve` binary on that store while a client pages
//!    through all M rows over the Data API, its RSS sampled from `/proc` (target < 200 MB).
//!
//! `PREPARER_BENCH_SKIP_PAGES=1` stops after the placements.
//!
//! The placement also runs at 200 sites (`PREPARER_BENCH_SMALL_SITES`), three times per
//! backend, where fixed per-statement costs dominate; the spread of those runs is the noise.

use std::sync::Arc;
use std::time::{Duration, Instant};

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

fn time_merge(n: usize) -> Duration {
    let (template, merge) = packages(n);
    let runs = 5;
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let mut target = template.clone();
        let start = Instant::now();
        merge_package(&mut target, &merge, |_| false).expect("merge");
        best = best.min(start.elapsed());
    }
    best
}

async fn placement(store_spec: &str, sites: usize) -> Duration {
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
        let info = client
            .get_deployment(pb::GetRequest { id: parent.clone() })
            .await
            .expect("get")
            .into_inner()
            .info
            .unwrap_or_default();
        if info.prepared {
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
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed();
    daemon.stop().await.expect("stop");
    elapsed
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

async fn page_query(store: &Arc<dyn Store>, pattern: &str) -> Duration {
    let filter = DeploymentFilter {
        metadata: MetadataSelector::new([("Site.region", pattern)]).expect("pattern"),
        ..Default::default()
    };
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let (page, _) = store
            .list_deployments(&filter, &Window::default())
            .await
            .expect("page");
        best = best.min(start.elapsed());
        assert_eq!(page.len(), 100);
    }
    best
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

/// Runs the placement `runs` times on a fresh store each (`store` makes the spec) and returns
/// the fastest and slowest run.
async fn placement_runs(
    runs: usize,
    sites: usize,
    mut store: impl FnMut(usize) -> String,
) -> (Duration, Duration) {
    let mut fastest = Duration::MAX;
    let mut slowest = Duration::ZERO;
    for run in 0..runs {
        let took = placement(&store(run), sites).await;
        fastest = fastest.min(took);
        slowest = slowest.max(took);
    }
    (fastest, slowest)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    // 1. Merge.
    let small = time_merge(1000);
    let large = time_merge(10_000);
    println!(
        "merge 1,000 into 1,000:   {:>8.2} ms (target < 5 ms)",
        ms(small)
    );
    println!(
        "merge 10,000 into 10,000: {:>8.2} ms; ratio {:.1}× for 10× input (target ≤ 12×)",
        ms(large),
        large.as_secs_f64() / small.as_secs_f64()
    );

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
    let mut pg_store = |pg: &nephrite_test_services::Postgres| {
        databases += 1;
        pg.create_database(&format!("bench{databases}"))
            .expect("create database")
    };
    let small_sites = env_usize("PREPARER_BENCH_SMALL_SITES", 200);
    let sites = env_usize("PREPARER_BENCH_SITES", 10_000);
    for (count, runs) in [(small_sites, 3), (sites, 1)] {
        let (sqlite, sqlite_worst) = placement_runs(runs, count, |run| {
            format!(
                "sqlite:{}",
                dir.path()
                    .join(format!("placement-{count}-{run}.db"))
                    .display()
            )
        })
        .await;
        println!(
            "placement over {count} sites, SQLite:     {:>9.1} ms (of {runs}: {:.1}..{:.1} ms; target ≤ 60 s at 10,000; goal 5 s)",
            ms(sqlite),
            ms(sqlite),
            ms(sqlite_worst)
        );
        if let Some(pg) = &pg {
            let mut specs = Vec::new();
            for _ in 0..runs {
                specs.push(pg_store(pg));
            }
            let (postgres, postgres_worst) =
                placement_runs(runs, count, |run| specs[run].clone()).await;
            println!(
                "placement over {count} sites, PostgreSQL: {:>9.1} ms (of {runs}: {:.1}..{:.1} ms); {:.2}× SQLite (target ≤ 2×)",
                ms(postgres),
                ms(postgres),
                ms(postgres_worst),
                postgres.as_secs_f64() / sqlite.as_secs_f64()
            );
        }
    }

    if std::env::var_os("PREPARER_BENCH_SKIP_PAGES").is_some() {
        return;
    }

    // 3. A page by metadata pattern over M deployments, then the daemon's RSS while a client
    //    streams through all of them.
    let total = env_usize("PREPARER_BENCH_DEPLOYMENTS", 1_000_000);
    let mut stores: Vec<(&str, String)> = vec![(
        "SQLite",
        format!("sqlite:{}", dir.path().join("million.db").display()),
    )];
    if let Some(pg) = &pg {
        stores.push(("PostgreSQL", pg_store(pg)));
    }
    for (name, spec) in &stores {
        let store = store::open(spec).await.expect("store");
        let start = Instant::now();
        fill(&store, total).await;
        println!(
            "{name}: filled {total} deployments in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let exact = page_query(&store, "r042/0").await;
        let prefix = page_query(&store, "r042/*").await;
        println!(
            "{name}: page of 100, exact metadata (~0.14%):  {:>7.2} ms (target < 50 ms; goal 10 ms)",
            ms(exact)
        );
        println!(
            "{name}: page of 100, prefix metadata (~1%):    {:>7.2} ms (target < 50 ms; goal 10 ms)",
            ms(prefix)
        );
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
