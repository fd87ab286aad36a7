//! Two `ntc serve --backend tko --leader-election` replicas (the real binary) on one named
//! lease of the real preparer's Data API (in-process, SQLite, bearer tokens: each replica
//! has its own identity, so the preparer's history says which one wrote each child).
//!
//! Only the holder writes: every child created while both run is by the holder, the standby
//! says `ntc_leading 0` on `/metrics`. The holder is killed (SIGKILL, the lease not released)
//! at a seeded point of its child creations (`NTC_KILL_SEED`, printed; the default is fixed):
//! after it the k-th child's creation is seen in the change feed. The standby takes the lease
//! once it expires on the store's clock, registers the plugin, and the topology ends with
//! exactly the children the plan wants, each once. SIGTERM then makes the new leader release
//! the lease.

mod tko_lab;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use clap::Parser as _;
use futures::StreamExt as _;
use nephrite_preparer::daemon::start;
use nephrite_preparer_client::{
    DataApi, DeploymentInfo, DeploymentQuery, DeploymentRequest, EntityKind, PreparerClient,
};
use nephrite_runtime::ClientArgs;
use tko_lab::PreparerFlags;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const TEST: &str = "two_tko_replicas_one_writes_and_the_standby_takes_over_after_a_kill";
const DEFAULT_SEED: u64 = 0x7ac0_0037_5eed_0002;
const LEASE: &str = "ntc-pair";
/// Lease duration, renew deadline and retry period (seconds), short so the takeover is quick.
const TIMING: (u64, u64, u64) = (3, 2, 1);
/// Edge sites in us-west (a `upf-west` each) and in us-east (a `upf-east` each): enough
/// children that the leader is still creating them when it is killed.
const WEST: usize = 24;
const EAST: usize = 6;

/// The edge sites: (id, region).
fn edges() -> Vec<(String, &'static str)> {
    (1..=WEST + EAST)
        .map(|n| {
            let region = if n <= WEST { "us-west" } else { "us-east" };
            (format!("edge{n:02}"), region)
        })
        .collect()
}

/// The children the example topology wants on the sites, by instance key, sorted.
fn wanted() -> Vec<String> {
    let mut keys: Vec<String> = edges()
        .into_iter()
        .map(|(id, region)| {
            let nf = if region == "us-west" {
                "upf-west"
            } else {
                "upf-east"
            };
            format!("{nf}-{id}")
        })
        .chain(["amf-regional".to_owned(), "smf-regional".to_owned()])
        .collect();
    keys.sort();
    keys
}
/// How long a wait for what the test expects may take: a bound on liveness.
const PATIENCE: Duration = Duration::from_secs(30);

/// xorshift64: the kill point from the seed.
fn seeded(seed: u64, n: usize) -> usize {
    let mut x = seed.max(1);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    1 + (x % n as u64) as usize
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// A free loopback port (for a replica's `/metrics`).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A running replica; killed if the test fails before it ends.
struct Replica {
    child: Option<Child>,
    log: PathBuf,
    metrics: u16,
}

impl Replica {
    fn start(dir: &Path, data: &str, identity: &'static str) -> anyhow::Result<Replica> {
        let token = write(
            dir,
            &format!("{identity}.token"),
            &format!("t-{identity}\n"),
        )?;
        let log = dir.join(format!("{identity}.log"));
        let metrics = free_port()?;
        let (lease, deadline, retry) = TIMING;
        let child = Command::new(env!("CARGO_BIN_EXE_ntc"))
            .args(["serve", "--backend", "tko", "--leader-election"])
            .args(["--listen", "127.0.0.1:0", "--data", data])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .args(["--identity", identity, "--lease-name", LEASE])
            .args(["--lease-duration", &lease.to_string()])
            .args(["--lease-renew-deadline", &deadline.to_string()])
            .args(["--lease-retry-period", &retry.to_string()])
            .arg("--token-file")
            .arg(&token)
            .args(["--log-format", "text"])
            .env("RUST_LOG", "info")
            .env_remove("NTC_POLICY")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("ntc starts")?;
        Ok(Replica {
            child: Some(child),
            log,
            metrics,
        })
    }

    fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// `ntc_leading` as its `/metrics` says.
    async fn leading(&self) -> anyhow::Result<Option<i64>> {
        let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics)).await
        else {
            return Ok(None);
        };
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await?;
        Ok(body
            .lines()
            .find_map(|line| line.strip_prefix("ntc_leading "))
            .and_then(|value| value.trim().parse().ok()))
    }

    fn kill(&mut self) -> anyhow::Result<()> {
        let mut child = self.child.take().context("running")?;
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    fn terminate(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        let mut child = self.child.take().context("running")?;
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -TERM failed");
        Ok(child.wait()?)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn eventually<T, F, Fut>(what: &str, bound: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("no {what} within {bound:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn holder(data: &PreparerClient) -> anyhow::Result<Option<String>> {
    match data.get_lease(LEASE).await {
        Ok(lease) if lease.is_held() => Ok(Some(lease.holder)),
        Ok(_) => Ok(None),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error.into()),
    }
}

async fn children(data: &PreparerClient, parent: &str) -> anyhow::Result<Vec<DeploymentInfo>> {
    Ok(data
        .all_deployments(DeploymentQuery {
            parent_id: Some(parent.to_owned()),
            ..Default::default()
        })
        .await?)
}

/// Who created each child: its first revision's author.
async fn creators(
    data: &PreparerClient,
    rows: &[DeploymentInfo],
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut authors = BTreeMap::new();
    for row in rows {
        let revisions = data.deployment_revisions(&row.id).await?;
        let first = revisions
            .first()
            .context("a created child has revision 1")?;
        authors.insert(row.instance_key.clone(), first.author.clone());
    }
    Ok(authors)
}

/// The example in the preparer: its blueprints, the edge sites and one regional site.
async fn setup(data: &PreparerClient) -> anyhow::Result<()> {
    let edges = edges();
    let sites: Vec<(&str, &str, &str)> = edges
        .iter()
        .map(|(id, region)| (id.as_str(), "edge", *region))
        .chain([("regional", "regional", "us-west")])
        .collect();
    tko_lab::register_example(data, &sites).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tko_replicas_one_writes_and_the_standby_takes_over_after_a_kill() -> anyhow::Result<()>
{
    let seed = std::env::var("NTC_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let kill_at = seeded(seed, wanted().len());
    println!(
        "{TEST}: seed {seed} (NTC_KILL_SEED to replay): the leader is killed once child {kill_at} of {} is created",
        wanted().len()
    );

    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let tokens = write(d, "tokens.csv", "t-ntc-a,ntc-a\nt-ntc-b,ntc-b\nt-ops,ops\n")?;
    // The replicas register the plugin: admin. The operator writes.
    let policy = write(
        d,
        "policy.yaml",
        "identities:\n  ntc-a: [admin]\n  ntc-b: [admin]\ndefault_roles: [write]\n",
    )?;
    let store = format!("sqlite:{}", d.join("p.db").display());
    let (tokens, policy) = (tokens.display().to_string(), policy.display().to_string());
    let command = PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--auth-tokens",
        &tokens,
        "--auth-policy",
        &policy,
        "--interval",
        "100ms",
        "--plugin-timeout",
        "5s",
        "--lease",
        "3s",
        "--retry-backoff",
        "100ms",
        "--max-backoff",
        "500ms",
    ])?
    .serve;
    let preparer = start(&command, false).await?;
    let url = preparer.endpoint.to_string();
    let ops = ClientArgs {
        token_file: Some(write(d, "ops.token", "t-ops\n")?),
        ..ClientArgs::default()
    };
    let data = PreparerClient::new(ops.dial(&preparer.endpoint).await?);
    setup(&data).await?;

    // A alone takes the lease; B then stands by.
    let mut a = Replica::start(d, &url, "ntc-a")?;
    eventually("ntc-a holding the lease", PATIENCE, || async {
        Ok((holder(&data).await?.as_deref() == Some("ntc-a")).then_some(()))
    })
    .await
    .with_context(|| a.log())?;
    let mut b = Replica::start(d, &url, "ntc-b")?;
    eventually("ntc-b standing by", PATIENCE, || async {
        Ok((b.log().contains("standing by") && b.leading().await? == Some(0)).then_some(()))
    })
    .await
    .with_context(|| b.log())?;
    eventually("ntc-a leading on /metrics", PATIENCE, || async {
        Ok((a.leading().await? == Some(1)).then_some(()))
    })
    .await?;

    // The topology; the leader is killed once the seeded child's creation is in the feed.
    let from = data.all_sites_listing(Default::default()).await?.revision;
    let mut feed = data.watch(from, &[EntityKind::Deployment]).await?;
    let parent = data
        .create_deployment(DeploymentRequest {
            template_id: "free5gc-topology".into(),
            ..Default::default()
        })
        .await?
        .deployment_id;
    let mut created = std::collections::BTreeSet::new();
    while created.len() < kill_at {
        let change = tokio::time::timeout(PATIENCE, feed.next())
            .await
            .with_context(|| format!("child {} of the topology: {}", created.len() + 1, a.log()))?
            .context("the feed ended")??;
        if let Some(row) = change.deployment.as_ref()
            && row.parent_id == parent
            && !change.deleted
        {
            created.insert(change.id.clone());
        }
    }
    a.kill()?;
    let killed = Instant::now();
    drop(feed);

    // While both ran, only A created children.
    let before = children(&data, &parent).await?;
    let authors = creators(&data, &before).await?;
    ensure!(
        authors.values().all(|author| author == "ntc-a"),
        "children created while ntc-a led: {authors:?}"
    );
    ensure!(
        !b.log().contains("registered with the preparer"),
        "{}",
        b.log()
    );

    // B takes the lease once A's expires (lease duration, then B's next try), and writes.
    let (lease, _, retry) = TIMING;
    let takeover = Duration::from_secs(lease + 2 * retry) + Duration::from_secs(2);
    eventually("ntc-b holding the lease", takeover, || async {
        Ok((holder(&data).await?.as_deref() == Some("ntc-b")).then_some(()))
    })
    .await
    .with_context(|| b.log())?;
    println!(
        "{TEST}: ntc-b took the lease {:?} after ntc-a was killed (lease {lease} s)",
        killed.elapsed()
    );
    ensure!(data.get_lease(LEASE).await?.transitions == 2);
    eventually("ntc-b leading on /metrics", PATIENCE, || async {
        Ok((b.leading().await? == Some(1)).then_some(()))
    })
    .await?;

    // The result: every child the plan wants, each once, prepared.
    let rows = eventually("every child prepared", PATIENCE, || async {
        let rows = children(&data, &parent).await?;
        Ok((rows.len() >= wanted().len() && rows.iter().all(|r| r.prepared)).then_some(rows))
    })
    .await
    .with_context(|| b.log())?;
    let mut keys: Vec<String> = rows.iter().map(|r| r.instance_key.clone()).collect();
    keys.sort();
    ensure!(
        keys == wanted(),
        "children (duplicates or missing) {keys:?}, want {:?}",
        wanted()
    );
    let authors = creators(&data, &rows).await?;
    for (key, author) in &authors {
        let by_a = before.iter().any(|row| &row.instance_key == key);
        let want = if by_a { "ntc-a" } else { "ntc-b" };
        ensure!(
            author == want,
            "{key} created by {author}, want {want}: {authors:?}"
        );
    }
    println!(
        "{TEST}: created before the kill {}, by the new leader {}",
        before.len(),
        wanted().len() - before.len()
    );
    let plugin = data.get_plugin("ntc").await?;
    ensure!(
        b.log().contains(&plugin.endpoint),
        "the plugin is registered at ntc-b's endpoint {}: {}",
        plugin.endpoint,
        b.log()
    );

    // SIGTERM: B stops its tracker and releases the lease.
    let status = b.terminate()?;
    ensure!(
        status.success(),
        "ntc-b exits cleanly: {status:?}\n{}",
        b.log()
    );
    let released = data.get_lease(LEASE).await?;
    ensure!(!released.is_held(), "released: {released:?}");
    ensure!(b.log().contains("released the lease"), "{}", b.log());
    drop(a);
    drop(b);
    preparer.stop().await?;
    Ok(())
}
