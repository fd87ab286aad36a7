//! `kuryr-l7 router`: where the rules come from (a directory, or controllers' rules services
//! with a cache file), the listeners, metrics, and the drain on SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kuryr_l7_client::wire::short;
use kuryr_l7_client::{Followed, Subscription, load_cache};
use nephrite_l7::Options;
use nephrite_runtime::prometheus_client::registry::Registry;
use nephrite_runtime::{BindError, ClientArgs, ClientError, Endpoint, LogFormat, MetricsServer};

use super::balance::Ejection;
use super::{Router, RouterConfig};
use crate::machine::{PemError, hostname, read_certificate};
use crate::source::{Snapshot, SourceError, SourceSpec, snapshot_dir, watch_dir};

/// `kuryr-l7 router` flags.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["source", "rules"])))]
pub struct RouterArgs {
    /// Plain HTTP (HTTP/1.1 and h2c) address.
    #[arg(long, env = "KURYR_L7_LISTEN")]
    pub listen: SocketAddr,
    /// TLS address (termination by SNI, passthrough).
    #[arg(long, env = "KURYR_L7_LISTEN_TLS")]
    pub listen_tls: Option<SocketAddr>,
    /// Where the objects come from: dir:PATH (no controller needed).
    #[arg(long, env = "KURYR_L7_SOURCE")]
    pub source: Option<SourceSpec>,
    /// Follow the rules service of these controllers (comma-separated, failing over in order).
    #[arg(long, env = "KURYR_L7_RULES", value_delimiter = ',')]
    pub rules: Option<Vec<Endpoint>>,
    /// The router's name in acknowledgements (default: HOSTNAME:PORT of --listen).
    #[arg(long, env = "KURYR_L7_ROUTER_NAME")]
    pub name: Option<String>,
    /// Keep the last rules in this file, to serve them after a restart while no controller
    /// answers.
    #[arg(long, env = "KURYR_L7_RULES_CACHE")]
    pub rules_cache: Option<PathBuf>,
    /// With --rules: how long to wait for the first rules before listening anyway.
    #[arg(long, env = "KURYR_L7_RULES_WAIT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub rules_wait: Duration,
    /// PEM CA of the controllers' TLS certificate (https:// rules URLs); the same as --ca.
    #[arg(long, env = "KURYR_L7_RULES_CA", conflicts_with = "client_ca")]
    pub rules_ca: Option<PathBuf>,
    /// The credentials presented to the controllers' rules service (`--ca`, `--cert`/`--key`
    /// for mutual TLS, `--token-file`): with authentication on, the identity they prove must
    /// hold the `router` role and be this router's --name.
    #[command(flatten)]
    pub credentials: ClientArgs,
    /// Our IngressClass (--source).
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    pub ingress_class: String,
    /// The `controllerName` of the GatewayClasses we serve (Gateway API).
    #[arg(long, env = "KURYR_L7_GATEWAY_CONTROLLER", default_value = nephrite_l7::gateway::build::DEFAULT_CONTROLLER_NAME)]
    pub gateway_controller: String,
    /// Worker threads (default: one per core).
    #[arg(long, env = "KURYR_L7_THREADS")]
    pub threads: Option<usize>,
    /// Serve Prometheus metrics on GET /metrics at this address (HOST:PORT or unix:///PATH):
    /// answers by pool and status class, ejections, connections, the table.
    #[arg(long, env = "KURYR_L7_METRICS_LISTEN")]
    pub metrics_listen: Option<Endpoint>,
    /// On SIGTERM or SIGINT: stop accepting, then give requests in flight this long to finish.
    #[arg(
        long,
        env = "NEPHRITE_SHUTDOWN_GRACE",
        default_value = "10s",
        value_parser = humantime::parse_duration,
        value_name = "DURATION"
    )]
    pub shutdown_grace: Duration,
    /// Consecutive failures that eject a member.
    #[arg(long, env = "KURYR_L7_EJECT_AFTER", default_value_t = 3)]
    pub eject_after: u32,
    /// Seconds an ejected member stays out.
    #[arg(long, env = "KURYR_L7_EJECT_SECONDS", default_value_t = 10)]
    pub eject_seconds: u64,
    /// Close a plain-HTTP connection whose request head is not complete this long after its
    /// first byte, or that starts no request this long after the last answer.
    #[arg(long, env = "KURYR_L7_HEAD_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub head_timeout: Duration,
    /// At most this many connections open at once from one client address (both listeners);
    /// more are closed as they are accepted. Default: no limit.
    #[arg(long, env = "KURYR_L7_MAX_CONNECTIONS_PER_CLIENT")]
    pub max_connections_per_client: Option<usize>,
    /// PEM certificate for TLS hosts without their own.
    #[arg(long, env = "KURYR_L7_DEFAULT_CERT", requires = "default_key")]
    pub default_cert: Option<PathBuf>,
    /// PEM key of --default-cert.
    #[arg(long, env = "KURYR_L7_DEFAULT_KEY", requires = "default_cert")]
    pub default_key: Option<PathBuf>,
    /// Log line format.
    #[arg(long, env = "NEPHRITE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// Why the router could not start.
#[derive(Debug, thiserror::Error)]
pub enum RouterStartError {
    /// Neither `--source` nor `--rules`.
    #[error("give --source or --rules")]
    NoRules,
    /// `--source kube` was given.
    #[error(
        "a router does not read Kubernetes itself: run `kuryr-l7 controller --source kube` and give the router --rules URL"
    )]
    KubeSource,
    /// The directory could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A certificate file could not be read.
    #[error(transparent)]
    Pem(#[from] PemError),
    /// The default certificate does not parse.
    #[error("{0}")]
    Certificate(String),
    /// `--rules-ca`, `--ca`, `--cert`, `--key` or `--token-file` cannot be used.
    #[error("the rules service credentials: {0}")]
    Credentials(#[from] ClientError),
    /// A listener could not be bound.
    #[error("binding {flag} {address}: {source}")]
    Bind {
        /// The flag naming the address.
        flag: &'static str,
        /// The address.
        address: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The metrics listener could not be bound.
    #[error("binding --metrics-listen {endpoint}: {source}")]
    Metrics {
        /// The address.
        endpoint: Endpoint,
        /// Why.
        source: BindError,
    },
}

impl RouterArgs {
    /// The runtime `--threads` asks for: one thread runs everything on the current thread, with
    /// no cross-thread wake-ups.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut runtime = match self.threads {
            Some(1) => tokio::runtime::Builder::new_current_thread(),
            Some(threads) => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                builder.worker_threads(threads.max(1));
                builder
            }
            None => tokio::runtime::Builder::new_multi_thread(),
        };
        runtime.enable_all().build()
    }
}

/// A router following `urls`: listens once the first rules are in (or the cache had some), or
/// after `--rules-wait`.
async fn following(
    args: &RouterArgs,
    urls: &[Endpoint],
    config: RouterConfig,
) -> Result<Arc<Router>, RouterStartError> {
    let mut credentials = args.credentials.clone();
    if credentials.ca.is_none() {
        credentials.ca.clone_from(&args.rules_ca);
    }
    // Unreadable or invalid files are said now, not at every reconnection.
    for url in urls {
        credentials.dial_lazy(url)?;
    }
    let subscription = Subscription {
        urls: urls.to_vec(),
        router: args
            .name
            .clone()
            .unwrap_or_else(|| format!("{}:{}", hostname(), args.listen.port())),
        address: args.listen.to_string(),
        credentials,
        cache: args.rules_cache.clone(),
    };
    let cached = args.rules_cache.as_deref().and_then(load_cache);
    if let Some(cached) = &cached {
        tracing::info!(
            "serving cached rules {} until a controller answers",
            short(&cached.version)
        );
    }
    let (sender, mut receiver) = tokio::sync::watch::channel(Arc::new(cached.unwrap_or_default()));
    tokio::spawn(subscription.run(sender));
    if receiver.borrow().version.is_empty() {
        let first = tokio::time::timeout(args.rules_wait, receiver.changed()).await;
        if first.is_err() {
            tracing::error!(
                "no rules service answered within {:?}; listening without rules (404)",
                args.rules_wait
            );
        }
    }
    let table = receiver.borrow_and_update().snapshot.table.clone();
    let router = Router::new(config, table).map_err(RouterStartError::Certificate)?;
    tokio::spawn(
        router
            .clone()
            .follow(receiver, |f: &Arc<Followed>| f.snapshot.table.clone()),
    );
    Ok(router)
}

/// A router serving the directory `dir`, reloaded on every change.
fn from_directory(
    args: &RouterArgs,
    dir: &std::path::Path,
    config: RouterConfig,
) -> Result<Arc<Router>, RouterStartError> {
    let options = Options {
        ingress_class: args.ingress_class.clone(),
        gateway: nephrite_l7::gateway::Settings {
            controller_name: args.gateway_controller.clone(),
            ..nephrite_l7::gateway::Settings::default()
        },
    };
    let snapshot = snapshot_dir(dir, &options)?;
    snapshot.log();
    let router =
        Router::new(config, snapshot.table.clone()).map_err(RouterStartError::Certificate)?;
    let (sender, receiver) = tokio::sync::watch::channel(Arc::new(snapshot));
    tokio::spawn(watch_dir(dir.to_owned(), options, sender));
    tokio::spawn(
        router
            .clone()
            .follow(receiver, |s: &Arc<Snapshot>| s.table.clone()),
    );
    Ok(router)
}

async fn bind(
    flag: &'static str,
    address: SocketAddr,
) -> Result<tokio::net::TcpListener, RouterStartError> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| RouterStartError::Bind {
            flag,
            address: address.to_string(),
            source,
        })
}

/// Runs the router until SIGTERM or SIGINT, then drains.
pub async fn run(args: RouterArgs) -> Result<(), RouterStartError> {
    let config = RouterConfig {
        ejection: Ejection {
            eject_after: args.eject_after.max(1),
            eject_for: Duration::from_secs(args.eject_seconds),
        },
        default_certificate: read_certificate(
            args.default_cert.as_deref(),
            args.default_key.as_deref(),
        )?,
        head_timeout: args.head_timeout,
        max_connections_per_client: args.max_connections_per_client,
    };
    let router = match (&args.source, &args.rules) {
        (Some(SourceSpec::Dir(dir)), _) => from_directory(&args, dir, config)?,
        (Some(SourceSpec::Kube), _) => return Err(RouterStartError::KubeSource),
        (None, Some(urls)) => following(&args, urls, config).await?,
        (None, None) => return Err(RouterStartError::NoRules),
    };

    if let Some(endpoint) = &args.metrics_listen {
        let mut registry = Registry::default();
        router.register_metrics(&mut registry);
        let metrics = MetricsServer::bind(endpoint, registry)
            .await
            .map_err(|source| RouterStartError::Metrics {
                endpoint: endpoint.clone(),
                source,
            })?;
        tokio::spawn(metrics.serve(std::future::pending()));
    }
    let http = bind("--listen", args.listen).await?;
    if let Ok(address) = http.local_addr() {
        tracing::info!("serving HTTP on {address}");
    }
    tokio::spawn(router.clone().serve_http(http));
    if let Some(address) = args.listen_tls {
        let tls = bind("--listen-tls", address).await?;
        if let Ok(address) = tls.local_addr() {
            tracing::info!("serving TLS on {address}");
        }
        tokio::spawn(router.clone().serve_https(tls));
    }
    shutdown_signal().await;
    tracing::info!(
        "draining: no new connections, at most {:?} for requests in flight",
        args.shutdown_grace
    );
    match router.drain(args.shutdown_grace).await {
        0 => tracing::info!("drained"),
        left => tracing::warn!("{left} requests or connections still busy after the grace period"),
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
