//! The lab `tko_follow.rs` runs in: the real preparer (SQLite store, in-process on loopback)
//! with the example's templates and the sites a test names, ntc's TKO backend registered with
//! it, and a Data API client to act as the operator and to look.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser as _;
use futures::StreamExt as _;
use nephrite_krm::{Gvk, Package};
use nephrite_ntc::tko::data::{self, DataEndpoint};
use nephrite_ntc::tko::{self, TkoConfig};
use nephrite_preparer::daemon::{RunningDaemon, start};
use nephrite_preparer_client::{
    CatalogQuery, DataApi, DeploymentInfo, DeploymentQuery, DeploymentRequest, EntityKind,
    PreparerClient,
};
use nephrite_runtime::{DaemonIdentity, GrpcServer};
use nephrite_topology::RolloutPolicy;
use serde_json::Value;

pub use crate::tko_lab::register_site;
use crate::tko_lab::{PreparerFlags, register_example};

/// How long a test waits for what it expects before failing: a bound on liveness, not a
/// latency figure (the `churn` bench reports those).
pub const EVENTUALLY: Duration = Duration::from_secs(20);

/// A preparer, ntc registered with it, and a Data API client.
pub struct Lab {
    _dir: tempfile::TempDir,
    pub preparer: RunningDaemon,
    pub ntc: tko::RunningTko,
    pub data: PreparerClient,
}

impl Lab {
    /// Starts the preparer (nothing approved by itself), registers the templates, `sites`
    /// (`id`, site type, region) and the example topology's template, then starts ntc.
    pub async fn start(sites: &[(&str, &str, &str)]) -> anyhow::Result<Lab> {
        let dir = tempfile::tempdir()?;
        let store = format!("sqlite:{}", dir.path().join("p.db").display());
        let command = PreparerFlags::try_parse_from([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            &store,
            "--auto-approve",
            "false",
            "--interval",
            "100ms",
            "--plugin-timeout",
            "5s",
            "--lease",
            "5s",
            "--retry-backoff",
            "100ms",
            "--max-backoff",
            "500ms",
        ])?
        .serve;
        let preparer = start(&command, false).await?;
        let endpoint = preparer.endpoint.to_string();
        let data = data::connect(&DataEndpoint::plain(&endpoint)).await?;
        register_example(&data, sites).await?;
        let server = GrpcServer::new(DaemonIdentity::new("ntc", "test")).handle_signals(false);
        let ntc = tko::start(
            server,
            &"127.0.0.1:0".parse()?,
            TkoConfig {
                data: endpoint,
                credentials: Default::default(),
                advertise: None,
                plugin_name: "ntc".into(),
                policy: RolloutPolicy::default(),
                election: None,
            },
        )
        .await?;
        Ok(Lab {
            _dir: dir,
            preparer,
            ntc,
            data,
        })
    }

    /// Creates the topology's deployment and waits until its `count` children are prepared.
    pub async fn topology(&self, count: usize) -> anyhow::Result<(String, Children)> {
        let parent = self
            .data
            .create_deployment(DeploymentRequest {
                template_id: "free5gc-topology".into(),
                ..Default::default()
            })
            .await?
            .deployment_id;
        let children = self
            .until(&format!("{count} prepared children"), EVENTUALLY, |c| {
                c.len() == count && c.values().all(|d| d.prepared)
            })
            .await
            .map(|c| (parent.clone(), c));
        let (_, children) = children?;
        Ok((parent, children))
    }

    /// The children of the (only) topology deployment, by instance key.
    pub async fn children(&self) -> anyhow::Result<Children> {
        let parents = self
            .data
            .all_deployments(DeploymentQuery {
                template_id_patterns: vec!["free5gc-topology".into()],
                ..Default::default()
            })
            .await?;
        let parent = parents.first().context("the topology deployment")?;
        let rows = self
            .data
            .all_deployments(DeploymentQuery {
                parent_id: Some(parent.id.clone()),
                ..Default::default()
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.instance_key.clone(), row))
            .collect())
    }

    /// Polls the children until `check` holds, for up to `bound`.
    pub async fn until(
        &self,
        what: &str,
        bound: Duration,
        check: impl Fn(&Children) -> bool,
    ) -> anyhow::Result<Children> {
        let deadline = tokio::time::Instant::now() + bound;
        let mut last = None;
        while tokio::time::Instant::now() < deadline {
            let children = self.children().await?;
            if check(&children) {
                return Ok(children);
            }
            last = Some(children.keys().cloned().collect::<Vec<_>>());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("no {what} within {bound:?} (children: {last:?})")
    }

    /// Polls the parent's package until `check` gives `Some`, for up to [`EVENTUALLY`].
    pub async fn parent_until<T>(
        &self,
        parent: &str,
        what: &str,
        check: impl Fn(&Package) -> Option<T>,
    ) -> anyhow::Result<T> {
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        while tokio::time::Instant::now() < deadline {
            let package =
                Package::from_yaml(&self.data.get_deployment(parent).await?.package_yaml)?;
            if let Some(value) = check(&package) {
                return Ok(value);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("no {what} in deployment {parent} within {EVENTUALLY:?}")
    }

    /// Edits the NFTopology's spec in the parent's package (retrying while another writer,
    /// the tracker writing the status, holds it).
    pub async fn edit_topology(
        &self,
        parent: &str,
        edit: impl Fn(&mut serde_json::Map<String, Value>),
    ) -> anyhow::Result<()> {
        for _ in 0..50 {
            let deployment = self.data.get_deployment(parent).await?;
            let mut package = Package::from_yaml(&deployment.package_yaml)?;
            let object = package
                .get_mut(&topology_gvk(), "free5gc")
                .context("the NFTopology")?;
            edit(object.spec_mut()?);
            match self
                .data
                .update_deployment(parent, package.to_yaml(), None)
                .await
            {
                Ok(_) => return Ok(()),
                Err(error) if error.is_busy() => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(error) => return Err(error.into()),
            }
        }
        bail!("deployment {parent} stayed busy")
    }

    /// Waits (up to [`EVENTUALLY`]) until deployment `id` has not changed for 500 ms.
    pub async fn quiet(&self, id: &str) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        let mut last = self.data.get_deployment(id).await?.info.updated;
        let mut since = tokio::time::Instant::now();
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.data.get_deployment(id).await?.info.updated;
            if now != last {
                last = now;
                since = tokio::time::Instant::now();
            } else if since.elapsed() >= Duration::from_millis(500) {
                return Ok(());
            }
        }
        bail!("deployment {id} kept changing for {EVENTUALLY:?}")
    }

    /// The preparer's revision now: every write up to it is in its change log.
    pub async fn revision(&self) -> anyhow::Result<u64> {
        Ok(self
            .data
            .all_sites_listing(CatalogQuery::default())
            .await?
            .revision)
    }

    /// The deployments written (created, updated or deleted) after revision `from` and up to
    /// now, each with the revisions of its writes, as the preparer's change log (`Watch`)
    /// tells them: a deployment absent from it kept its revision.
    pub async fn written_since(&self, from: u64) -> anyhow::Result<Written> {
        let to = self.revision().await?;
        let mut written = Written::new();
        if to <= from {
            return Ok(written);
        }
        let mut changes = self.data.watch(from, &[]).await?;
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let change = tokio::time::timeout_at(deadline, changes.next())
                .await
                .with_context(|| format!("the change log up to revision {to}"))?
                .context("the watch ended")??;
            if change.kind == EntityKind::Deployment {
                written.entry(change.id).or_default().push(change.revision);
            }
            if change.revision >= to {
                return Ok(written);
            }
        }
    }

    /// Deployment `id`'s package, as YAML.
    pub async fn package(&self, id: &str) -> anyhow::Result<String> {
        Ok(self.data.get_deployment(id).await?.package_yaml)
    }

    /// Approves the child `key` of `children`.
    pub async fn approve(&self, children: &Children, key: &str) -> anyhow::Result<()> {
        self.data
            .approve_deployment(&children.get(key).context(key.to_owned())?.id)
            .await?;
        Ok(())
    }

    /// Stops ntc, then the preparer.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.ntc.stop().await?;
        self.preparer.stop().await?;
        Ok(())
    }
}

/// Children by instance key.
pub type Children = BTreeMap<String, DeploymentInfo>;

/// Deployment ids, each with the revisions at which it was written.
pub type Written = BTreeMap<String, Vec<u64>>;

/// Fails unless none of `keys`' children (in `children`) was written in `written`: each kept
/// its revision.
pub fn untouched(written: &Written, children: &Children, keys: &[&str]) -> anyhow::Result<()> {
    for key in keys {
        let child = children
            .get(*key)
            .with_context(|| format!("no child {key}"))?;
        if let Some(revisions) = written.get(&child.id) {
            bail!(
                "{key} ({}) was written at revisions {revisions:?}",
                child.id
            );
        }
    }
    Ok(())
}

/// Fails unless each of `keys`' children (in `children`) was written in `written`: each has a
/// new revision.
pub fn rewritten(written: &Written, children: &Children, keys: &[&str]) -> anyhow::Result<()> {
    for key in keys {
        let child = children
            .get(*key)
            .with_context(|| format!("no child {key}"))?;
        if !written.contains_key(&child.id) {
            bail!("{key} ({}) kept its revision", child.id);
        }
    }
    Ok(())
}

pub fn topology_gvk() -> Gvk {
    Gvk::new("topology.nephio.org", "v1alpha1", "NFTopology")
}

/// `ntc status --data <the preparer> <parent>`, run as a user runs it; its standard output.
pub async fn ntc_status(lab: &Lab, parent: &str) -> anyhow::Result<String> {
    let data = lab.preparer.endpoint.to_string();
    let parent = parent.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_ntc"))
            .args(["status", "--data", &data, &parent])
            .output()
    })
    .await??;
    if !output.status.success() {
        bail!(
            "ntc status failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// The ids in the parent's NFDeployedTopology.
pub fn deployed_ids(package: &Package) -> Option<Vec<String>> {
    let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "NFDeployedTopology");
    let spec = package.get(&gvk, "free5gc")?.spec()?;
    Some(
        spec["nfInstances"]
            .as_array()?
            .iter()
            .map(|i| i["id"].as_str().unwrap_or("").to_owned())
            .collect(),
    )
}

/// The sorted neighbours of deployed id `id` in the parent's NFDeployedTopology.
pub fn neighbours_of(package: &Package, id: &str) -> Option<Vec<String>> {
    let gvk = Gvk::new("topology.nephio.org", "v1alpha1", "NFDeployedTopology");
    let spec = package.get(&gvk, "free5gc")?.spec()?;
    let instance = spec["nfInstances"]
        .as_array()?
        .iter()
        .find(|i| i["id"] == id)?;
    let mut neighbours: Vec<String> = instance["connectivities"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["neighborName"].as_str().unwrap_or("").to_owned())
        .collect();
    neighbours.sort();
    Some(neighbours)
}

/// The pending conditions the NFTopology's status lists for deployed id `id`.
pub fn pending_of(package: &Package, id: &str) -> Option<Vec<String>> {
    let status = package.get(&topology_gvk(), "free5gc")?.status()?;
    let entry = status["packages"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == id)?;
    Some(
        entry["pendingConditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| c.as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default(),
    )
}

pub fn instance_mut<'a>(
    spec: &'a mut serde_json::Map<String, Value>,
    name: &str,
) -> &'a mut serde_json::Map<String, Value> {
    spec["nfInstances"]
        .as_array_mut()
        .and_then(|is| is.iter_mut().find(|i| i["name"] == name))
        .and_then(Value::as_object_mut)
        .expect("instance in the example topology")
}
