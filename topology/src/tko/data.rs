//! The Data API calls the TKO backend makes, with paging and errors that name the call.

use std::collections::HashMap;

use nephrite_proto::nephrite::data::v1 as pb;
use nephrite_proto::nephrite::data::v1::data_client::DataClient;
use nephrite_runtime::Endpoint;
use nephrite_topology::api::Cluster;
use nephrite_topology::tko::{ObservedChild, clusters_from_sites};
use tonic::transport::Channel;

use super::TkoError;

/// A Data API client.
pub type Data = DataClient<Channel>;

const PAGE: u32 = 1000;

fn data_error(call: &'static str) -> impl FnOnce(tonic::Status) -> TkoError {
    move |status| TkoError::Data {
        call,
        status: Box::new(status),
    }
}

/// Dials the Data API.
pub async fn connect(endpoint: &str) -> Result<Data, TkoError> {
    let dial_error = |message: String| TkoError::Dial {
        endpoint: endpoint.to_owned(),
        message,
    };
    let parsed: Endpoint = endpoint.parse().map_err(|e| dial_error(format!("{e}")))?;
    let channel = nephrite_runtime::dial(&parsed)
        .await
        .map_err(|e| dial_error(e.to_string()))?;
    Ok(DataClient::new(channel))
}

/// Every site, as clusters (site metadata `Site.<k>` → label `<k>`).
pub async fn clusters(data: &mut Data) -> Result<Vec<Cluster>, TkoError> {
    let mut sites: Vec<(String, HashMap<String, String>)> = Vec::new();
    let mut after = String::new();
    loop {
        let mut stream = data
            .list_sites(pb::ListSitesRequest {
                window: Some(pb::Window {
                    offset: 0,
                    max_count: PAGE,
                    after_id: after.clone(),
                }),
                ..Default::default()
            })
            .await
            .map_err(data_error("ListSites"))?
            .into_inner();
        let mut count = 0;
        while let Some(site) = stream.message().await.map_err(data_error("ListSites"))? {
            count += 1;
            after = site.id.clone();
            sites.push((site.id, site.metadata));
        }
        if count < PAGE {
            break;
        }
    }
    Ok(clusters_from_sites(
        sites.iter().map(|(id, metadata)| (id.as_str(), metadata)),
    ))
}

/// The children of `parent`.
pub async fn children(data: &mut Data, parent: &str) -> Result<Vec<ObservedChild>, TkoError> {
    let mut children = Vec::new();
    let mut after = String::new();
    loop {
        let page = data
            .list_deployments(pb::ListDeploymentsRequest {
                parent_deployment_id: parent.to_owned(),
                window: Some(pb::Window {
                    offset: 0,
                    max_count: PAGE,
                    after_id: after.clone(),
                }),
                ..Default::default()
            })
            .await
            .map_err(data_error("ListDeployments"))?
            .into_inner();
        children.extend(page.deployments.into_iter().map(|d| ObservedChild {
            id: d.deployment_id,
            instance_key: d.instance_key,
            prepared: d.prepared,
            approved: d.approved,
        }));
        if page.next_after_id.is_empty() {
            break;
        }
        after = page.next_after_id;
    }
    Ok(children)
}

/// The ids of the deployments that have children labelled `nf-deployment-name` (the
/// NFTopology deployments), for a resync.
pub async fn topology_parents(data: &mut Data) -> Result<Vec<String>, TkoError> {
    let mut parents = Vec::new();
    let mut after = String::new();
    loop {
        let page = data
            .list_deployments(pb::ListDeploymentsRequest {
                metadata_patterns: [(
                    nephrite_krm::keys::NF_DEPLOYMENT_NAME.to_owned(),
                    "**".to_owned(),
                )]
                .into(),
                window: Some(pb::Window {
                    offset: 0,
                    max_count: PAGE,
                    after_id: after.clone(),
                }),
                ..Default::default()
            })
            .await
            .map_err(data_error("ListDeployments"))?
            .into_inner();
        for d in page.deployments {
            if !d.parent_deployment_id.is_empty() && !parents.contains(&d.parent_deployment_id) {
                parents.push(d.parent_deployment_id);
            }
        }
        if page.next_after_id.is_empty() {
            break;
        }
        after = page.next_after_id;
    }
    Ok(parents)
}

/// Re-exported so callers need not name the generated module.
pub use pb::{CreateDeploymentRequest, DeploymentInfo};

/// Calls `f` for an error mapper naming `call`.
pub fn error_for(call: &'static str) -> impl FnOnce(tonic::Status) -> TkoError {
    data_error(call)
}
