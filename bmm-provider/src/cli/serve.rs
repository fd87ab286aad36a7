//! `bmm-provider serve`: the NvidiaBMMCluster and NvidiaBMMMachine controllers (and, with
//! `--node-lifecycle`, the node controller of `ccm`) in a management cluster.

use std::time::Duration;

use super::controller_flags::RoleFlags;
use crate::controller::{ControllerConfig, Role};

/// `bmm-provider serve` flags.
#[derive(clap::Args)]
pub struct ServeCommand {
    /// Watch only this namespace (all when absent).
    #[arg(long, env = "BMM_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Credentials Secret (`namespace/name`) for clusters that name none.
    #[arg(long, env = "BMM_DEFAULT_CREDENTIALS")]
    pub default_credentials: Option<String>,
    /// Poll interval while BMM objects are provisioning or deleting.
    #[arg(long, env = "BMM_POLL_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,
    /// Poll interval while waiting for another object.
    #[arg(long, env = "BMM_DEPENDENCY_POLL_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
    pub dependency_poll_interval: Duration,
    /// Also run the node controller of `ccm` in this process, with
    /// --default-credentials (an alias kept for single-cluster setups).
    #[arg(long, env = "BMM_NODE_LIFECYCLE")]
    pub node_lifecycle: bool,
    /// Backoff, leader election and the daemon server.
    #[command(flatten)]
    pub role: RoleFlags,
}

impl ServeCommand {
    /// The controllers' configuration from these flags.
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            namespace: self.namespace.clone(),
            default_credentials: self.default_credentials.clone(),
            poll: self.poll_interval,
            dependency_poll: self.dependency_poll_interval,
            node_lifecycle: self.node_lifecycle,
            ..self.role.backoff.config()
        }
    }

    /// Serves the controllers (on the Lease `bmm-provider` unless told otherwise) until
    /// SIGTERM or SIGINT.
    pub async fn run(self) -> anyhow::Result<()> {
        let client = kube::Client::try_default().await?;
        let config = self.config();
        self.role
            .run(client, config, Role::Provider, "bmm-provider")
            .await
    }
}
