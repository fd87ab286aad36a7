//! The `bmm-sim` command line: the serving flags (each also a `BMM_SIM_*` environment variable)
//! turned into a [`SimConfig`] and a listener, and `bmm-sim token`, so that the binary only
//! parses, sets up logging and runs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::{Sim, SimConfig, auth, server_config};

/// The `bmm-sim` command line.
#[derive(Parser)]
#[command(
    name = "bmm-sim",
    version,
    about = "A simulator of the NVIDIA BMM REST API",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// `token`, or none to serve.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// How to serve.
    #[command(flatten)]
    pub serve: ServeFlags,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
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

/// How the simulator serves and behaves.
#[derive(Args)]
pub struct ServeFlags {
    /// Address to listen on.
    #[arg(long, env = "BMM_SIM_LISTEN", default_value = "127.0.0.1:8099")]
    pub listen: SocketAddr,
    /// HS256 secret of the bearer tokens (a random one, printed at start, when absent).
    #[arg(long, env = "BMM_SIM_JWT_SECRET")]
    pub jwt_secret: Option<String>,
    /// Time for an instance to become Ready (`60s`, `500ms`).
    #[arg(long, env = "BMM_SIM_PROVISION_DELAY", default_value = "5s", value_parser = humantime::parse_duration)]
    pub provision_delay: Duration,
    /// Time for a network object to become Ready.
    #[arg(long, env = "BMM_SIM_NETWORK_DELAY", default_value = "1s", value_parser = humantime::parse_duration)]
    pub network_delay: Duration,
    /// Time an instance stays `Rebooting` after a reboot, a power cycle or a power-on.
    #[arg(long, env = "BMM_SIM_REBOOT_DELAY", default_value = "2s", value_parser = humantime::parse_duration)]
    pub reboot_delay: Duration,
    /// Probability (0–1) that a request gets an injected 429/502/503/504.
    #[arg(long, env = "BMM_SIM_FAULT_RATE", default_value_t = 0.0)]
    pub fault_rate: f64,
    /// Probability (0–1) that a processed create answers 503 anyway.
    #[arg(long, env = "BMM_SIM_LOST_RESPONSE_RATE", default_value_t = 0.0)]
    pub lost_response_rate: f64,
    /// Latency added to every request.
    #[arg(long, env = "BMM_SIM_LATENCY", default_value = "0s", value_parser = humantime::parse_duration)]
    pub latency: Duration,
    /// Machines of the simulated instance type.
    #[arg(long, env = "BMM_SIM_MACHINES", default_value_t = 64)]
    pub machines: usize,
    /// Send `Retry-After` (this long, whole seconds) with injected 429s and 503s.
    #[arg(long, env = "BMM_SIM_RETRY_AFTER", value_parser = humantime::parse_duration)]
    pub retry_after: Option<Duration>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, env = "BMM_SIM_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "BMM_SIM_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl Cli {
    /// Whether this command runs the simulator (rather than printing a token).
    pub fn serves(&self) -> bool {
        self.command.is_none()
    }

    /// Prints the token asked for, or serves until SIGTERM or SIGINT.
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Some(Command::Token { secret, org, ttl }) => {
                let now = jiff::Timestamp::now().as_second().max(0) as u64;
                println!("{}", auth::issue(&secret, &org, now, ttl)?);
                Ok(())
            }
            None => self.serve.run().await,
        }
    }
}

impl ServeFlags {
    /// The simulator's configuration; refused when a rate is not between 0 and 1. Without
    /// `--jwt-secret` a random secret is made and printed.
    pub fn config(&self) -> anyhow::Result<SimConfig> {
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.fault_rate),
            "--fault-rate must be between 0 and 1"
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.lost_response_rate),
            "--lost-response-rate must be between 0 and 1"
        );
        let jwt_secret = match &self.jwt_secret {
            Some(secret) => secret.clone(),
            None => {
                let secret = auth::random_secret();
                println!("bmm-sim JWT secret (no --jwt-secret given): {secret}");
                secret
            }
        };
        Ok(SimConfig {
            jwt_secret,
            provision_delay: self.provision_delay,
            network_delay: self.network_delay,
            reboot_delay: self.reboot_delay,
            fault_rate: self.fault_rate,
            lost_response_rate: self.lost_response_rate,
            latency: self.latency,
            machines: self.machines,
            retry_after: self.retry_after,
        })
    }

    /// Serves on `--listen` (HTTPS with `--tls-cert`) until SIGTERM or SIGINT.
    pub async fn run(self) -> anyhow::Result<()> {
        let sim = Sim::new(self.config()?);
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(server_config(cert, key)?),
            _ => None,
        };
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .with_context(|| format!("binding {}", self.listen))?;
        eprintln!(
            "bmm-sim listening on {}://{} (site {}, instance type {})",
            if tls.is_some() { "https" } else { "http" },
            listener.local_addr()?,
            sim.site_id(),
            sim.instance_type_id()
        );
        let stop = stop_signal()?;
        match tls {
            Some(tls) => sim.serve_tls(listener, tls, stop).await?,
            None => sim.serve(listener, stop).await?,
        }
        Ok(())
    }
}

/// Resolves at the first SIGTERM or SIGINT.
fn stop_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    })
}
