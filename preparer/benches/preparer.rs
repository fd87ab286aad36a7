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
//!    (target < 50 ms).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
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
    for n in 0..sites {
        client
            .register_site(pb::RegisterSiteRequest {
                id: format!("dc/{n:06}"),
                metadata: [("Site.region".to_owned(), "metro".to_owned())].into(),
                ..Default::default()
            })
            .await
            .expect("site");
    }
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
        tokio::time::sleep(Duration::from_millis(20)).await;
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

#[tokio::main]
async fn main() {
    // 1. Merge.
    let small = time_merge(1000);
    let large = time_merge(10_000);
    println!(
        "merge 1,000 into 1,000:   {:>8.2} ms (target < 5 ms)",
        small.as_secs_f64() * 1e3
    );
    println!(
        "merge 10,000 into 10,000: {:>8.2} ms; ratio {:.1}× for 10× input (target ≤ 12×)",
        large.as_secs_f64() * 1e3,
        large.as_secs_f64() / small.as_secs_f64()
    );

    // 2. Placement over N sites.
    let sites = env_usize("PREPARER_BENCH_SITES", 10_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = placement(
        &format!("sqlite:{}", dir.path().join("placement.db").display()),
        sites,
    )
    .await;
    println!(
        "placement over {sites} sites, SQLite:     {:>8.2} s (target ≤ 60 s; goal 5 s)",
        sqlite.as_secs_f64()
    );
    let pg = nephrite_test_services::Postgres::start().ok();
    if let Some(pg) = &pg {
        let postgres = placement(&pg.url(), sites).await;
        println!(
            "placement over {sites} sites, PostgreSQL: {:>8.2} s; {:.2}× SQLite (target ≤ 2×)",
            postgres.as_secs_f64(),
            postgres.as_secs_f64() / sqlite.as_secs_f64()
        );
    } else {
        println!("placement on PostgreSQL: skipped (no PostgreSQL could be started)");
    }

    // 3. A page by metadata pattern over M deployments.
    let total = env_usize("PREPARER_BENCH_DEPLOYMENTS", 1_000_000);
    let mut stores: Vec<(&str, Arc<dyn Store>)> = vec![(
        "SQLite",
        store::open(&format!(
            "sqlite:{}",
            dir.path().join("million.db").display()
        ))
        .await
        .expect("sqlite"),
    )];
    if let Some(pg) = &pg {
        stores.push((
            "PostgreSQL",
            store::open(&pg.url_for("postgres"))
                .await
                .expect("postgres"),
        ));
    }
    for (name, store) in &stores {
        let start = Instant::now();
        fill(store, total).await;
        println!(
            "{name}: filled {total} deployments in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let exact = page_query(store, "r042/0").await;
        let prefix = page_query(store, "r042/*").await;
        println!(
            "{name}: page of 100, exact metadata (~0.14%):  {:>7.2} ms (target < 50 ms; goal 10 ms)",
            exact.as_secs_f64() * 1e3
        );
        println!(
            "{name}: page of 100, prefix metadata (~1%):    {:>7.2} ms (target < 50 ms; goal 10 ms)",
            prefix.as_secs_f64() * 1e3
        );
    }
}
