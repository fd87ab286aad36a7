//! What `serve`, `ccm` and `machine-api` share: the leader-election, error-backoff and daemon
//! server flags ([`RoleFlags`]), the Kubernetes client, and serving a role's controllers behind
//! the daemon server until a signal, then draining.

use std::path::Path;
use std::time::Duration;

use nephrite_runtime::leader::{LeaseLock, LeaseTiming};
use nephrite_runtime::{DaemonIdentity, GrpcServer, ServeArgs};

use crate::controller::{ControllerConfig, Role};
use crate::daemon;

/// Leader election: which Lease, and who this replica is in it.
#[derive(clap::Args)]
pub struct ElectionFlags {
    /// Act only while holding the Lease (run several replicas; one acts).
    #[arg(long, env = "BMM_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the Lease (default: the client's namespace, in a pod its own).
    #[arg(long, env = "BMM_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// Name of the Lease (default: `bmm-provider`, `bmm-cloud-controller-manager` for `ccm`).
    #[arg(long, env = "BMM_LEADER_ELECTION_ID")]
    pub leader_election_id: Option<String>,
    /// This replica's identity in the Lease (default: the pod or host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
}

impl ElectionFlags {
    /// The Lease, when electing; `client` gives the default namespace, `default_id` the
    /// role's Lease name.
    pub fn lease(
        self,
        client: &kube::Client,
        default_id: &str,
    ) -> Option<(LeaseLock, LeaseTiming)> {
        self.leader_elect.then(|| {
            let lock = LeaseLock::new(
                self.leader_election_namespace
                    .unwrap_or_else(|| client.default_namespace().to_string()),
                self.leader_election_id
                    .unwrap_or_else(|| default_id.to_string()),
                self.identity.unwrap_or_else(|| {
                    let host =
                        nephrite_runtime::host::hostname().unwrap_or_else(|| "bmm-provider".into());
                    format!("{host}_{}", uuid::Uuid::new_v4().simple())
                }),
            );
            (lock, LeaseTiming::default())
        })
    }
}

/// The backoff of failed reconciles.
#[derive(clap::Args)]
pub struct BackoffFlags {
    /// The wait after a failed reconcile; it doubles (jittered) per failure of the same
    /// object and resets on success.
    #[arg(long, env = "BMM_ERROR_BACKOFF", default_value = "1s", value_parser = humantime::parse_duration)]
    pub error_backoff: Duration,
    /// The longest wait after failed reconciles.
    #[arg(long, env = "BMM_ERROR_BACKOFF_MAX", default_value = "5m", value_parser = humantime::parse_duration)]
    pub error_backoff_max: Duration,
}

impl BackoffFlags {
    /// The controller configuration with these waits, the rest default.
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            error_backoff: self.error_backoff,
            error_backoff_max: self.error_backoff_max,
            ..Default::default()
        }
    }
}

/// The flags every controller role has, in the order `--help` lists them.
#[derive(clap::Args)]
pub struct RoleFlags {
    /// The backoff of failed reconciles.
    #[command(flatten)]
    pub backoff: BackoffFlags,
    /// Leader election.
    #[command(flatten)]
    pub election: ElectionFlags,
    /// Health, metrics, TLS, log format and the shutdown grace period.
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl RoleFlags {
    /// Serves the controllers of `role` with `config` (on the Lease `default_lease` unless the
    /// flags name another) until SIGTERM or SIGINT, then drains.
    pub async fn run(
        self,
        client: kube::Client,
        config: ControllerConfig,
        role: Role,
        default_lease: &str,
    ) -> anyhow::Result<()> {
        let lease = self.election.lease(&client, default_lease);
        serve_role(client, config, role, &self.serve, lease).await
    }
}

/// The client of `kubeconfig`, or the default one (in-cluster, `$KUBECONFIG`, `~/.kube`).
pub async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let Some(path) = kubeconfig else {
        return Ok(kube::Client::try_default().await?);
    };
    let file = kube::config::Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

/// Serves the controllers of `role` behind the daemon server of `serve` (its metrics on
/// `/metrics`) until SIGTERM or SIGINT, then drains.
async fn serve_role(
    client: kube::Client,
    config: ControllerConfig,
    role: Role,
    serve: &ServeArgs,
    election: Option<(LeaseLock, LeaseTiming)>,
) -> anyhow::Result<()> {
    let identity = DaemonIdentity::new("bmm-provider", env!("CARGO_PKG_VERSION"));
    let mut server = GrpcServer::from_args(identity, serve)?;
    config.metrics.register(&mut server)?;
    let bound = server.bind(&serve.listen).await?;
    let report = daemon::serve(bound, client, config, role, election).await?;
    tracing::info!(reason = %report.reason, "stopped");
    Ok(())
}
