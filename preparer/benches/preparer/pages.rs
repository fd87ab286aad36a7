//! One page by metadata pattern over 1,000,000 deployments, and the daemon's RSS while a
//! client streams through all of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nephrite_merge::metadata::MetadataSelector;
use nephrite_preparer::store::{
    self, DeploymentFilter, DeploymentInfo, NewDeployment, Store, Window,
};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_test_services::machine::load_average;

use super::{Backends, env_usize, ms};

/// Fills each backend, prints the page timings and streams through every row.
pub async fn figures(backends: &mut Backends) {
    let total = env_usize("PREPARER_BENCH_DEPLOYMENTS", 1_000_000);
    let mut stores: Vec<(&str, String, Option<String>)> = vec![(
        "SQLite",
        format!(
            "sqlite:{}",
            backends.dir.path().join("million.db").display()
        ),
        None,
    )];
    if let Some((database, url)) = backends.database() {
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
        if let (Some(pg), Some(database)) = (&backends.pg, database) {
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
                author: "bench".into(),
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
        assert_eq!(
            page.len(),
            100,
            "a full page of {pattern:?}: the fill gives it 1 row in 700, so \
             PREPARER_BENCH_DEPLOYMENTS must be at least 70,000"
        );
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
