//! `bmm-provider machine-api`: the flags of the OpenShift Machine API Machine controller
//! ([`crate::controller::run_machine_api_controller`]) and how it is started.

use std::time::Duration;

use super::controller_flags::RoleFlags;
use crate::controller::{ControllerConfig, Role};

/// `bmm-provider machine-api` flags.
#[derive(clap::Args)]
pub struct MachineApiCommand {
    /// Watch only this namespace (all when absent; OpenShift uses
    /// `openshift-machine-api`).
    #[arg(long, env = "BMM_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Poll interval while an instance is provisioning or deleting.
    #[arg(long, env = "BMM_POLL_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,
    /// Re-check of running Machines (an instance that failed or vanished).
    #[arg(long, env = "BMM_RESYNC", default_value = "5m", value_parser = humantime::parse_duration)]
    pub resync: Duration,
    /// Backoff, leader election and the daemon server.
    #[command(flatten)]
    pub role: RoleFlags,
}

impl MachineApiCommand {
    /// The controller's configuration from these flags.
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            namespace: self.namespace.clone(),
            poll: self.poll_interval,
            resync: self.resync,
            ..self.role.backoff.config()
        }
    }

    /// Serves the controller (on the Lease `bmm-machine-api` unless told otherwise) until
    /// SIGTERM or SIGINT.
    pub async fn run(self) -> anyhow::Result<()> {
        let client = kube::Client::try_default().await?;
        let config = self.config();
        self.role
            .run(client, config, Role::MachineApi, "bmm-machine-api")
            .await
    }
}
