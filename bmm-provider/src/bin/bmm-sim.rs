//! `bmm-sim`: the BMM API simulator, and `bmm-sim token` to mint a bearer token for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use nephrite_bmm_provider::sim::{Sim, SimConfig, auth};

#[derive(Parser)]
#[command(
    name = "bmm-sim",
    version,
    about = "A simulator of the NVIDIA BMM REST API",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeFlags,
}

#[derive(Subcommand)]
enum Command {
    /// Print a bearer token (HS256) for an org, nothing else.
    Token {
        /// The simulator's JWT secret.
        #[arg(long, env = "BMM_SIM_JWT_SECRET")]
        secret: String,
        /// The org the token is for.
        #[arg(long, env = "BMM_SIM_ORG")]
        org: String,
        /// How long the token is valid (`1h`, `30m`).
        #[arg(long, env = "BMM_SIM_TOKEN_TTL", default_value = "24h", value_parser = humantime::parse_duration)]
        ttl: Duration,
    },
}

#[derive(Args)]
struct ServeFlags {
    /// Address to listen on.
    #[arg(long, env = "BMM_SIM_LISTEN", default_value = "127.0.0.1:8099")]
    listen: SocketAddr,
    /// HS256 secret of the bearer tokens.
    /// HS256 secret of the bearer tokens (a random one, printed at start, when absent).
    #[arg(long, env = "BMM_SIM_JWT_SECRET")]
    jwt_secret: Option<String>,
    /// Time for an instance to become Ready (`60s`, `500ms`).
    #[arg(long, env = "BMM_SIM_PROVISION_DELAY", default_value = "5s", value_parser = humantime::parse_duration)]
    provision_delay: Duration,
    /// Time for a network object to become Ready.
    #[arg(long, env = "BMM_SIM_NETWORK_DELAY", default_value = "1s", value_parser = humantime::parse_duration)]
    network_delay: Duration,
    /// Time an instance stays `Rebooting` after a reboot, a power cycle or a power-on.
    #[arg(long, env = "BMM_SIM_REBOOT_DELAY", default_value = "2s", value_parser = humantime::parse_duration)]
    reboot_delay: Duration,
    /// Probability (0–1) that a request gets an injected 429/502/503/504.
    #[arg(long, env = "BMM_SIM_FAULT_RATE", default_value_t = 0.0)]
    fault_rate: f64,
    /// Probability (0–1) that a processed create answers 503 anyway.
    #[arg(long, env = "BMM_SIM_LOST_RESPONSE_RATE", default_value_t = 0.0)]
    lost_response_rate: f64,
    /// Latency added to every request.
    #[arg(long, env = "BMM_SIM_LATENCY", default_value = "0s", value_parser = humantime::parse_duration)]
    latency: Duration,
    /// Machines of the simulated instance type.
    #[arg(long, env = "BMM_SIM_MACHINES", default_value_t = 64)]
    machines: usize,
    /// Send `Retry-After` (this long, whole seconds) with injected 429s and 503s.
    #[arg(long, env = "BMM_SIM_RETRY_AFTER", value_parser = humantime::parse_duration)]
    retry_after: Option<Duration>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "BMM_SIM_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "BMM_SIM_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    nephrite_runtime::report::exit("bmm-sim", run().await)
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Token { secret, org, ttl }) = cli.command {
        let now = jiff::Timestamp::now().as_second().max(0) as u64;
        println!("{}", auth::issue(&secret, &org, now, ttl)?);
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let f = cli.serve;
    anyhow::ensure!(
        (0.0..=1.0).contains(&f.fault_rate),
        "--fault-rate must be between 0 and 1"
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&f.lost_response_rate),
        "--lost-response-rate must be between 0 and 1"
    );
    let jwt_secret = match f.jwt_secret {
        Some(secret) => secret,
        None => {
            let secret = nephrite_bmm_provider::sim::auth::random_secret();
            println!("bmm-sim JWT secret (no --jwt-secret given): {secret}");
            secret
        }
    };
    let sim = Sim::new(SimConfig {
        jwt_secret,
        provision_delay: f.provision_delay,
        network_delay: f.network_delay,
        reboot_delay: f.reboot_delay,
        fault_rate: f.fault_rate,
        lost_response_rate: f.lost_response_rate,
        latency: f.latency,
        machines: f.machines,
        retry_after: f.retry_after,
    });
    let tls = match (&f.tls_cert, &f.tls_key) {
        (Some(cert), Some(key)) => Some(nephrite_bmm_provider::sim::server_config(cert, key)?),
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(f.listen)
        .await
        .with_context(|| format!("binding {}", f.listen))?;
    eprintln!(
        "bmm-sim listening on {}://{} (site {}, instance type {})",
        if tls.is_some() { "https" } else { "http" },
        listener.local_addr()?,
        sim.site_id(),
        sim.instance_type_id()
    );
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match tls {
        Some(tls) => sim.serve_tls(listener, tls, interrupted).await?,
        None => sim.serve(listener, interrupted).await?,
    }
    Ok(())
}
