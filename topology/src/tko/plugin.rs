//! `nephrite.preparer.plugin.v1.Preparer` for NFTopology: plan and make the child deployments
//! what the plan wants ([`super::follow::replan`], the tracker's path too), then follow the
//! deployment. The plugin API's server edge: the one module of the TKO backend that names its
//! protobuf (the Data API calls it makes go through the preparer's client crate).

use nephrite_krm::Package;
use nephrite_proto::nephrite::preparer::plugin::v1::preparer_server::{Preparer, PreparerServer};
use nephrite_proto::nephrite::preparer::plugin::v1::{PrepareRequest, PrepareResponse};
use nephrite_topology::{RolloutPolicy, plan};
use tonic::{Request, Response, Status};

use super::data::{self, DataEndpoint};
use super::election::Leading;
use super::follow::{self, Fingerprints, Followed};
use super::{TkoError, topology_of};

/// The plugin API's gRPC service name (`nephrite.preparer.plugin.v1.Preparer`), for role
/// tables.
pub const SERVICE_NAME: &str =
    <PreparerServer<TopologyPlugin> as tonic::server::NamedService>::NAME;

/// The gRPC service of `plugin`, to add to ntc's server.
pub fn server(plugin: TopologyPlugin) -> PreparerServer<TopologyPlugin> {
    PreparerServer::new(plugin)
}

/// The plugin service.
pub struct TopologyPlugin {
    policy: RolloutPolicy,
    /// The Data API this plugin reads sites from and writes children to.
    data: DataEndpoint,
    /// The deployments followed, shared with the tracker.
    followed: Followed,
    /// The children's fingerprints as last read, shared with the tracker.
    fingerprints: Fingerprints,
    /// Whether this replica leads: a standby prepares nothing (it writes nothing).
    leading: Leading,
}

impl TopologyPlugin {
    /// A plugin planning under `policy` against the Data API `data` (from ntc's own
    /// configuration), adding every deployment it prepares to `followed`.
    pub fn new(
        policy: RolloutPolicy,
        data: DataEndpoint,
        followed: Followed,
        fingerprints: Fingerprints,
    ) -> Self {
        TopologyPlugin {
            policy,
            data,
            followed,
            fingerprints,
            leading: Leading::always(),
        }
    }

    /// Prepares only while `leading` says this replica leads (leader election).
    pub fn leading(mut self, leading: Leading) -> Self {
        self.leading = leading;
        self
    }

    async fn prepare_package(&self, request: &PrepareRequest) -> Result<usize, TkoError> {
        let deployment = &request.deployment_id;
        if !self.leading.get() {
            return Err(TkoError::Election(format!(
                "deployment {deployment}: this ntc replica stands by (another holds the lease); \
                 the preparer retries and calls the leader once it has registered"
            )));
        }
        // Parsed off the async runtime's threads: a large or hostile document (the KRM reader
        // refuses one over its size or depth limit, in linear time) holds up no other call,
        // health check or shutdown.
        let yaml = request.package_yaml.clone();
        let package = tokio::task::spawn_blocking(move || Package::from_yaml(&yaml))
            .await
            .map_err(|e| TkoError::Package {
                deployment: deployment.clone(),
                message: format!("package_yaml: {e}"),
            })?
            .map_err(|e| TkoError::Package {
                deployment: deployment.clone(),
                message: format!("package_yaml: {e}"),
            })?;
        let (topology, classes) = topology_of(deployment, &package, &request.target_name)?;
        // The Data API is the one this plugin was configured with, never one a caller names:
        // a request's `data_endpoint` is only compared, so no caller can make ntc dial (and
        // write child deployments to) a server of its choosing.
        if !request.data_endpoint.is_empty() && request.data_endpoint != self.data.url {
            tracing::debug!(
                %deployment,
                requested = %request.data_endpoint,
                configured = %self.data.url,
                "ignoring the request's data endpoint; using the configured one"
            );
        }
        let data = data::connect(&self.data).await?;
        let clusters = data::clusters(&data).await?;
        let plan = plan::plan(&topology, &classes, &clusters, &self.policy).map_err(|source| {
            TkoError::Plan {
                deployment: deployment.clone(),
                source,
            }
        })?;
        if !plan.unplaced().is_empty() {
            tracing::warn!(%deployment, unplaced = ?plan.unplaced(), "instances match no site");
        }
        let applied =
            follow::replan(&data, deployment, &plan, &self.followed, &self.fingerprints).await?;
        if self.followed.insert(deployment) {
            tracing::info!(%deployment, "following the topology's sites and edits");
        }
        Ok(applied.created.len())
    }
}

#[tonic::async_trait]
impl Preparer for TopologyPlugin {
    async fn prepare(
        &self,
        request: Request<PrepareRequest>,
    ) -> Result<Response<PrepareResponse>, Status> {
        let request = request.into_inner();
        Ok(Response::new(match self.prepare_package(&request).await {
            Ok(_) => PrepareResponse {
                prepared: true,
                package_yaml: String::new(),
                error: String::new(),
            },
            Err(error) => {
                tracing::warn!(deployment = %request.deployment_id, %error, "not prepared");
                PrepareResponse {
                    prepared: false,
                    package_yaml: String::new(),
                    error: error.to_string(),
                }
            }
        }))
    }
}
