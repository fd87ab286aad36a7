//! `cargo bench -p nephrite-ntc --bench churn`: ntc's TKO backend following a churning world.
//!
//! The real preparer (SQLite store, in-process on loopback, its Data API over gRPC) holds
//! 1,000 sites (`c0000` … `c0999`, site metadata `Site.group=g<n>`) and one NFTopology
//! deployment of 10,000 NF instances, instance `n<i>` selecting `group: g<i % 1000>` (ten
//! instances per site, one child each: 10,000 child deployments; one instance in ten an SMF
//! waiting for the UPFs of its network, one an AMF). ntc's TKO backend (plugin and tracker,
//! in-process) prepares it. Then, three times, 100 sites are relabelled at once (50 pairs
//! swapping their groups): the twenty children of each pair move, so the minimum is 1,000
//! child deletions and 1,000 creations, and every other child stays as it is.
//!
//! Per run it prints the time from the relabel until the children are what the plan wants (read
//! from the preparer's `Watch`), the time until everything is quiet again (the preparer has
//! prepared the new children and ntc has written the status), and ntc's Data API writes, counted
//! by the preparer's own `grpc_server_handled_total` on its `/metrics`: child writes
//! (`CreateDeployment`, `DeleteDeployment`, `UpdateDeployment`, `ApproveDeployment`, and each
//! deployment an `ApplyDeployments` batch wrote, from `preparer_batch_deployment_writes_total`)
//! against the minimum, the batch calls apart, and the leases and status writes on the parent (`StartModification`,
//! `EndModification`, `CancelModification`). Then the median of the three.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser as _;
use futures::StreamExt as _;
use nephrite_krm::{LabelSelector, Object, Package};
use nephrite_ntc::tko::{self, TkoConfig};
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_preparer_client::{
    DataApi, DeploymentQuery, DeploymentRequest, EntityKind, PreparerClient, Site, SiteInfo,
    Template, TemplateInfo,
};
use nephrite_runtime::{ClientArgs, DaemonIdentity, GrpcServer};
use nephrite_topology::RolloutPolicy;
use nephrite_topology::api::{
    NFClass, NFClassSpec, NFInstance, NFInterface, NFTemplate, NFTopology, NfType,
    PackageRevisionReference,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const SITES: usize = 1_000;
const INSTANCES: usize = 10_000;
const RELABELLED: usize = 100;
const RUNS: usize = 3;
/// Instances per network: one SMF, one AMF, eight UPFs.
const PER_NETWORK: usize = 10;
/// No write for this long: quiet.
const QUIET: Duration = Duration::from_millis(1_500);
/// Setup or a run that takes longer than this has failed.
const GIVE_UP: Duration = Duration::from_secs(900);

/// The Data API calls that change the store, as the preparer's metrics name them, and the
/// deployments written through `ApplyDeployments` batches, by kind (the preparer's
/// `preparer_batch_deployment_writes_total{write}`, here `batch <write>`): each deployment
/// written counts once, whichever call carried it.
const CHILD_WRITES: [&str; 7] = [
    "CreateDeployment",
    "DeleteDeployment",
    "UpdateDeployment",
    "ApproveDeployment",
    "batch create",
    "batch update",
    "batch delete",
];
/// The batch calls themselves, reported apart from the writes they carry.
const BATCH_CALLS: [&str; 1] = ["ApplyDeployments"];
const LEASE_WRITES: [&str; 4] = [
    "StartModification",
    "RenewModification",
    "EndModification",
    "CancelModification",
];

#[derive(clap::Parser)]
struct PreparerFlags {
    #[command(flatten)]
    serve: ServeCommand,
}

fn site_id(c: usize) -> String {
    format!("c{c:04}")
}

fn group(g: usize) -> String {
    format!("g{g}")
}

fn class(nf_type: &str) -> NFClass {
    NFClass::new(
        nf_type,
        NFClassSpec {
            vendor: "v".into(),
            version: "1".into(),
            flavor: None,
            package_ref: PackageRevisionReference {
                repository: "catalog".into(),
                package_name: format!("{nf_type}-bp"),
                ..Default::default()
            },
        },
    )
}

/// The topology's package: the NFTopology and its three classes.
fn topology_package() -> anyhow::Result<String> {
    let instances = (0..INSTANCES)
        .map(|i| {
            let nf_type = match i % PER_NETWORK {
                0 => "smf",
                1 => "amf",
                _ => "upf",
            };
            NFInstance {
                name: format!("n{i}"),
                cluster_selector: LabelSelector::new().with_label("group", group(i % SITES)),
                nf_template: NFTemplate {
                    nf_type: NfType::new(nf_type),
                    class_name: nf_type.to_owned(),
                    capacity: None,
                    nf_interfaces: vec![NFInterface {
                        name: "n4".into(),
                        network_instance_name: format!("net{}", i / PER_NETWORK),
                    }],
                },
            }
        })
        .collect();
    let mut package = Package::new();
    package.push(Object::from_typed(&NFTopology::new("churn", instances))?);
    for nf_type in ["smf", "amf", "upf"] {
        package.push(Object::from_typed(&class(nf_type))?);
    }
    Ok(package.to_yaml())
}

async fn register_site(data: &PreparerClient, c: usize, g: usize) -> anyhow::Result<()> {
    data.register_site(Site {
        info: SiteInfo {
            id: site_id(c),
            metadata: [("Site.group".to_owned(), group(g))].into(),
            ..Default::default()
        },
        package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\n".into(),
    })
    .await?;
    Ok(())
}

/// A free loopback port for the preparer's `/metrics`.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The preparer's handled Data API calls by method (every status code counted).
async fn handled(metrics: SocketAddr) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut stream = tokio::net::TcpStream::connect(metrics).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    let mut calls = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("preparer_batch_deployment_writes_total{write=\"") {
            let (write, value) = rest
                .split_once("\"} ")
                .with_context(|| format!("a batch write counter in {line:?}"))?;
            let value: f64 = value
                .trim()
                .parse()
                .with_context(|| format!("a counter value in {line:?}"))?;
            *calls.entry(format!("batch {write}")).or_insert(0) += value as u64;
            continue;
        }
        let Some(rest) = line.strip_prefix("grpc_server_handled_total{") else {
            continue;
        };
        if !rest.contains("grpc_service=\"nephrite.preparer.data.v1.Data\"") {
            continue;
        }
        let label = |name: &str| {
            rest.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|m| m.split('"').next())
                .with_context(|| format!("a {name} label in {line:?}"))
        };
        let code = label("grpc_code")?;
        let method = match code {
            "OK" => label("grpc_method")?.to_owned(),
            code => format!("{} {code}", label("grpc_method")?),
        };
        let value: f64 = rest
            .rsplit(' ')
            .next()
            .context("a value")?
            .parse()
            .with_context(|| format!("a counter value in {line:?}"))?;
        *calls.entry(method).or_insert(0) += value as u64;
    }
    Ok(calls)
}

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>, methods: &[&str]) -> u64 {
    methods
        .iter()
        .map(|m| after.get(*m).unwrap_or(&0) - before.get(*m).unwrap_or(&0))
        .sum()
}

/// The parent's children as the bench sees them through `Watch`: by id, their instance key
/// and whether they are prepared, and how far they are from what the plan wants.
struct Children {
    parent: String,
    by_id: HashMap<String, (String, bool)>,
    count: HashMap<String, usize>,
    desired: HashSet<String>,
    /// Keys missing, surplus or doubled.
    wrong: usize,
    /// When the first child of a run was created or deleted.
    moves: Option<Duration>,
    unprepared: usize,
}

impl Children {
    fn new(parent: &str) -> Self {
        Children {
            parent: parent.to_owned(),
            by_id: HashMap::new(),
            count: HashMap::new(),
            desired: HashSet::new(),
            wrong: 0,
            moves: None,
            unprepared: 0,
        }
    }

    fn want(&mut self, desired: HashSet<String>) {
        self.desired = desired;
        self.wrong = self.desired.len();
        for (key, n) in &self.count {
            let n = *n;
            if self.desired.contains(key) {
                self.wrong = self.wrong - 1 + (n - 1);
            } else {
                self.wrong += n;
            }
        }
    }

    fn add(&mut self, key: &str) {
        let n = self.count.entry(key.to_owned()).or_insert(0);
        *n += 1;
        if *n == 1 && self.desired.contains(key) {
            self.wrong -= 1;
        } else {
            self.wrong += 1;
        }
    }

    fn sub(&mut self, key: &str) {
        let n = self.count.get_mut(key).expect("counted");
        *n -= 1;
        if *n == 0 {
            self.count.remove(key);
            if self.desired.contains(key) {
                self.wrong += 1;
                return;
            }
        }
        self.wrong -= 1;
    }

    fn put(&mut self, id: &str, key: &str, prepared: bool) {
        match self.by_id.insert(id.to_owned(), (key.to_owned(), prepared)) {
            Some((old_key, was_prepared)) => {
                if old_key != key {
                    self.sub(&old_key);
                    self.add(key);
                }
                self.unprepared =
                    self.unprepared + usize::from(was_prepared) - usize::from(prepared);
            }
            None => {
                self.add(key);
                self.unprepared += usize::from(!prepared);
            }
        }
    }

    fn gone(&mut self, id: &str) {
        if let Some((key, prepared)) = self.by_id.remove(id) {
            self.sub(&key);
            self.unprepared -= usize::from(!prepared);
        }
    }

    fn converged(&self) -> bool {
        self.wrong == 0
    }

    fn apply(&mut self, change: &nephrite_preparer_client::Change) {
        if change.kind != EntityKind::Deployment {
            return;
        }
        match &change.deployment {
            Some(info) if info.parent_id == self.parent => {
                self.put(&info.id, &info.instance_key, info.prepared)
            }
            Some(_) => {}
            None => self.gone(&change.id),
        }
        if change.deleted {
            self.gone(&change.id);
        }
    }
}

/// The instance keys the plan wants with site `c` in group `groups[c]`.
fn desired(groups: &[usize]) -> HashSet<String> {
    let site_of: HashMap<usize, usize> = groups.iter().enumerate().map(|(c, g)| (*g, c)).collect();
    (0..INSTANCES)
        .map(|i| format!("n{i}-{}", site_id(site_of[&(i % SITES)])))
        .collect()
}

struct Run {
    converged: Duration,
    quiet: Duration,
    child_writes: u64,
    batch_calls: u64,
    lease_writes: u64,
    calls: BTreeMap<String, u64>,
}

/// Follows the change log from `revision` into `children` until `done` holds and no Data API
/// write has been handled for [`QUIET`] (checked on the preparer's metrics); the time
/// `children` first converged and the time it went quiet, from `start`.
async fn follow_until_quiet(
    data: &PreparerClient,
    metrics: SocketAddr,
    revision: u64,
    children: &mut Children,
    start: Instant,
) -> anyhow::Result<(Duration, Duration)> {
    let mut changes = data.watch(revision, &[EntityKind::Deployment]).await?;
    let mut converged = children.converged().then(|| start.elapsed());
    let mut last_calls = handled(metrics).await?;
    let mut still_since = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            change = changes.next() => {
                let change = change.context("the watch ended")??;
                let wrong = children.wrong;
                children.apply(&change);
                if children.wrong != wrong {
                    children.moves.get_or_insert(start.elapsed());
                }
                if converged.is_none() && children.converged() {
                    converged = Some(start.elapsed());
                }
            }
            _ = tick.tick() => {
                let calls = handled(metrics).await?;
                let writes = |c: &BTreeMap<String, u64>| {
                    CHILD_WRITES.iter().chain(&LEASE_WRITES).map(|m| c.get(*m).unwrap_or(&0)).sum::<u64>()
                };
                if writes(&calls) != writes(&last_calls) || children.unprepared > 0 || converged.is_none() {
                    still_since = Instant::now();
                }
                last_calls = calls;
                if let Some(converged) = converged
                    && still_since.elapsed() >= QUIET
                {
                    return Ok((converged, start.elapsed() - QUIET));
                }
                if start.elapsed() > GIVE_UP {
                    bail!(
                        "not quiet within {GIVE_UP:?}: {} children wrong, {} unprepared",
                        children.wrong,
                        children.unprepared
                    );
                }
            }
        }
    }
}

async fn bench() -> anyhow::Result<()> {
    // ntc's tracker says where each re-plan's time went (package, sites and plan, children
    // read, writes): shown on stderr beside the figures.
    nephrite_runtime::init_tracing(
        nephrite_runtime::LogFormat::Text,
        Some("warn,nephrite_ntc::tko::tracker=info"),
    )?;
    let dir = tempfile::tempdir()?;
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let store = format!("sqlite:{}", dir.path().join("preparer.db").display());
    let metrics_listen = metrics.to_string();
    let command = PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &metrics_listen,
        "--store",
        &store,
        "--auto-approve",
        "false",
        "--interval",
        "1s",
        "--plugin-timeout",
        "600s",
        "--lease",
        "30s",
        "--concurrency",
        "4",
    ])?
    .serve;
    let preparer = start(&command, false).await?;
    let endpoint = preparer.endpoint.to_string();
    let data = PreparerClient::new(ClientArgs::default().dial(&endpoint.parse()?).await?);

    let setup = Instant::now();
    for nf_type in ["smf", "amf", "upf"] {
        data.register_template(Template {
            info: TemplateInfo {
                id: format!("{nf_type}-bp"),
                metadata: Default::default(),
            },
            package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nf}\n".into(),
        })
        .await?;
    }
    let mut groups: Vec<usize> = (0..SITES).collect();
    futures::stream::iter(0..SITES)
        .map(|c| register_site(&data, c, c))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<()>>>()?;
    let package_yaml = topology_package()?;
    data.register_template(Template {
        info: TemplateInfo {
            id: "churn-topology".into(),
            metadata: Default::default(),
        },
        package_yaml: package_yaml.clone(),
    })
    .await?;
    let server = GrpcServer::new(DaemonIdentity::new("ntc", "bench")).handle_signals(false);
    let ntc = tko::start(
        server,
        &"127.0.0.1:0".parse()?,
        TkoConfig {
            data: endpoint.clone(),
            credentials: Default::default(),
            advertise: None,
            plugin_name: "ntc".into(),
            policy: RolloutPolicy::default(),
            election: None,
        },
    )
    .await?;
    let listing = data
        .all_deployments_listing(DeploymentQuery::default())
        .await?;
    let parent = data
        .create_deployment(DeploymentRequest {
            template_id: "churn-topology".into(),
            ..Default::default()
        })
        .await?
        .deployment_id;
    let mut children = Children::new(&parent);
    children.want(desired(&groups));
    follow_until_quiet(&data, metrics, listing.revision, &mut children, setup).await?;
    let parent_size = data.get_deployment(&parent).await?.package_yaml.len();
    println!(
        "setup: {SITES} sites, {INSTANCES} instances, {} children prepared in {:.1} s \
         (topology package {} KiB, parent package {} KiB)",
        children.by_id.len(),
        setup.elapsed().as_secs_f64(),
        package_yaml.len() / 1024,
        parent_size / 1024,
    );

    let mut runs = Vec::new();
    for run in 0..RUNS {
        // 50 pairs of sites swap their groups: c(100r + j) with c(100r + 50 + j).
        let pairs: Vec<(usize, usize)> = (0..RELABELLED / 2)
            .map(|j| (RELABELLED * run + j, RELABELLED * run + RELABELLED / 2 + j))
            .collect();
        for (a, b) in &pairs {
            groups.swap(*a, *b);
        }
        children.want(desired(&groups));
        children.moves = None;
        let minimum = children.wrong as u64;
        let revision = data
            .all_deployments_listing(DeploymentQuery {
                parent_id: Some(parent.clone()),
                ..Default::default()
            })
            .await?
            .revision;
        let before = handled(metrics).await?;
        let start = Instant::now();
        futures::future::try_join_all(pairs.iter().flat_map(|(a, b)| {
            [
                register_site(&data, *a, groups[*a]),
                register_site(&data, *b, groups[*b]),
            ]
        }))
        .await?;
        let (converged, quiet) =
            follow_until_quiet(&data, metrics, revision, &mut children, start).await?;
        let after = handled(metrics).await?;
        let calls: BTreeMap<String, u64> = after
            .iter()
            .map(|(m, n)| (m.clone(), n - before.get(m).unwrap_or(&0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let result = Run {
            converged,
            quiet,
            child_writes: delta(&after, &before, &CHILD_WRITES),
            batch_calls: delta(&after, &before, &BATCH_CALLS),
            lease_writes: delta(&after, &before, &LEASE_WRITES),
            calls,
        };
        println!(
            "run {}: {RELABELLED} sites relabelled; first child moved after {:.3} s, children \
             converged in {:.3} s, quiet in {:.3} s; child writes {} (minimum {minimum}, {:.2}x) \
             in {} batch calls, parent leases and status writes {}; calls {:?}",
            run + 1,
            children.moves.unwrap_or_default().as_secs_f64(),
            result.converged.as_secs_f64(),
            result.quiet.as_secs_f64(),
            result.child_writes,
            result.child_writes as f64 / minimum as f64,
            result.batch_calls,
            result.lease_writes,
            result.calls,
        );
        runs.push((result, minimum));
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let converged = median(
        runs.iter()
            .map(|(r, _)| r.converged.as_secs_f64())
            .collect(),
    );
    let quiet = median(runs.iter().map(|(r, _)| r.quiet.as_secs_f64()).collect());
    let child_writes = median(runs.iter().map(|(r, _)| r.child_writes as f64).collect());
    let lease_writes = median(runs.iter().map(|(r, _)| r.lease_writes as f64).collect());
    let batch_calls = median(runs.iter().map(|(r, _)| r.batch_calls as f64).collect());
    let minimum = median(runs.iter().map(|(_, m)| *m as f64).collect());
    println!(
        "median of {RUNS}: converged {converged:.3} s (goal 2 s: {:.2}x), quiet {quiet:.3} s; \
         child writes {child_writes} against the minimum {minimum} ({:.2}x) in {batch_calls} \
         batch calls; parent leases and status writes {lease_writes}",
        converged / 2.0,
        child_writes / minimum,
    );
    ntc.stop().await?;
    preparer.stop().await?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(bench())
}
