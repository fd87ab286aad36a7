//! `bmm-provider apply --register-sites URL`: each provisioned cluster of the state becomes a
//! Site of the preparer (its Data API's `RegisterSite`, through the preparer's client crate),
//! so topologies can place network functions on it. The site's id is the cluster's name; its package is one
//! `metadata.nephio.org/v1alpha1` `Site` whose `spec` is the cluster's labels (the preparer
//! keeps them as metadata `Site.<label>`, which ntc reads back as the cluster's labels) and
//! the BMM site it runs in (`Site.bmm.nvidia.com/site`). Registering again updates the site.

use nephrite_preparer_client::{DataApi as _, ErrorKind, PreparerClient, Site, SiteInfo};
use nephrite_runtime::{ClientArgs, Endpoint};
use serde_json::{Map, Value, json};

use crate::observe::ClusterRecord;

/// The `spec` key naming the BMM site a cluster runs in.
pub const BMM_SITE_KEY: &str = "bmm.nvidia.com/site";

/// Why the sites could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// The preparer's address does not parse.
    #[error("--register-sites {endpoint:?}: {message}")]
    Endpoint {
        /// What was given.
        endpoint: String,
        /// Why it is not an endpoint.
        message: String,
    },
    /// The credentials for the preparer are unusable, or it cannot be dialled.
    #[error("the preparer at {endpoint}: {source} (is `preparer serve` running there?)")]
    Dial {
        /// The preparer.
        endpoint: String,
        /// Why.
        source: nephrite_runtime::ClientError,
    },
    /// The preparer refused a site.
    #[error("registering cluster {cluster} as a site: {kind}: {source}")]
    Register {
        /// The cluster.
        cluster: String,
        /// What kind of refusal (or `Unavailable` when the call never arrived).
        kind: ErrorKind,
        /// The preparer's answer.
        source: nephrite_preparer_client::DataError,
    },
}

/// The Site package of a cluster (YAML).
pub fn site_package(cluster: &ClusterRecord) -> String {
    let mut spec: Map<String, Value> = cluster
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if let Some(site) = &cluster.spec.site_ref.name {
        spec.insert(BMM_SITE_KEY.into(), Value::String(site.clone()));
    }
    let site = json!({
        "apiVersion": "metadata.nephio.org/v1alpha1",
        "kind": "Site",
        "metadata": {"name": cluster.name},
        "spec": spec,
    });
    serde_norway::to_string(&site).unwrap_or_default()
}

/// One registered site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The site's id (the cluster's name).
    pub site: String,
    /// `false` when it existed and was updated.
    pub created: bool,
}

/// Registers `clusters` with the preparer at `endpoint`, presenting `credentials`.
///
/// # Errors
/// The first failure, naming the cluster (nothing after it is registered).
pub async fn register_sites(
    endpoint: &str,
    credentials: &ClientArgs,
    clusters: &[ClusterRecord],
) -> Result<Vec<Registered>, SiteError> {
    let parsed: Endpoint = endpoint.parse().map_err(|e| SiteError::Endpoint {
        endpoint: endpoint.to_string(),
        message: format!("{e}"),
    })?;
    let channel = credentials
        .dial(&parsed)
        .await
        .map_err(|source| SiteError::Dial {
            endpoint: endpoint.to_string(),
            source,
        })?;
    let data = PreparerClient::new(channel);
    let mut registered = Vec::new();
    for cluster in clusters {
        let site = Site {
            info: SiteInfo {
                id: cluster.name.clone(),
                ..SiteInfo::default()
            },
            package_yaml: site_package(cluster),
        };
        let created = data
            .register_site(site)
            .await
            .map_err(|source| SiteError::Register {
                cluster: cluster.name.clone(),
                kind: source.kind(),
                source,
            })?;
        registered.push(Registered {
            site: cluster.name.clone(),
            created,
        });
    }
    Ok(registered)
}
