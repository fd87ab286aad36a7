//! `nimbess-agent`: serve the CNI API on a Unix socket, or inspect a running agent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use nephrite_proto::nimbess::cni::v1::{self as pb, agent_client::AgentClient};
use nephrite_runtime::{DaemonIdentity, Endpoint, GrpcServer, ServeArgs, dial, init_tracing};
use nimbess_agent::agent::Agent;
use nimbess_agent::config::{AgentConfig, DriverKind};
use nimbess_agent::driver::{Driver, kernel::KernelDriver, sim::SimDriver};
use nimbess_agent::fabric::Fabric;
use nimbess_agent::service::AgentService;
use nimbess_agent::state::StateStore;

/// Default agent socket.
const DEFAULT_SOCKET: &str = "/run/nimbess/agent.sock";

#[derive(Parser)]
#[command(
    name = "nimbess-agent",
    version,
    about = "Per-host CNI agent with per-port pipelines"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
    Dot,
}

// Parsed once per process: the size of the `serve` variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Serve the CNI API on the Unix socket.
    Serve {
        /// The config file (YAML: driver, networks).
        #[arg(long, env = "NIMBESS_CONFIG")]
        config: PathBuf,
        /// Unix socket for the CNI and Agent APIs (mode 0600). The shared `--listen` flag is not used.
        #[arg(long, env = "NIMBESS_SOCKET", default_value = DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Directory of the persistent state (created when missing).
        #[arg(long, env = "NIMBESS_STATE_DIR", default_value = "/var/lib/nimbess")]
        state_dir: PathBuf,
        /// Data plane; overrides the config file's `driver`.
        #[arg(long, env = "NIMBESS_DRIVER", value_enum)]
        driver: Option<DriverKind>,
        #[command(flatten)]
        fabric: FabricArgs,
        #[command(flatten)]
        serve: ServeArgs,
    },
    /// List ports.
    Ports(ClientArgs),
    /// Show port pipelines.
    Pipelines {
        #[command(flatten)]
        client: ClientArgs,
        /// Only this port's pipeline.
        #[arg(long, env = "NIMBESS_PORT")]
        port: Option<String>,
    },
    /// List networks.
    Networks(ClientArgs),
    /// Compare the model with the data plane; exits 1 naming any drift.
    Verify(ClientArgs),
    /// Operate on the fabric's store directly (no agent needed).
    #[command(subcommand)]
    Fabric(FabricCmd),
}

#[derive(Subcommand)]
enum FabricCmd {
    /// Release a host that is gone for good: its address claims (other
    /// hosts hand them out again) and any port records left. Refused while
    /// the host's lease is alive.
    ForgetHost {
        /// The host's name in the fabric.
        name: String,
        /// The fabric's store, `etcd://HOST:PORT[,HOST:PORT]`.
        #[arg(long, env = "NIMBESS_STORE")]
        store: String,
    },
}

/// Multi-host fabric flags.
#[derive(clap::Args)]
struct FabricArgs {
    /// The fabric's store, `etcd://HOST:PORT[,HOST:PORT]`: networks, addresses and every
    /// host's ports are shared there. Without it the state is this host's alone.
    #[arg(long, env = "NIMBESS_STORE")]
    store: Option<String>,
    /// This host's name in the fabric (default: the hostname).
    #[arg(long, env = "NIMBESS_HOST_NAME")]
    host_name: Option<String>,
    /// This host's underlay address, where other hosts send its VXLAN traffic
    /// (default: the address this host reaches the store from).
    #[arg(long, env = "NIMBESS_UNDERLAY")]
    underlay: Option<std::net::Ipv4Addr>,
    /// Seconds this host's ports stay in the fabric after its agent stops
    /// renewing its lease (dies, or loses the store).
    #[arg(long, env = "NIMBESS_LEASE_TTL", default_value_t = 10)]
    lease_ttl: i64,
}

#[derive(clap::Args)]
struct ClientArgs {
    /// The agent's socket.
    #[arg(long, env = "NIMBESS_SOCKET", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Output format.
    #[arg(
        short = 'o',
        long,
        env = "NIMBESS_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    output: Output,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Serve {
            config,
            socket,
            state_dir,
            driver,
            fabric,
            serve,
        } => run_serve(&config, &socket, &state_dir, driver, &fabric, &serve).await,
        Cmd::Ports(c) => {
            let json = client(&c.socket)
                .await?
                .list_ports(pb::ListPortsRequest {})
                .await?
                .into_inner()
                .json;
            print_list(
                &json,
                c.output,
                &["id", "network", "address", "remote.host", "netns"],
            )
        }
        Cmd::Networks(c) => {
            let json = client(&c.socket)
                .await?
                .list_networks(pb::ListNetworksRequest {})
                .await?
                .into_inner()
                .json;
            print_list(
                &json,
                c.output,
                &["spec.name", "spec.subnet", "gateway", "ports"],
            )
        }
        Cmd::Pipelines { client: c, port } => {
            let reply = client(&c.socket)
                .await?
                .get_pipelines(pb::GetPipelinesRequest {
                    port: port.unwrap_or_default(),
                })
                .await?
                .into_inner();
            match c.output {
                Output::Json => println!("{}", reply.json),
                Output::Table => print!("{}", reply.text),
                Output::Dot => print!("{}", reply.dot),
            }
            Ok(())
        }
        Cmd::Fabric(FabricCmd::ForgetHost { name, store }) => {
            let forgotten = nimbess_agent::fabric::forget_host(&store, &name).await?;
            println!(
                "host {name} forgotten: {} address claims released, {} port records removed",
                forgotten.addresses, forgotten.ports
            );
            Ok(())
        }
        Cmd::Verify(c) => {
            let drift = client(&c.socket)
                .await?
                .verify(pb::VerifyRequest {})
                .await?
                .into_inner()
                .drift;
            if drift.is_empty() {
                println!("no drift");
                Ok(())
            } else {
                for d in &drift {
                    println!("{d}");
                }
                std::process::exit(1);
            }
        }
    }
}

async fn client(socket: &Path) -> anyhow::Result<AgentClient<tonic::transport::Channel>> {
    let channel = dial(&Endpoint::unix(socket))
        .await
        .with_context(|| format!("cannot reach the agent at {}", socket.display()))?;
    Ok(AgentClient::new(channel))
}

fn field<'a>(v: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    path.split('.').fold(v, |v, k| &v[k])
}

fn print_list(json: &str, output: Output, columns: &[&str]) -> anyhow::Result<()> {
    if matches!(output, Output::Json | Output::Dot) {
        println!("{json}");
        return Ok(());
    }
    let items: Vec<serde_json::Value> =
        serde_json::from_str(json).context("agent sent invalid JSON")?;
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| {
            columns
                .iter()
                .map(|c| match field(item, c) {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => "-".into(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    let headers: Vec<String> = columns
        .iter()
        .map(|c| c.rsplit('.').next().unwrap_or(c).to_uppercase())
        .collect();
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in std::iter::once(&headers).chain(rows.iter()) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(())
}

async fn run_serve(
    config_path: &Path,
    socket: &Path,
    state_dir: &Path,
    driver_flag: Option<DriverKind>,
    fabric: &FabricArgs,
    serve: &ServeArgs,
) -> anyhow::Result<()> {
    init_tracing(serve.log_format, std::env::var("RUST_LOG").ok().as_deref())?;
    let config = AgentConfig::load(config_path)?;
    let kind = driver_flag.or(config.driver).unwrap_or(DriverKind::Kernel);
    let joined = match &fabric.store {
        Some(url) => {
            let host = match &fabric.host_name {
                Some(h) => h.clone(),
                None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .context("read the hostname (or pass --host-name)")?
                    .trim()
                    .to_string(),
            };
            let joined = Fabric::join(url, &host, fabric.underlay, fabric.lease_ttl).await?;
            tracing::info!(store = %url, host, underlay = %joined.underlay(), "joined the fabric");
            Some(joined)
        }
        None => None,
    };
    let driver = match kind {
        DriverKind::Kernel => {
            let mut kernel = KernelDriver::new()?;
            if let Some(f) = &joined {
                kernel.set_underlay(f.underlay());
            }
            Driver::Kernel(kernel)
        }
        DriverKind::Sim => Driver::Sim(SimDriver::new()),
    };
    let store = StateStore::open(state_dir)?;
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

    // SIGHUP: re-read the config and apply the difference.
    let reloader = Arc::clone(&agent);
    let path = config_path.to_path_buf();
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            match AgentConfig::load(&path) {
                Ok(cfg) => match reloader.reload(&cfg.networks).await {
                    Ok(plan) => {
                        tracing::info!(steps = %plan.summary().lines().count(), "config reloaded")
                    }
                    Err(e) => tracing::error!(error = %e, "reload refused, old networks kept"),
                },
                Err(e) => tracing::error!(error = %e, "reload refused, old networks kept"),
            }
        }
    });

    if let Some(parent) = socket.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    }
    let service = AgentService::new(agent);
    let server = GrpcServer::from_args(
        DaemonIdentity::new("nimbess-agent", env!("CARGO_PKG_VERSION")),
        serve,
    )?
    .add_service(pb::cni_server::CniServer::new(service.clone()))
    .add_service(pb::agent_server::AgentServer::new(service));
    let bound = server.bind(&Endpoint::unix(socket)).await?;
    std::fs::set_permissions(socket, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .with_context(|| format!("chmod 0600 {}", socket.display()))?;
    tracing::info!(socket = %socket.display(), "serving");
    let report = bound.run().await?;
    tracing::info!(reason = %report.reason, "stopped");
    Ok(())
}
