//! The `bmm-provider` command line. Each subcommand's flags (every one also an environment
//! variable) and the assembly of its configuration from them live in a module of their own,
//! so the binary only parses, sets up logging and runs what was asked:
//!
//! | subcommand | module |
//! |---|---|
//! | `serve` (Cluster API controllers) | [`serve`] |
//! | `ccm` (cloud-controller-manager node controllers) | [`ccm`] |
//! | `machine-api` (OpenShift Machine API controller) | [`machine_api`] |
//! | `apply`, `status`, `delete` (standalone mode) | [`standalone`] |
//! | `crds`, `clusterctl` (artefacts) | [`artefacts`] |
//!
//! The flags the three controller roles share (the Lease, the error backoff) and how a role is
//! served are in [`controller_flags`].

use clap::{Parser, Subcommand};
use nephrite_runtime::LogFormat;

pub mod artefacts;
pub mod ccm;
pub mod controller_flags;
pub mod machine_api;
pub mod serve;
pub mod standalone;

/// The `bmm-provider` command line.
#[derive(Parser)]
#[command(
    name = "bmm-provider",
    version,
    about = "Cluster API infrastructure provider for NVIDIA Bare Metal Manager"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Print the provider's CRDs as multi-document YAML.
    Crds,
    /// Write the clusterctl provider artefacts (`metadata.yaml`,
    /// `infrastructure-components.yaml`, `templates/cluster-template.yaml`) under a directory.
    Clusterctl(artefacts::ClusterctlCommand),
    /// Run the NvidiaBMMCluster and NvidiaBMMMachine controllers against the Kubernetes cluster of the kubeconfig
    /// (or the in-cluster service account).
    #[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50071")))]
    Serve(serve::ServeCommand),
    /// The cloud-controller-manager's node controllers for a workload cluster on BMM: node
    /// initialization (provider ID, addresses, topology labels, the `uninitialized` taint)
    /// and node lifecycle (`shutdown` taint, deletion when the instance is gone).
    #[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50072")))]
    Ccm(ccm::CcmCommand),
    /// The OpenShift Machine API Machine controller on BMM (`machine.openshift.io/v1beta1`
    /// Machines with an `NvidiaBMMMachineProviderSpec`).
    #[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50073")))]
    MachineApi(machine_api::MachineApiCommand),
    /// Provision the NvidiaBMMClusters and NvidiaBMMMachines of a file, without a management
    /// cluster; waits until every machine is Ready.
    Apply(standalone::ApplyCommand),
    /// Show what the state file records.
    Status(standalone::StatusCommand),
    /// Delete everything the state file records; exits 0 once every object answers 404.
    Delete(standalone::DeleteCommand),
}

impl Command {
    /// How this command logs: a controller role as its `--log-format` says (default text,
    /// filter `RUST_LOG` or info); the one-shot commands as text, warnings only unless
    /// `RUST_LOG` says otherwise. Returns the format and the default filter.
    pub fn logging(&self) -> (LogFormat, Option<&'static str>) {
        match self {
            Command::Serve(command) => (command.role.serve.log_format, None),
            Command::Ccm(command) => (command.role.serve.log_format, None),
            Command::MachineApi(command) => (command.role.serve.log_format, None),
            _ => (LogFormat::Text, Some("warn")),
        }
    }

    /// Runs the command: a controller role until it is told to stop (SIGTERM, SIGINT), the
    /// others to completion.
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Crds => artefacts::print_crds(),
            Command::Clusterctl(command) => command.run(),
            Command::Serve(command) => command.run().await,
            Command::Ccm(command) => command.run().await,
            Command::MachineApi(command) => command.run().await,
            Command::Apply(command) => command.run().await,
            Command::Status(command) => command.run(),
            Command::Delete(command) => command.run().await,
        }
    }
}

/// Writes `text` to stdout; a reader that has gone (`| head`) is not an error.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
