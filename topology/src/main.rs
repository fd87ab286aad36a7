//! `ntc`: the NFTopology controller and its CLI.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use nephrite_ntc::output::{Format, render};
use nephrite_ntc::porch::election::{self, ElectionConfig};
use nephrite_ntc::porch::{self, PorchConfig};
use nephrite_ntc::tko::{self, TkoConfig};
use nephrite_ntc::{crds, input};
use nephrite_runtime::leader::LeaseLock;
use nephrite_runtime::{ClientArgs, DaemonIdentity, GrpcServer, ServeArgs, init_tracing};
use nephrite_topology::{RolloutPolicy, plan};
use prometheus_client::metrics::gauge::Gauge;

/// The NFTopology controller: network-function topology intent → per-cluster packages, rollout
/// gates and the deployed topology.
#[derive(Parser)]
#[command(name = "ntc", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Plan offline: print the PackageVariantSets, gates and deployed topology of a topology.
    Plan(PlanArgs),
    /// Print the CRDs (NFTopology, NFClass, NFDeployedTopology).
    Crds,
    /// Run the controller.
    Serve(Box<ServeCommand>),
    /// TKO: where each instance and site of a topology deployment stands (through the Data API).
    Status(Box<StatusArgs>),
}

#[derive(clap::Args)]
struct StatusArgs {
    /// The NFTopology deployment's id.
    #[arg(value_name = "DEPLOYMENT")]
    deployment: String,
    /// The NFTopology's name in the deployment's package (default: the first one).
    #[arg(long, env = "NTC_TOPOLOGY_NAME", default_value = "")]
    topology: String,
    /// The preparer's Data API endpoint.
    #[arg(
        long,
        env = "NTC_DATA",
        value_name = "URL",
        default_value = "http://127.0.0.1:50051"
    )]
    data: String,
    /// Output format.
    #[arg(short = 'o', long, env = "NTC_OUTPUT", value_enum, default_value_t = Format::Table)]
    output: Format,
    #[command(flatten)]
    policy: PolicyArgs,
    /// The credentials presented to the preparer's Data API.
    #[command(flatten, next_help_heading = "Credentials for the preparer's Data API")]
    credentials: ClientArgs,
}

#[derive(clap::Args)]
struct PlanArgs {
    /// The NFTopology (YAML).
    #[arg(
        short = 'f',
        long = "file",
        env = "NTC_TOPOLOGY",
        value_name = "TOPOLOGY.yaml"
    )]
    topology: PathBuf,
    /// The NFClasses (multi-document YAML).
    #[arg(long, env = "NTC_CLASSES", value_name = "CLASSES.yaml")]
    classes: PathBuf,
    /// The clusters: a YAML list of {name, labels} or WorkloadCluster objects.
    #[arg(long, env = "NTC_CLUSTERS", value_name = "CLUSTERS.yaml")]
    clusters: PathBuf,
    /// Output format.
    #[arg(short = 'o', long, env = "NTC_OUTPUT", value_enum, default_value_t = Format::Yaml)]
    output: Format,
    #[command(flatten)]
    policy: PolicyArgs,
}

#[derive(clap::Args)]
struct PolicyArgs {
    /// A rollout rule `x:y` (type x waits for every connected y); repeatable. Default `smf:upf`.
    #[arg(
        long = "policy",
        env = "NTC_POLICY",
        value_delimiter = ',',
        value_name = "X:Y"
    )]
    rules: Vec<String>,
    /// No rollout rule at all (nothing waits).
    #[arg(long, env = "NTC_NO_POLICY", conflicts_with = "rules")]
    no_policy: bool,
}

impl PolicyArgs {
    fn policy(&self) -> anyhow::Result<RolloutPolicy> {
        if self.no_policy {
            return Ok(RolloutPolicy::none());
        }
        if self.rules.is_empty() {
            return Ok(RolloutPolicy::default());
        }
        Ok(RolloutPolicy::parse(&self.rules)?)
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Backend {
    /// Preparation plugin and tracker on the preparer's Data API (sites play the clusters).
    Tko,
    /// Kubernetes controller for Porch (PackageVariantSets, PackageRevisions).
    Porch,
}

#[derive(clap::Args)]
// Every daemon has its own default port, so several run on one host (README, "Ports").
#[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50061")))]
struct ServeCommand {
    /// Which backend drives the packages.
    #[arg(long, env = "NTC_BACKEND", value_enum, default_value = "tko")]
    backend: Backend,
    /// TKO: the preparer's Data API endpoint.
    #[arg(
        long,
        env = "NTC_DATA",
        value_name = "URL",
        default_value = "http://127.0.0.1:50051"
    )]
    data: String,
    /// TKO: the endpoint the preparer calls the plugin on (default: the bound --listen address).
    #[arg(long, env = "NTC_ADVERTISE", value_name = "URL")]
    advertise: Option<String>,
    /// TKO: the plugin's name in the preparer.
    #[arg(long, env = "NTC_PLUGIN_NAME", default_value = "ntc")]
    plugin_name: String,
    /// Kubeconfig file (otherwise the in-cluster or default configuration).
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Watch this namespace only.
    #[arg(long, env = "NTC_NAMESPACE")]
    namespace: Option<String>,
    /// Server-side-apply field manager.
    #[arg(long, env = "NTC_FIELD_MANAGER", default_value = "ntc")]
    field_manager: String,
    #[command(flatten, next_help_heading = "Leader election")]
    election: ElectionArgs,
    #[command(flatten)]
    policy: PolicyArgs,
    /// TKO: the credentials ntc presents to the preparer's Data API.
    #[command(
        flatten,
        next_help_heading = "TKO: credentials for the preparer's Data API"
    )]
    data_credentials: ClientArgs,
    #[command(flatten)]
    serve: ServeArgs,
}

/// The lease the replicas share: Porch, a `coordination.k8s.io/v1` Lease (on unless
/// `--no-leader-election`); TKO, a named lease of the preparer's Data API (with
/// `--leader-election`).
#[derive(clap::Args)]
struct ElectionArgs {
    /// Porch: run the controller without a Lease (one replica only; no `leases` access needed).
    #[arg(long, env = "NTC_NO_LEADER_ELECTION")]
    no_leader_election: bool,
    /// TKO: elect one leader among replicas on the Data API's named lease `--lease-name`
    /// (without it, the replica registers and tracks at once: run one).
    #[arg(
        long,
        env = "NTC_LEADER_ELECTION",
        conflicts_with = "no_leader_election"
    )]
    leader_election: bool,
    /// Porch: namespace of the leader-election Lease.
    #[arg(long, env = "NTC_LEASE_NAMESPACE", default_value = "nephrite-system")]
    lease_namespace: String,
    /// Name of the leader-election Lease (Porch) or of the Data API's named lease (TKO).
    #[arg(long, env = "NTC_LEASE_NAME", default_value = "ntc")]
    lease_name: String,
    /// This replica's identity in the Lease, unique among the replicas (default: the host
    /// name, which is the pod's name in a pod, and the process id).
    #[arg(long, env = "NTC_IDENTITY")]
    identity: Option<String>,
    /// Seconds a standby waits after the Lease last changed before taking it over.
    #[arg(
        long,
        env = "NTC_LEASE_DURATION",
        value_name = "SECONDS",
        default_value_t = 15
    )]
    lease_duration: u64,
    /// Seconds a leader keeps leading without renewing (less than the lease duration).
    #[arg(
        long,
        env = "NTC_LEASE_RENEW_DEADLINE",
        value_name = "SECONDS",
        default_value_t = 10
    )]
    lease_renew_deadline: u64,
    /// Seconds between two tries to acquire or renew (less than the renew deadline).
    #[arg(
        long,
        env = "NTC_LEASE_RETRY_PERIOD",
        value_name = "SECONDS",
        default_value_t = 2
    )]
    lease_retry_period: u64,
}

impl ElectionArgs {
    /// `--identity`, else the host name and the process id.
    fn identity(&self) -> String {
        match &self.identity {
            Some(identity) if !identity.is_empty() => identity.clone(),
            _ => format!("{}-{}", host_name(), std::process::id()),
        }
    }

    /// The TKO election's configuration, `None` without `--leader-election`.
    fn tko(&self) -> anyhow::Result<Option<tko::election::TkoElection>> {
        if !self.leader_election {
            return Ok(None);
        }
        let secs = std::time::Duration::from_secs;
        Ok(Some(tko::election::TkoElection {
            lease_name: self.lease_name.clone(),
            identity: self.identity(),
            timing: tko::election::timing(
                secs(self.lease_duration),
                secs(self.lease_renew_deadline),
                secs(self.lease_retry_period),
            )?,
        }))
    }

    /// The election's configuration, `None` with `--no-leader-election`.
    fn config(&self) -> anyhow::Result<Option<ElectionConfig>> {
        if self.no_leader_election {
            return Ok(None);
        }
        let identity = self.identity();
        Ok(Some(ElectionConfig {
            lock: LeaseLock::new(&self.lease_namespace, &self.lease_name, identity),
            timing: election::timing(
                self.lease_duration,
                self.lease_renew_deadline,
                self.lease_retry_period,
            )?,
        }))
    }
}

/// `HOSTNAME` (a pod's name in Kubernetes), else the kernel's host name, else `ntc`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
        })
        .unwrap_or_else(|| "ntc".to_owned())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    nephrite_runtime::report::exit("ntc", run().await)
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan(args) => plan_command(&args),
        Command::Crds => {
            print!("{}", crds::crds_yaml());
            Ok(())
        }
        Command::Serve(args) => serve(*args).await,
        Command::Status(args) => status_command(&args).await,
    }
}

async fn status_command(args: &StatusArgs) -> anyhow::Result<()> {
    let policy = args.policy.policy()?;
    let endpoint = tko::data::DataEndpoint {
        url: args.data.clone(),
        credentials: args.credentials.clone(),
    };
    let data = tko::data::connect(&endpoint).await?;
    let rows = tko::status::status_rows(&data, &args.deployment, &args.topology, &policy).await?;
    match args.output {
        Format::Table => print!("{}", nephrite_topology::replan::render_table(&rows)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Format::Yaml => print!("{}", serde_norway::to_string(&rows)?),
    }
    Ok(())
}

fn plan_command(args: &PlanArgs) -> anyhow::Result<()> {
    let policy = args.policy.policy()?;
    let topology = input::read_topology(&args.topology)?;
    let classes = input::read_classes(&args.classes)?;
    let clusters = input::read_clusters(&args.clusters)?;
    let plan = plan::plan(&topology, &classes, &clusters, &policy)?;
    print!("{}", render(&plan, args.output)?);
    for instance in plan.unplaced() {
        eprintln!("warning: instance {instance}: no cluster matches its selector");
    }
    Ok(())
}

async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

async fn serve(args: ServeCommand) -> anyhow::Result<()> {
    init_tracing(
        args.serve.log_format,
        std::env::var("RUST_LOG").ok().as_deref(),
    )?;
    let policy = args.policy.policy()?;
    let identity = DaemonIdentity::new("ntc", env!("CARGO_PKG_VERSION"));
    // `Prepare` is for the `preparer` role (and `admin`); health stays open, GetInfo and
    // reflection need any credentials once authentication is on.
    let roles = tko::roles().map_err(anyhow::Error::msg)?;
    let mut server = GrpcServer::from_args_with_roles(identity, &args.serve, roles)?;
    let shutdown = server.shutdown_handle();
    match args.backend {
        Backend::Tko => {
            let config = TkoConfig {
                data: args.data.clone(),
                credentials: args.data_credentials.clone(),
                advertise: args.advertise.clone(),
                plugin_name: args.plugin_name.clone(),
                policy,
                election: args.election.tko()?,
            };
            let running = tko::start(server, &args.serve.listen, config).await?;
            let report = running.wait().await?;
            tracing::info!(reason = %report.reason, "stopped");
        }
        Backend::Porch => {
            let client = client(args.kubeconfig.as_ref()).await?;
            let config = PorchConfig {
                namespace: args.namespace.clone(),
                policy,
                field_manager: args.field_manager.clone(),
            };
            let controller = match args.election.config()? {
                Some(election) => {
                    let leading = Gauge::default();
                    let (name, help) = election::LEADING_METRIC;
                    server.register_metric(name, help, leading.clone())?;
                    tokio::spawn(election::run_elected(
                        client,
                        config,
                        election,
                        shutdown.clone(),
                        leading,
                    ))
                }
                None => {
                    let controller_shutdown = shutdown.clone();
                    tokio::spawn(porch::run(client, config, async move {
                        controller_shutdown.triggered().await;
                    }))
                }
            };
            let report = server.serve(&args.serve.listen).await?;
            controller.await?;
            tracing::info!(reason = %report.reason, "stopped");
        }
    }
    Ok(())
}
