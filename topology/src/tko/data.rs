//! Reaching the preparer's Data API (ntc's own endpoint and credentials, waiting for a
//! preparer that is not up yet) and the reads the TKO backend makes there, through the
//! preparer's client crate.

use std::collections::HashMap;

use nephrite_preparer_client::{CatalogQuery, DataApi, DeploymentQuery, PreparerClient};
use nephrite_runtime::{ClientArgs, ClientError, Endpoint};
use nephrite_topology::api::Cluster;
use nephrite_topology::tko::{ObservedChild, clusters_from_sites};

use super::TkoError;

/// A Data API client (presenting ntc's credentials on every call).
pub type Data = PreparerClient;

/// The preparer's Data API as ntc's own configuration names it (`--data`), and the
/// credentials ntc presents there (`--ca`, `--cert`, `--key`, `--token-file`). Never taken
/// from a request.
#[derive(Debug, Clone)]
pub struct DataEndpoint {
    /// The URL.
    pub url: String,
    /// The client credentials.
    pub credentials: ClientArgs,
}

impl DataEndpoint {
    /// The Data API at `url`, without credentials.
    pub fn plain(url: impl Into<String>) -> Self {
        DataEndpoint {
            url: url.into(),
            credentials: ClientArgs::default(),
        }
    }
}

impl std::fmt::Display for DataEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// Dials the Data API with ntc's credentials.
pub async fn connect(endpoint: &DataEndpoint) -> Result<Data, TkoError> {
    let dial_error = |message: String| TkoError::Dial {
        endpoint: endpoint.url.clone(),
        message,
    };
    let parsed: Endpoint = endpoint
        .url
        .parse()
        .map_err(|e| dial_error(format!("{e}")))?;
    let channel = endpoint
        .credentials
        .dial(&parsed)
        .await
        .map_err(|e| match e {
            ClientError::Dial(e) => dial_error(e.to_string()),
            other => TkoError::Credentials(other.to_string()),
        })?;
    Ok(PreparerClient::new(channel))
}

/// The first pause between attempts while [`connect_waiting`] waits for the Data API.
const FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(100);
/// The longest pause between attempts.
const MAX_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Dials the Data API, waiting for it with exponential backoff (100 ms doubling to 5 s) while
/// it does not answer, so `ntc` may start before the preparer does. Each failed attempt is
/// logged with what it waits for; gives up only when `stop` resolves (shutdown), returning the
/// last error. An endpoint that does not parse fails at once: waiting cannot fix it.
pub async fn connect_waiting(
    endpoint: &DataEndpoint,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Data, TkoError> {
    let mut stop = std::pin::pin!(stop);
    let mut pause = FIRST_RETRY;
    let mut attempt = 1u32;
    loop {
        match connect(endpoint).await {
            Ok(data) => {
                if attempt > 1 {
                    tracing::info!(data = %endpoint, attempt, "the preparer's Data API answers");
                }
                return Ok(data);
            }
            Err(err @ TkoError::Dial { .. }) if endpoint.url.parse::<Endpoint>().is_ok() => {
                tracing::warn!(
                    data = %endpoint,
                    attempt,
                    retry_in = ?pause,
                    "waiting for the preparer's Data API (is `preparer serve` running there?): {err}"
                );
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = &mut stop => return Err(err),
                }
                pause = (pause * 2).min(MAX_RETRY);
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Every site, as clusters (site metadata `Site.<k>` → label `<k>`).
pub async fn clusters(data: &dyn DataApi) -> Result<Vec<Cluster>, TkoError> {
    let sites = data.all_sites(CatalogQuery::default()).await?;
    Ok(clusters_from_sites(
        sites.iter().map(|site| (site.id.as_str(), &site.metadata)),
    ))
}

/// The children of `parent`.
pub async fn children(data: &dyn DataApi, parent: &str) -> Result<Vec<ObservedChild>, TkoError> {
    let children = data
        .all_deployments(DeploymentQuery {
            parent_id: Some(parent.to_owned()),
            ..DeploymentQuery::default()
        })
        .await?;
    Ok(children
        .into_iter()
        .map(|d| ObservedChild {
            id: d.id,
            instance_key: d.instance_key,
            prepared: d.prepared,
            approved: d.approved,
        })
        .collect())
}

/// The NFTopology deployments as listed, and the revision the listing reflects: the first
/// half of the tracker's list + watch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyParents {
    /// The ids of the deployments that have children labelled `nf-deployment-name`, in
    /// listing order, each once.
    pub parents: Vec<String>,
    /// Each such child's id, with its parent's id.
    pub parent_of: HashMap<String, String>,
    /// Every change up to this revision is in the listing: watch from it for the changes
    /// after.
    pub revision: u64,
}

/// Lists the deployments that have children labelled `nf-deployment-name` (the NFTopology
/// deployments) and those children, with the revision the listing reflects.
pub async fn topology_parents(data: &dyn DataApi) -> Result<TopologyParents, TkoError> {
    let listing = data
        .all_deployments_listing(DeploymentQuery {
            metadata_patterns: [(
                nephrite_krm::keys::NF_DEPLOYMENT_NAME.to_owned(),
                "**".to_owned(),
            )]
            .into(),
            ..DeploymentQuery::default()
        })
        .await?;
    let mut listed = TopologyParents {
        revision: listing.revision,
        ..TopologyParents::default()
    };
    for child in listing.items {
        if child.parent_id.is_empty() {
            continue;
        }
        if !listed.parents.contains(&child.parent_id) {
            listed.parents.push(child.parent_id.clone());
        }
        listed.parent_of.insert(child.id, child.parent_id);
    }
    Ok(listed)
}
