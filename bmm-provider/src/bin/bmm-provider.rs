//! `bmm-provider`: the Cluster API provider for NVIDIA BMM and its standalone mode.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use nephrite_bmm_provider::standalone::{self, Pace, State};
use nephrite_bmm_provider::{controller, daemon};
use nephrite_runtime::leader::{LeaseLock, LeaseTiming};
use nephrite_runtime::{DaemonIdentity, GrpcServer, LogFormat};

#[derive(Parser)]
#[command(
    name = "bmm-provider",
    about = "Cluster API infrastructure provider for NVIDIA Bare Metal Manager"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the provider's CRDs as multi-document YAML.
    Crds,
    /// Write the clusterctl provider artefacts (`metadata.yaml`,
    /// `infrastructure-components.yaml`, `templates/cluster-template.yaml`) under a directory.
    Clusterctl {
        /// The output directory.
        #[arg(long, env = "BMM_CLUSTERCTL_OUT")]
        out: PathBuf,
        /// The release the artefacts are for (its major.minor goes into metadata.yaml).
        #[arg(long, env = "BMM_CLUSTERCTL_VERSION", default_value = concat!("v", env!("CARGO_PKG_VERSION")))]
        version: String,
    },
    /// Run the NvidiaBMMCluster and NvidiaBMMMachine controllers against the Kubernetes cluster of the kubeconfig
    /// (or the in-cluster service account).
    Serve {
        /// Watch only this namespace (all when absent).
        #[arg(long, env = "BMM_WATCH_NAMESPACE")]
        namespace: Option<String>,
        /// Credentials Secret (`namespace/name`) for clusters that name none.
        #[arg(long, env = "BMM_DEFAULT_CREDENTIALS")]
        default_credentials: Option<String>,
        /// Poll interval while BMM objects are provisioning or deleting.
        #[arg(long, env = "BMM_POLL_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
        poll_interval: Duration,
        /// Poll interval while waiting for another object.
        #[arg(long, env = "BMM_DEPENDENCY_POLL_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
        dependency_poll_interval: Duration,
        /// Also run the node-lifecycle controller (labels, addresses and deletion of Nodes
        /// with a `nvidia-bmm://` provider ID; needs --default-credentials).
        #[arg(long, env = "BMM_NODE_LIFECYCLE")]
        node_lifecycle: bool,
        #[command(flatten)]
        election: ElectionFlags,
        /// Health, metrics, TLS, log format and the shutdown grace period.
        #[command(flatten)]
        serve: nephrite_runtime::ServeArgs,
    },
    /// Provision the NvidiaBMMClusters and NvidiaBMMMachines of a file, without a management
    /// cluster; waits until every machine is Ready.
    Apply {
        /// The multi-document YAML file.
        #[arg(short = 'f', long = "filename", env = "BMM_FILE")]
        file: PathBuf,
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        pace: PaceFlags,
    },
    /// Show what the state file records.
    Status {
        #[command(flatten)]
        connection: Connection,
        /// Output format.
        #[arg(short = 'o', long, env = "BMM_OUTPUT", value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Delete everything the state file records; exits 0 once every object answers 404.
    Delete {
        #[command(flatten)]
        connection: Connection,
        #[command(flatten)]
        pace: PaceFlags,
    },
}

#[derive(Args)]
struct ElectionFlags {
    /// Act only while holding the Lease (run several replicas; one acts).
    #[arg(long, env = "BMM_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the Lease (default: the client's namespace, in a pod its own).
    #[arg(long, env = "BMM_LEADER_ELECTION_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// Name of the Lease.
    #[arg(long, env = "BMM_LEADER_ELECTION_ID", default_value = "bmm-provider")]
    leader_election_id: String,
    /// This replica's identity in the Lease (default: the pod or host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
}

fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "bmm-provider".into())
}

#[derive(Args)]
struct Connection {
    /// The BMM API server root (`https://host[:port]`).
    #[arg(long, env = "BMM_ENDPOINT")]
    endpoint: Option<String>,
    /// The org.
    #[arg(long, env = "BMM_ORG")]
    org: Option<String>,
    /// A file holding the bearer token (its path is recorded, never the token).
    #[arg(long, env = "BMM_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// The state file.
    #[arg(long, env = "BMM_STATE", default_value = "bmm-provider-state.json")]
    state: PathBuf,
    /// Per-request timeout.
    #[arg(long, env = "BMM_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
}

#[derive(Args)]
struct PaceFlags {
    /// Time between polls while something is provisioning.
    #[arg(long, env = "BMM_POLL_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    poll_interval: Duration,
    /// Give up after this long.
    #[arg(long, env = "BMM_TIMEOUT", default_value = "45m", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

impl Connection {
    /// The state file (when it exists) with the flags overriding what it records.
    fn state(&self) -> anyhow::Result<State> {
        let mut state = if self.state.exists() {
            State::load(&self.state)?
        } else {
            State {
                endpoint: String::new(),
                org: String::new(),
                token_file: PathBuf::new(),
                clusters: vec![],
                machines: vec![],
            }
        };
        if let Some(e) = &self.endpoint {
            state.endpoint = e.clone();
        }
        if let Some(o) = &self.org {
            state.org = o.clone();
        }
        if let Some(t) = &self.token_file {
            state.token_file = t.clone();
        }
        anyhow::ensure!(
            !state.endpoint.is_empty(),
            "--endpoint is required (no state file {} records one)",
            self.state.display()
        );
        anyhow::ensure!(
            !state.org.is_empty(),
            "--org is required (no state file {} records one)",
            self.state.display()
        );
        anyhow::ensure!(
            !state.token_file.as_os_str().is_empty(),
            "--token-file is required (no state file {} records one)",
            self.state.display()
        );
        Ok(state)
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

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Crds => {
            for crd in nephrite_bmm::crd::all_crds() {
                emit(&format!(
                    "---\n{}\n",
                    serde_norway::to_string(&crd)?.trim_end()
                ))?;
            }
        }
        Command::Clusterctl { out, version } => {
            for path in nephrite_bmm_provider::clusterctl::write(&out, &version)? {
                emit(&format!("{}\n", path.display()))?;
            }
        }
        Command::Serve {
            namespace,
            default_credentials,
            poll_interval,
            dependency_poll_interval,
            node_lifecycle,
            election,
            serve,
        } => {
            let client = kube::Client::try_default().await?;
            let config = controller::ControllerConfig {
                namespace,
                default_credentials,
                poll: poll_interval,
                dependency_poll: dependency_poll_interval,
                node_lifecycle,
                ..Default::default()
            };
            let identity = DaemonIdentity::new("bmm-provider", env!("CARGO_PKG_VERSION"));
            let mut server = GrpcServer::from_args(identity, &serve)?;
            config.metrics.register(&mut server)?;
            let bound = server.bind(&serve.listen).await?;
            let election = election.leader_elect.then(|| {
                let lock = LeaseLock::new(
                    election
                        .leader_election_namespace
                        .unwrap_or_else(|| client.default_namespace().to_string()),
                    election.leader_election_id,
                    election.identity.unwrap_or_else(|| {
                        format!("{}_{}", host_name(), uuid::Uuid::new_v4().simple())
                    }),
                );
                (lock, LeaseTiming::default())
            });
            let report = daemon::serve(bound, client, config, election).await?;
            tracing::info!(reason = %report.reason, "stopped");
        }
        Command::Apply {
            file,
            connection,
            pace,
        } => {
            let (clusters, machines) = standalone::read_documents(&file)?;
            let mut state = connection.state()?;
            standalone::merge_documents(&mut state, clusters, machines);
            let client = state.client(connection.request_timeout)?;
            standalone::apply(
                &mut state,
                &connection.state,
                &client,
                Pace {
                    poll: pace.poll_interval,
                    timeout: pace.timeout,
                },
            )
            .await?;
            emit(&standalone::status_table(&state))?;
        }
        Command::Status { connection, output } => {
            let state = connection.state()?;
            match output {
                Output::Table => emit(&standalone::status_table(&state))?,
                Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&state)?))?,
            }
        }
        Command::Delete { connection, pace } => {
            let mut state = connection.state()?;
            let client = state.client(connection.request_timeout)?;
            standalone::delete(
                &mut state,
                &connection.state,
                &client,
                Pace {
                    poll: pace.poll_interval,
                    timeout: pace.timeout,
                },
            )
            .await?;
            eprintln!("everything is deleted");
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // `serve` logs as its --log-format says (default text, `RUST_LOG` or info); the CLI
    // commands log warnings as text.
    let (format, default_filter) = match &cli.command {
        Command::Serve { serve, .. } => (serve.log_format, None),
        _ => (LogFormat::Text, Some("warn")),
    };
    let filter = std::env::var("RUST_LOG").ok();
    if let Err(e) = nephrite_runtime::init_tracing(format, filter.as_deref().or(default_filter)) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    match run(cli.command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
