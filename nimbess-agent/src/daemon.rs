//! `nimbess-agent serve`: the config, the data plane driver, the fabric
//! (when `--store` is given), the agent, SIGHUP reloads, and the gRPC
//! services on the Unix socket, until SIGTERM.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use nephrite_pipeline::{DEFAULT_SERVICE_CIDR, EgressPolicy, Ipv4Cidr};
use nephrite_runtime::{DaemonIdentity, Endpoint, GrpcServer, ServeArgs, init_tracing};

use crate::agent::Agent;
use crate::config::{AgentConfig, DriverKind};
use crate::driver::kernel::{KernelDriver, firewall::NftFirewall};
use crate::driver::{Driver, sim::SimDriver};
use crate::fabric::Fabric;
use crate::grpc::add_services;
use crate::state::StateStore;

/// The agent's socket unless `--socket` says otherwise.
pub const DEFAULT_SOCKET: &str = "/run/nimbess/agent.sock";

/// The umask the socket is created under: mode 0600.
const SOCKET_UMASK: u32 = 0o177;

/// `serve` flags.
#[derive(Debug, Clone, clap::Args)]
// The agent serves on --socket only: the shared --listen would do nothing, so help hides it.
#[command(mut_arg("listen", |arg| arg.hide(true)))]
pub struct ServeCommand {
    /// The config file (YAML: driver, networks).
    #[arg(long, env = "NIMBESS_CONFIG")]
    pub config: PathBuf,
    /// Unix socket for the CNI and Agent APIs (mode 0600). The shared `--listen` flag is not used.
    #[arg(long, env = "NIMBESS_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Directory of the persistent state (created when missing).
    #[arg(long, env = "NIMBESS_STATE_DIR", default_value = "/var/lib/nimbess")]
    pub state_dir: PathBuf,
    /// Data plane; overrides the config file's `driver`.
    #[arg(long, env = "NIMBESS_DRIVER", value_enum)]
    pub driver: Option<DriverKind>,
    /// Seconds between two looks for ports whose netns is gone (they are
    /// freed as a DEL would; also done at start and before every ADD).
    #[arg(long, env = "NIMBESS_REAP_INTERVAL", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub reap_interval: u64,
    /// The cluster's Service CIDR: refused at start (and on reload) when it
    /// overlaps a pod network.
    #[arg(long, env = "NIMBESS_SERVICE_CIDR", default_value_t = DEFAULT_SERVICE_CIDR)]
    pub service_cidr: Ipv4Cidr,
    /// Watch the cluster's Services, EndpointSlices, NetworkPolicies,
    /// Namespaces and Pods (in-cluster config or KUBECONFIG).
    #[arg(long, env = "NIMBESS_KUBE", conflicts_with = "resources")]
    pub kube: bool,
    /// The same objects from Kubernetes YAML files: `dir:PATH` (every
    /// `*.yaml` there, reloaded on change within seconds).
    #[arg(long, env = "NIMBESS_RESOURCES")]
    pub resources: Option<crate::northbound::Source>,
    /// On SIGTERM, once the server has stopped, remove the kernel data plane
    /// (as `nimbess-agent teardown` does); without it the data plane stays
    /// for the next start to adopt.
    #[arg(long, env = "NIMBESS_TEARDOWN_ON_EXIT")]
    pub teardown_on_exit: bool,
    /// Multi-host fabric flags.
    #[command(flatten)]
    pub fabric: FabricArgs,
    /// Shared serving flags.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// Multi-host fabric flags.
#[derive(Debug, Clone, clap::Args)]
pub struct FabricArgs {
    /// The fabric's store, `etcd://HOST:PORT[,HOST:PORT]`: networks, addresses and every
    /// host's ports are shared there. Without it the state is this host's alone.
    #[arg(long, env = "NIMBESS_STORE")]
    pub store: Option<String>,
    /// This host's name in the fabric (default: the hostname).
    #[arg(long, env = "NIMBESS_HOST_NAME")]
    pub host_name: Option<String>,
    /// This host's underlay address, where other hosts send its VXLAN traffic
    /// (default: the address this host reaches the store from).
    #[arg(long, env = "NIMBESS_UNDERLAY")]
    pub underlay: Option<std::net::Ipv4Addr>,
    /// Seconds this host's ports stay in the fabric after its agent stops
    /// renewing its lease (dies, or loses the store).
    #[arg(long, env = "NIMBESS_LEASE_TTL", default_value_t = 10)]
    pub lease_ttl: i64,
}

/// Run the agent until SIGTERM.
///
/// # Errors
/// The config, the state, the driver, the fabric or the socket could not be
/// set up, or the server failed.
pub async fn run(command: &ServeCommand) -> anyhow::Result<()> {
    init_tracing(
        command.serve.log_format,
        std::env::var("RUST_LOG").ok().as_deref(),
    )?;
    let config = AgentConfig::load(&command.config)?;
    check_service_cidr(&config, command.service_cidr)
        .with_context(|| format!("config {}", command.config.display()))?;
    let kind = command
        .driver
        .or(config.driver)
        .unwrap_or(DriverKind::Kernel);
    let joined = join_fabric(&command.fabric).await?;
    let driver = match kind {
        DriverKind::Kernel => {
            let mut kernel = KernelDriver::new(NftFirewall::new())?;
            kernel.set_egress(command.service_cidr, config.masquerade.clone());
            if let Some(f) = &joined {
                kernel.set_underlay(f.underlay());
            }
            Driver::Kernel(kernel)
        }
        DriverKind::Sim => Driver::Sim(SimDriver::new()),
    };
    let store = StateStore::open(&command.state_dir)?;
    let agent = match joined {
        Some(f) => {
            let (agent, revision) =
                Agent::start_in_fabric(store, &config.networks, driver, f).await?;
            let agent = Arc::new(agent);
            tokio::spawn(Arc::clone(&agent).follow_fabric(revision));
            tokio::spawn(Arc::clone(&agent).keep_alive_in_fabric());
            agent
        }
        None => Arc::new(Agent::start(store, &config.networks, driver).await?),
    };
    tracing::info!(driver = ?kind, networks = config.networks.len(), "state loaded, data plane reconciled");
    tokio::spawn(Arc::clone(&agent).reap_periodically(Duration::from_secs(command.reap_interval)));
    start_northbound(command, &agent).await?;
    reload_on_hangup(
        Arc::clone(&agent),
        command.config.clone(),
        command.service_cidr,
    )?;
    serve(agent, &command.socket, &command.serve).await?;
    if command.teardown_on_exit && kind == DriverKind::Kernel {
        let removed = crate::teardown::teardown()
            .await
            .context("--teardown-on-exit")?;
        tracing::info!(objects = removed.len(), "data plane torn down");
    }
    Ok(())
}

/// The northbound's source feeding the agent (`--kube`, `--resources`).
async fn start_northbound(command: &ServeCommand, agent: &Arc<Agent>) -> anyhow::Result<()> {
    use crate::northbound::{Source, follow, kube::watch_cluster, resources::watch_dir};
    let source = match (&command.resources, command.kube) {
        (Some(source), _) => source.clone(),
        (None, true) => Source::Kube,
        (None, false) => return Ok(()),
    };
    let (tx, rx) = tokio::sync::watch::channel(None);
    match source {
        Source::Dir(dir) => {
            anyhow::ensure!(
                dir.is_dir(),
                "--resources dir:{}: not a directory",
                dir.display()
            );
            tracing::info!(dir = %dir.display(), "northbound: resources from files");
            tokio::spawn(watch_dir(dir, tx));
        }
        Source::Kube => {
            let client = kube::Client::try_default()
                .await
                .context("--kube: no Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
            tracing::info!("northbound: watching the cluster");
            tokio::spawn(watch_cluster(client, tx));
        }
    }
    tokio::spawn(follow(Arc::clone(agent), rx));
    Ok(())
}

async fn join_fabric(args: &FabricArgs) -> anyhow::Result<Option<Fabric>> {
    let Some(url) = &args.store else {
        return Ok(None);
    };
    let host = match &args.host_name {
        Some(h) => h.clone(),
        None => nephrite_runtime::host::hostname()
            .context("the kernel's host name is unreadable or empty: pass --host-name")?,
    };
    let joined = Fabric::join(url, &host, args.underlay, args.lease_ttl).await?;
    tracing::info!(store = %url, host, underlay = %joined.underlay(), "joined the fabric");
    Ok(Some(joined))
}

/// The pod networks must stay clear of the Service CIDR.
fn check_service_cidr(config: &AgentConfig, service_cidr: Ipv4Cidr) -> anyhow::Result<()> {
    EgressPolicy::new(&config.networks, service_cidr, config.masquerade.clone())?;
    Ok(())
}

/// SIGHUP: re-read the config and apply the difference.
fn reload_on_hangup(
    agent: Arc<Agent>,
    path: PathBuf,
    service_cidr: Ipv4Cidr,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let loaded = AgentConfig::load(&path)
                .map_err(anyhow::Error::from)
                .and_then(|cfg| {
                    check_service_cidr(&cfg, service_cidr)?;
                    Ok(cfg)
                });
            match loaded {
                Ok(cfg) => match agent.reload(&cfg.networks).await {
                    Ok(plan) => {
                        tracing::info!(steps = %plan.summary().lines().count(), "config reloaded")
                    }
                    Err(e) => tracing::error!(error = %e, "reload refused, old networks kept"),
                },
                Err(e) => tracing::error!(error = %e, "reload refused, old networks kept"),
            }
        }
    });
    Ok(())
}

async fn serve(agent: Arc<Agent>, socket: &Path, args: &ServeArgs) -> anyhow::Result<()> {
    if let Some(parent) = socket.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    }
    let server = GrpcServer::from_args_with_roles(
        DaemonIdentity::new("nimbess-agent", env!("CARGO_PKG_VERSION")),
        args,
        crate::auth::roles(),
    )?;
    // The socket is created 0600, never open to others for a moment: the
    // umask is narrowed around the bind (process-wide, and nothing else
    // here needs a wider one).
    let umask = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(SOCKET_UMASK));
    let bound = add_services(server, agent)
        .bind(&Endpoint::unix(socket))
        .await;
    nix::sys::stat::umask(umask);
    let bound = bound?;
    tracing::info!(socket = %socket.display(), "serving");
    let report = bound.run().await?;
    tracing::info!(reason = %report.reason, "stopped");
    Ok(())
}
