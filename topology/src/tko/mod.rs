//! The TKO backend: `ntc` as a preparation plugin of the preparer (`nephrite.preparer.plugin.v1`) for
//! `topology.nephio.org/v1alpha1` `NFTopology`, plus a tracker on the preparer's Data API,
//! which it reaches through the preparer's client crate (`nephrite-preparer-client`).
//!
//! - [`plugin`]: `Prepare` plans the NFTopology of the deployment's package (with the
//!   `NFClass`es in the same package, the registered sites as clusters) and makes the
//!   deployment's children what the plan wants: one child deployment per variant (idempotent
//!   through the instance key); gated children are created with `nephio.org/approve: Manual`.
//! - [`follow`]: the re-plan both use: the children as they are against the children the plan
//!   wants, the difference created, updated in place, deleted or (under
//!   `deletionPolicy: orphan`) left and logged; unchanged children are not touched.
//! - [`tracker`]: watches deployment and site changes; for each NFTopology deployment whose
//!   children, package or possible sites changed it re-plans, approves the gated children whose
//!   gates are open and keeps an `NFDeployedTopology` resource in the parent's package equal
//!   to the approved children.
//! - [`status`]: `ntc status`, the per-(instance, site) view of a topology deployment.
//! - [`election`]: several replicas, one writer, on a named lease of the Data API.
//!
//! The decisions are `nephrite_topology::tko`'s and `nephrite_topology::replan`'s.

pub mod data;
pub mod election;
pub mod follow;
pub mod parsed;
pub mod plugin;
pub mod status;
pub mod tracker;

use nephrite_krm::{Object, Package};
use nephrite_topology::api::{NF_CLASS_KIND, NF_TOPOLOGY_KIND, NFClass, NFTopology};

/// What went wrong talking to the preparer or reading its packages.
#[derive(Debug, thiserror::Error)]
pub enum TkoError {
    /// A Data API call failed: the call, the kind of failure and the preparer's message.
    #[error("data API {}: {}: {error}", .error.call(), .error.kind())]
    Data {
        /// What the preparer (or the way there) said.
        error: nephrite_preparer_client::DataError,
    },
    /// ntc's credentials for the Data API are unusable (a certificate, key, CA or token file).
    #[error("credentials for the data API: {0}")]
    Credentials(String),
    /// The Data API could not be reached.
    #[error("dialing the data API at {endpoint}: {message}")]
    Dial {
        /// The endpoint.
        endpoint: String,
        /// Why.
        message: String,
    },
    /// A package could not be read.
    #[error("deployment {deployment}: {message}")]
    Package {
        /// The deployment.
        deployment: String,
        /// What is wrong.
        message: String,
    },
    /// Leader election cannot run as configured.
    #[error("leader election: {0}")]
    Election(String),
    /// The topology could not be planned.
    #[error("deployment {deployment}: {source}")]
    Plan {
        /// The deployment.
        deployment: String,
        /// Why.
        source: nephrite_topology::TopologyError,
    },
}

impl From<nephrite_preparer_client::DataError> for TkoError {
    fn from(error: nephrite_preparer_client::DataError) -> Self {
        TkoError::Data { error }
    }
}

/// The NFTopology (named `name`, or the first one when `name` is empty) and the NFClasses of a
/// deployment's package.
pub fn topology_of(
    deployment: &str,
    package: &Package,
    name: &str,
) -> Result<(NFTopology, Vec<NFClass>), TkoError> {
    let bad = |message: String| TkoError::Package {
        deployment: deployment.to_owned(),
        message,
    };
    let object: &Object = package
        .iter()
        .find(|o| o.kind == NF_TOPOLOGY_KIND && (name.is_empty() || o.name() == Some(name)))
        .ok_or_else(|| bad(format!("no NFTopology {name:?} in the package")))?;
    let topology: NFTopology = object.to_typed().map_err(|e| bad(e.to_string()))?;
    let classes = package
        .iter()
        .filter(|o| o.kind == NF_CLASS_KIND)
        .map(|o| o.to_typed::<NFClass>().map_err(|e| bad(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((topology, classes))
}

/// The role the preparer calls ntc with: it may call `Prepare`, nothing else (`admin` may call
/// everything). Without `--auth-policy` every authenticated caller has it (ntc's one caller is
/// the preparer); with a policy file, give the preparer's identity this role there.
pub const PREPARER_ROLE: &str = "preparer";

/// ntc's roles, onto which `--auth-policy` is merged; identities it does not name are
/// [`PREPARER_ROLE`] unless a policy file says otherwise.
///
/// # Errors
/// Never for the built-in patterns (a message naming the pattern otherwise).
pub fn roles() -> Result<nephrite_runtime::AuthPolicy, String> {
    let service = plugin::SERVICE_NAME;
    nephrite_runtime::AuthPolicy::new()
        .with_role(PREPARER_ROLE, [format!("{service}/Prepare")])?
        .with_default_roles([PREPARER_ROLE])
}

/// A running TKO backend: the plugin server and the tracker.
pub struct RunningTko {
    /// Where the plugin is served.
    pub endpoint: nephrite_runtime::Endpoint,
    /// Stops both.
    pub shutdown: nephrite_runtime::ShutdownHandle,
    server: tokio::task::JoinHandle<
        Result<nephrite_runtime::ServeReport, nephrite_runtime::ServeError>,
    >,
    tracker: tokio::task::JoinHandle<()>,
}

impl RunningTko {
    /// Triggers shutdown and waits for both to stop.
    pub async fn stop(self) -> anyhow::Result<nephrite_runtime::ServeReport> {
        self.shutdown.trigger();
        self.wait().await
    }

    /// Waits for both to stop (after SIGTERM or [`Self::stop`]).
    pub async fn wait(self) -> anyhow::Result<nephrite_runtime::ServeReport> {
        let report = self.server.await??;
        self.tracker.await?;
        Ok(report)
    }
}

/// How the TKO backend runs.
#[derive(Debug, Clone)]
pub struct TkoConfig {
    /// The preparer's Data API.
    pub data: String,
    /// The credentials ntc presents to the Data API.
    pub credentials: nephrite_runtime::ClientArgs,
    /// The endpoint registered for the plugin; the bound address when `None`.
    pub advertise: Option<String>,
    /// The plugin's name in the preparer.
    pub plugin_name: String,
    /// The rollout policy.
    pub policy: nephrite_topology::RolloutPolicy,
    /// Leader election among replicas on a named lease of the Data API (`None`: this one
    /// replica leads from the start).
    pub election: Option<election::TkoElection>,
}

/// Registers (or replaces) `plugin` with the preparer.
pub(crate) async fn register(
    client: &data::Data,
    plugin: nephrite_preparer_client::Plugin,
) -> Result<(), TkoError> {
    use nephrite_preparer_client::DataApi as _;
    let (name, endpoint) = (plugin.name.clone(), plugin.endpoint.clone());
    client.register_plugin(plugin).await?;
    tracing::info!(plugin = %name, %endpoint, "registered with the preparer");
    Ok(())
}

/// Binds the plugin server of `server` on `listen`, registers it with the preparer as the
/// preparer of NFTopology (waiting for the preparer while it does not answer yet, until
/// shutdown), and starts the tracker, which follows what the plugin prepares. With
/// `config.election`, the replica registers and tracks only while it holds the lease
/// ([`election`]); `ntc_leading` on `/metrics` says whether it does.
pub async fn start(
    mut server: nephrite_runtime::GrpcServer,
    listen: &nephrite_runtime::Endpoint,
    config: TkoConfig,
) -> anyhow::Result<RunningTko> {
    use nephrite_preparer_client::{Plugin, PluginType};

    let data_api = data::DataEndpoint {
        url: config.data.clone(),
        credentials: config.credentials.clone(),
    };
    let following = tracker::Following::default();
    let leading = match config.election {
        Some(_) => election::Leading::default(),
        None => election::Leading::always(),
    };
    let gauge = prometheus_client::metrics::gauge::Gauge::<i64>::default();
    let (metric, help) = crate::porch::election::LEADING_METRIC;
    server.register_metric(metric, help, gauge.clone())?;
    let plugin = plugin::TopologyPlugin::new(
        config.policy.clone(),
        data_api.clone(),
        following.followed.clone(),
        following.fingerprints.clone(),
    )
    .leading(leading.clone());
    let bound = server
        .add_service(plugin::server(plugin))
        .bind(listen)
        .await?;
    let endpoint = bound.local_endpoint().clone();
    let shutdown = bound.shutdown_handle();
    let advertise = config
        .advertise
        .clone()
        .unwrap_or_else(|| endpoint.to_string());
    let registration = Plugin {
        plugin_type: PluginType::Prepare,
        name: config.plugin_name.clone(),
        endpoint: advertise.clone(),
        arguments: Vec::new(),
        properties: Default::default(),
        triggers: vec![nephrite_krm::Gvk::new(
            nephrite_topology::api::GROUP,
            nephrite_topology::api::VERSION,
            nephrite_topology::api::NF_TOPOLOGY_KIND,
        )],
    };
    let tracker = match config.election {
        Some(elected) => {
            tracing::info!(data = %config.data, lease = %elected.lease_name, identity = %elected.identity, "leader election on the Data API's lease");
            let term = election::Term {
                endpoint: data_api,
                plugin: registration,
                policy: config.policy.clone(),
                following,
            };
            tokio::spawn(election::run_elected(
                term,
                elected,
                shutdown.clone(),
                leading,
                gauge,
            ))
        }
        None => {
            let waiting = shutdown.clone();
            let client = data::connect_waiting(&data_api, async move {
                waiting.triggered().await;
            })
            .await?;
            register(&client, registration).await?;
            gauge.set(1);
            tokio::spawn(tracker::run(
                data_api,
                config.policy.clone(),
                following,
                shutdown.clone(),
            ))
        }
    };
    let server = tokio::spawn(bound.run());
    Ok(RunningTko {
        endpoint,
        shutdown,
        server,
        tracker,
    })
}
