//! A Placement over 200 and over 10,000 sites, SQLite and PostgreSQL taking turns run by run.

use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_preparer::store::{DeploymentFilter, count_deployments};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::ServeArgs;
use nephrite_test_services::machine::{CpuTimes, load_average};

use super::{Backends, env_usize, ms};

/// Prints the placement figures: medians per backend, their ratio and the run-by-run range.
pub async fn figures(backends: &mut Backends) {
    let dir = backends.dir.path().to_owned();
    // PREPARER_BENCH_PG_LOG=1: the server logs every statement of the small placements with
    // its duration, summed up per run below (where PostgreSQL's time goes).
    let pg_log = std::env::var_os("PREPARER_BENCH_PG_LOG").is_some();
    let small_sites = env_usize("PREPARER_BENCH_SMALL_SITES", 200);
    let sites = env_usize("PREPARER_BENCH_SITES", 10_000);
    let small_runs = env_usize("PREPARER_BENCH_SMALL_RUNS", 5);
    let large_runs = env_usize("PREPARER_BENCH_LARGE_RUNS", 3);
    for (count, runs) in [(small_sites, small_runs), (sites, large_runs)] {
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
                dir.join(format!("placement-{count}-{run}.db")).display()
            );
            for (round, (elapsed, _)) in placement(&spec, count, rounds, None)
                .await
                .into_iter()
                .enumerate()
            {
                sqlite[round].push(elapsed);
            }
            let Some((name, url)) = backends.database() else {
                continue;
            };
            let pg = backends.pg.as_ref().expect("a database means a PostgreSQL");
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
        revisions_kept: nephrite_preparer::store::DEFAULT_REVISIONS_KEPT,
        web: None,
        plugin_credentials: Default::default(),
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
        let count = count_deployments(daemon.store.as_ref(), &filter)
            .await
            .expect("count");
        assert_eq!(count, sites, "every child created and prepared");
        rounds_taken.push((elapsed, statements));
    }
    daemon.stop().await.expect("stop");
    rounds_taken
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
