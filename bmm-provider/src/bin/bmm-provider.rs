//! `bmm-provider`: the Cluster API provider for NVIDIA BMM and its standalone mode.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use nephrite_bmm_provider::client::{ClientConfig, Token};
use nephrite_bmm_provider::standalone::{self, Pace, State};
use nephrite_bmm_provider::{controller, daemon};
use nephrite_runtime::leader::{LeaseLock, LeaseTiming};
use nephrite_runtime::{DaemonIdentity, GrpcServer, LogFormat};

#[derive(Parser)]
#[command(
    name = "bmm-provider",
    version,
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
    #[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50071")))]
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
        /// Also run the node controller of `ccm` in this process, with
        /// --default-credentials (an alias kept for single-cluster setups).
        #[arg(long, env = "BMM_NODE_LIFECYCLE")]
        node_lifecycle: bool,
        #[command(flatten)]
        backoff: BackoffFlags,
        #[command(flatten)]
        election: ElectionFlags,
        /// Health, metrics, TLS, log format and the shutdown grace period.
        #[command(flatten)]
        serve: nephrite_runtime::ServeArgs,
    },
    /// The cloud-controller-manager's node controllers for a workload cluster on BMM: node
    /// initialization (provider ID, addresses, topology labels, the `uninitialized` taint)
    /// and node lifecycle (`shutdown` taint, deletion when the instance is gone).
    #[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50072")))]
    Ccm {
        /// The workload cluster's kubeconfig (in-cluster service account when absent).
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// The credentials Secret (`namespace/name`, keys `endpoint`, `orgName`, `token`);
        /// or give --endpoint, --org and --token-file.
        #[arg(long, env = "BMM_CREDENTIALS", conflicts_with_all = ["endpoint", "org", "token_file"])]
        credentials: Option<String>,
        /// The BMM API server root (`https://host[:port]`).
        #[arg(long, env = "BMM_ENDPOINT", requires_all = ["org", "token_file"])]
        endpoint: Option<String>,
        /// The org.
        #[arg(long, env = "BMM_ORG")]
        org: Option<String>,
        /// A file holding the bearer token (re-read when it changes).
        #[arg(long, env = "BMM_TOKEN_FILE")]
        token_file: Option<PathBuf>,
        /// `SITE=ZONE`: the `topology.kubernetes.io/zone` of Nodes in the site named SITE
        /// (repeat, or comma-separate); a site without one has its name as zone.
        #[arg(long = "zone", env = "BMM_ZONES", value_delimiter = ',')]
        zones: Vec<String>,
        /// Re-check of initialized Nodes (power state, deletion of their instance).
        #[arg(long, env = "BMM_NODE_RESYNC", default_value = "1m", value_parser = humantime::parse_duration)]
        resync: Duration,
        /// Re-check of Nodes whose instance is not complete yet (no addresses, no match).
        #[arg(long, env = "BMM_NODE_PENDING_POLL", default_value = "10s", value_parser = humantime::parse_duration)]
        pending_poll: Duration,
        /// Per-request timeout of the BMM client.
        #[arg(long, env = "BMM_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
        request_timeout: Duration,
        #[command(flatten)]
        backoff: BackoffFlags,
        #[command(flatten)]
        election: ElectionFlags,
        /// Health, metrics, TLS, log format and the shutdown grace period.
        #[command(flatten)]
        serve: nephrite_runtime::ServeArgs,
    },
    /// The OpenShift Machine API Machine controller on BMM (`machine.openshift.io/v1beta1`
    /// Machines with an `NvidiaBMMMachineProviderSpec`).
    #[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50073")))]
    MachineApi {
        /// Watch only this namespace (all when absent; OpenShift uses
        /// `openshift-machine-api`).
        #[arg(long, env = "BMM_WATCH_NAMESPACE")]
        namespace: Option<String>,
        /// Poll interval while an instance is provisioning or deleting.
        #[arg(long, env = "BMM_POLL_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
        poll_interval: Duration,
        /// Re-check of running Machines (an instance that failed or vanished).
        #[arg(long, env = "BMM_RESYNC", default_value = "5m", value_parser = humantime::parse_duration)]
        resync: Duration,
        #[command(flatten)]
        backoff: BackoffFlags,
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
        #[command(flatten)]
        sites: SiteFlags,
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
    /// Name of the Lease (default: `bmm-provider`, `bmm-cloud-controller-manager` for `ccm`).
    #[arg(long, env = "BMM_LEADER_ELECTION_ID")]
    leader_election_id: Option<String>,
    /// This replica's identity in the Lease (default: the pod or host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
}

#[derive(Args)]
struct BackoffFlags {
    /// The wait after a failed reconcile; it doubles (jittered) per failure of the same
    /// object and resets on success.
    #[arg(long, env = "BMM_ERROR_BACKOFF", default_value = "1s", value_parser = humantime::parse_duration)]
    error_backoff: Duration,
    /// The longest wait after failed reconciles.
    #[arg(long, env = "BMM_ERROR_BACKOFF_MAX", default_value = "5m", value_parser = humantime::parse_duration)]
    error_backoff_max: Duration,
}

impl BackoffFlags {
    /// The controller configuration with these waits, the rest default.
    fn config(&self) -> controller::ControllerConfig {
        controller::ControllerConfig {
            error_backoff: self.error_backoff,
            error_backoff_max: self.error_backoff_max,
            ..Default::default()
        }
    }
}

/// The `--zone SITE=ZONE` values as a map; empty entries (an empty `BMM_ZONES`) are skipped.
fn parse_zones(values: &[String]) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    values
        .iter()
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(|text| match text.split_once('=') {
            Some((site, zone)) if !site.trim().is_empty() && !zone.trim().is_empty() => {
                Ok((site.trim().to_string(), zone.trim().to_string()))
            }
            _ => Err(anyhow::anyhow!("--zone {text:?} is not SITE=ZONE")),
        })
        .collect()
}

impl ElectionFlags {
    /// The Lease, when electing; `client` gives the default namespace.
    fn lease(self, client: &kube::Client, default_id: &str) -> Option<(LeaseLock, LeaseTiming)> {
        self.leader_elect.then(|| {
            let lock = LeaseLock::new(
                self.leader_election_namespace
                    .unwrap_or_else(|| client.default_namespace().to_string()),
                self.leader_election_id
                    .unwrap_or_else(|| default_id.to_string()),
                self.identity.unwrap_or_else(|| {
                    format!("{}_{}", host_name(), uuid::Uuid::new_v4().simple())
                }),
            );
            (lock, LeaseTiming::default())
        })
    }
}

/// The client of `--kubeconfig`, or the default one (in-cluster, `$KUBECONFIG`, `~/.kube`).
async fn kube_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let Some(path) = kubeconfig else {
        return Ok(kube::Client::try_default().await?);
    };
    let file = kube::config::Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}

/// Serves the controllers of `role` with the shared daemon flags.
async fn serve_role(
    client: kube::Client,
    config: controller::ControllerConfig,
    role: controller::Role,
    serve: &nephrite_runtime::ServeArgs,
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

fn host_name() -> String {
    nephrite_runtime::host::hostname().unwrap_or_else(|| "bmm-provider".into())
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

/// Where and how `apply` registers the provisioned clusters as the preparer's Sites.
#[derive(Args)]
struct SiteFlags {
    /// Once every machine is Ready, register each cluster of the state with the preparer's
    /// Data API at this URL as a Site (id: the cluster's name; metadata: its labels and BMM
    /// site).
    #[arg(long, env = "BMM_REGISTER_SITES", value_name = "URL")]
    register_sites: Option<String>,
    /// Trust this PEM CA for the preparer's certificate (dials it with TLS).
    #[arg(
        long,
        env = "BMM_PREPARER_CA",
        value_name = "PEM",
        requires = "register_sites"
    )]
    preparer_ca: Option<PathBuf>,
    /// Present this PEM client certificate to the preparer (needs --preparer-key and
    /// --preparer-ca).
    #[arg(long, env = "BMM_PREPARER_CERT", value_name = "PEM", requires_all = ["preparer_key", "preparer_ca"])]
    preparer_cert: Option<PathBuf>,
    /// The PEM private key of --preparer-cert.
    #[arg(
        long,
        env = "BMM_PREPARER_KEY",
        value_name = "PEM",
        requires = "preparer_cert"
    )]
    preparer_key: Option<PathBuf>,
    /// Send the preparer the bearer token in this file.
    #[arg(
        long,
        env = "BMM_PREPARER_TOKEN_FILE",
        value_name = "FILE",
        requires = "register_sites"
    )]
    preparer_token_file: Option<PathBuf>,
}

impl SiteFlags {
    fn credentials(&self) -> nephrite_runtime::ClientArgs {
        nephrite_runtime::ClientArgs {
            ca: self.preparer_ca.clone(),
            cert: self.preparer_cert.clone(),
            key: self.preparer_key.clone(),
            token_file: self.preparer_token_file.clone(),
            tls_domain: None,
        }
    }
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
            backoff,
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
                ..backoff.config()
            };
            let lease = election.lease(&client, "bmm-provider");
            serve_role(client, config, controller::Role::Provider, &serve, lease).await?;
        }
        Command::MachineApi {
            namespace,
            poll_interval,
            resync,
            backoff,
            election,
            serve,
        } => {
            let client = kube::Client::try_default().await?;
            let config = controller::ControllerConfig {
                namespace,
                poll: poll_interval,
                resync,
                ..backoff.config()
            };
            let lease = election.lease(&client, "bmm-machine-api");
            serve_role(client, config, controller::Role::MachineApi, &serve, lease).await?;
        }
        Command::Ccm {
            kubeconfig,
            credentials,
            endpoint,
            org,
            token_file,
            zones,
            resync,
            pending_poll,
            request_timeout,
            backoff,
            election,
            serve,
        } => {
            let zones = parse_zones(&zones)?;
            let metrics = nephrite_bmm_provider::metrics::ProviderMetrics::default();
            let node_credentials = match (endpoint, org, token_file) {
                (Some(endpoint), Some(org), Some(token_file)) => {
                    let mut config = ClientConfig::new(endpoint, org, Token::new(""));
                    config.timeout = request_timeout;
                    Some(controller::NodeCredentials::token_file(
                        config,
                        token_file,
                        Some(metrics.clone()),
                    )?)
                }
                _ => None,
            };
            anyhow::ensure!(
                node_credentials.is_some() || credentials.is_some(),
                "give --credentials NAMESPACE/NAME or --endpoint, --org and --token-file"
            );
            let client = kube_client(kubeconfig.as_deref()).await?;
            let config = controller::ControllerConfig {
                default_credentials: credentials,
                node_credentials,
                zones,
                resync,
                dependency_poll: pending_poll,
                request_timeout,
                error_backoff: backoff.error_backoff,
                error_backoff_max: backoff.error_backoff_max,
                metrics,
                ..Default::default()
            };
            let lease = election.lease(&client, "bmm-cloud-controller-manager");
            serve_role(
                client,
                config,
                controller::Role::CloudControllerManager,
                &serve,
                lease,
            )
            .await?;
        }
        Command::Apply {
            file,
            connection,
            pace,
            sites,
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
            if let Some(preparer) = &sites.register_sites {
                let registered = nephrite_bmm_provider::sites::register_sites(
                    preparer,
                    &sites.credentials(),
                    &state.clusters,
                )
                .await?;
                for r in registered {
                    let what = if r.created { "registered" } else { "updated" };
                    emit(&format!("site {} {what} at {preparer}\n", r.site))?;
                }
            }
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
        Command::Serve { serve, .. }
        | Command::Ccm { serve, .. }
        | Command::MachineApi { serve, .. } => (serve.log_format, None),
        _ => (LogFormat::Text, Some("warn")),
    };
    let filter = std::env::var("RUST_LOG").ok();
    if let Err(e) = nephrite_runtime::init_tracing(format, filter.as_deref().or(default_filter)) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    nephrite_runtime::report::exit("bmm-provider", run(cli.command).await)
}
