//! `kuryr-l7`: the L7 controller, router and `rules` view.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use nephrite_kuryr_l7::controller::{self, ControllerConfig, Driver};
use nephrite_kuryr_l7::haproxy::HaproxySettings;
use nephrite_kuryr_l7::kubernetes::status::StatusSettings;
use nephrite_kuryr_l7::kubernetes::{self, KubeSettings};
use nephrite_kuryr_l7::router::balance::Ejection;
use nephrite_kuryr_l7::router::{Router, RouterConfig};
use nephrite_kuryr_l7::rules::{self, Fetched};
use nephrite_kuryr_l7::source::{Snapshot, SourceSpec, snapshot_dir, watch_dir};
use nephrite_kuryr_l7::subscription::{Followed, Subscription, load_cache};
use nephrite_kuryr_l7::wire::short;
use nephrite_l7::Options;
use nephrite_runtime::prometheus_client::registry::Registry;
use nephrite_runtime::{ClientTls, DialOptions, Endpoint, LogFormat, MetricsServer, ServeArgs};

#[derive(Parser)]
#[command(
    name = "kuryr-l7",
    version,
    about = "Ingress and Route L7 routing on an Octavia-shaped model"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Print the compiled policies, rules and pools, and the conflicts and rejections: of a
    /// directory (--source), or what a controller serves and which version each router
    /// serves (--rules).
    Rules(RulesArgs),
    /// Serve traffic by the rules.
    Router(RouterArgs),
    /// Keep the rules from a source and serve them on the rules service (kuryr.l7.v1).
    Controller(ControllerArgs),
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["source", "rules"])))]
struct RulesArgs {
    /// Where the objects come from: dir:PATH, or kube (listed once).
    #[arg(long, env = "KURYR_L7_SOURCE")]
    source: Option<SourceSpec>,
    /// A controller's rules service (HOST:PORT, tcp://, https://, unix://); the first of a
    /// comma-separated list that answers.
    #[arg(long, env = "KURYR_L7_RULES", value_delimiter = ',')]
    rules: Option<Vec<Endpoint>>,
    /// Our IngressClass.
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    ingress_class: String,
    /// Output format.
    #[arg(
        short,
        long,
        env = "KURYR_L7_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    output: Output,
    /// Log line format.
    #[arg(long, env = "NEPHRITE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["source", "rules"])))]
struct RouterArgs {
    /// Plain HTTP (HTTP/1.1 and h2c) address.
    #[arg(long, env = "KURYR_L7_LISTEN")]
    listen: SocketAddr,
    /// TLS address (termination by SNI, passthrough).
    #[arg(long, env = "KURYR_L7_LISTEN_TLS")]
    listen_tls: Option<SocketAddr>,
    /// Where the objects come from: dir:PATH (no controller needed).
    #[arg(long, env = "KURYR_L7_SOURCE")]
    source: Option<SourceSpec>,
    /// Follow the rules service of these controllers (comma-separated, failing over in order).
    #[arg(long, env = "KURYR_L7_RULES", value_delimiter = ',')]
    rules: Option<Vec<Endpoint>>,
    /// The router's name in acknowledgements (default: HOSTNAME:PORT of --listen).
    #[arg(long, env = "KURYR_L7_ROUTER_NAME")]
    name: Option<String>,
    /// Keep the last rules in this file, to serve them after a restart while no controller
    /// answers.
    #[arg(long, env = "KURYR_L7_RULES_CACHE")]
    rules_cache: Option<PathBuf>,
    /// With --rules: how long to wait for the first rules before listening anyway.
    #[arg(long, env = "KURYR_L7_RULES_WAIT", default_value = "10s", value_parser = humantime::parse_duration)]
    rules_wait: Duration,
    /// PEM CA of the controllers' TLS certificate (https:// rules URLs).
    #[arg(long, env = "KURYR_L7_RULES_CA")]
    rules_ca: Option<PathBuf>,
    /// Our IngressClass (--source).
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    ingress_class: String,
    /// Worker threads (default: one per core).
    #[arg(long, env = "KURYR_L7_THREADS")]
    threads: Option<usize>,
    /// Serve Prometheus metrics on GET /metrics at this address (HOST:PORT or unix:///PATH):
    /// answers by pool and status class, ejections, connections, the table.
    #[arg(long, env = "KURYR_L7_METRICS_LISTEN")]
    metrics_listen: Option<Endpoint>,
    /// On SIGTERM or SIGINT: stop accepting, then give requests in flight this long to finish.
    #[arg(
        long,
        env = "NEPHRITE_SHUTDOWN_GRACE",
        default_value = "10s",
        value_parser = humantime::parse_duration,
        value_name = "DURATION"
    )]
    shutdown_grace: Duration,
    /// Consecutive failures that eject a member.
    #[arg(long, env = "KURYR_L7_EJECT_AFTER", default_value_t = 3)]
    eject_after: u32,
    /// Seconds an ejected member stays out.
    #[arg(long, env = "KURYR_L7_EJECT_SECONDS", default_value_t = 10)]
    eject_seconds: u64,
    /// PEM certificate for TLS hosts without their own.
    #[arg(long, env = "KURYR_L7_DEFAULT_CERT", requires = "default_key")]
    default_cert: Option<PathBuf>,
    /// PEM key of --default-cert.
    #[arg(long, env = "KURYR_L7_DEFAULT_KEY", requires = "default_cert")]
    default_key: Option<PathBuf>,
    /// Log line format.
    #[arg(long, env = "NEPHRITE_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
}

#[derive(clap::Args)]
struct ControllerArgs {
    /// Where the objects come from: dir:PATH or kube.
    #[arg(long, env = "KURYR_L7_SOURCE")]
    source: SourceSpec,
    /// The data plane: embedded (routers follow the rules service), haproxy, or
    /// neutron_l7_policy (OpenStack Octavia, not available yet).
    #[arg(long, env = "KURYR_L7_DRIVER", value_enum, default_value = "embedded")]
    driver: Driver,
    /// Our IngressClass.
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    ingress_class: String,
    /// --driver haproxy: HAProxy's plain HTTP address.
    #[arg(long, env = "KURYR_L7_HAPROXY_LISTEN")]
    haproxy_listen: Option<SocketAddr>,
    /// --driver haproxy: HAProxy's TLS address (termination by SNI with the Ingress and Route
    /// certificates, passthrough Routes).
    #[arg(long, env = "KURYR_L7_HAPROXY_LISTEN_TLS", requires = "haproxy_listen")]
    haproxy_listen_tls: Option<SocketAddr>,
    /// --driver haproxy: PEM certificate HAProxy presents to TLS hosts without their own.
    #[arg(long, env = "KURYR_L7_DEFAULT_CERT", requires = "default_key")]
    default_cert: Option<PathBuf>,
    /// PEM key of --default-cert.
    #[arg(long, env = "KURYR_L7_DEFAULT_KEY", requires = "default_cert")]
    default_key: Option<PathBuf>,
    /// --driver haproxy: directory for HAProxy's configuration, sockets and certificates.
    #[arg(
        long,
        env = "KURYR_L7_HAPROXY_DIR",
        default_value = "/run/kuryr-l7/haproxy"
    )]
    haproxy_dir: PathBuf,
    /// --driver haproxy: the haproxy binary.
    #[arg(long, env = "KURYR_L7_HAPROXY_BIN", default_value = "haproxy")]
    haproxy_bin: PathBuf,
    /// --source kube: namespace of the leader-election Lease.
    #[arg(long, env = "KURYR_L7_LEASE_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// --source kube: name of the leader-election Lease.
    #[arg(
        long,
        env = "KURYR_L7_LEASE_NAME",
        default_value = "kuryr-l7-controller"
    )]
    lease_name: String,
    /// --source kube: this controller's identity in the Lease (default: HOSTNAME-PID).
    #[arg(long, env = "KURYR_L7_IDENTITY")]
    identity: Option<String>,
    /// --source kube: the routers' addresses written to Ingress status.loadBalancer.ingress
    /// (IPs or host names, comma-separated; none leaves Ingress status alone).
    #[arg(long, env = "KURYR_L7_STATUS_ADDRESS", value_delimiter = ',')]
    status_address: Vec<String>,
    /// --source kube: routerName in Route status.
    #[arg(long, env = "KURYR_L7_STATUS_ROUTER_NAME", default_value = "kuryr-l7")]
    router_name: String,
    #[command(flatten)]
    serve: ServeArgs,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = std::env::var("RUST_LOG").ok();
    match cli.command {
        Command::Rules(args) => {
            nephrite_runtime::init_tracing(args.log_format, filter.as_deref())?;
            let text = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(rules_text(args))?;
            // A closed pipe (`| head`) is not an error.
            match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
                Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
                _ => Ok(()),
            }
        }
        Command::Router(args) => {
            nephrite_runtime::init_tracing(args.log_format, filter.as_deref())?;
            // One thread: everything on the current thread, no cross-thread wake-ups.
            let mut runtime = match args.threads {
                Some(1) => tokio::runtime::Builder::new_current_thread(),
                Some(threads) => {
                    let mut builder = tokio::runtime::Builder::new_multi_thread();
                    builder.worker_threads(threads.max(1));
                    builder
                }
                None => tokio::runtime::Builder::new_multi_thread(),
            };
            runtime.enable_all().build()?.block_on(router(args))
        }
        Command::Controller(args) => {
            nephrite_runtime::init_tracing(args.serve.log_format, filter.as_deref())?;
            let default_certificate = read_certificate(&args.default_cert, &args.default_key)?;
            let config = ControllerConfig {
                source: args.source,
                driver: args.driver,
                options: Options {
                    ingress_class: args.ingress_class,
                },
                haproxy: args.haproxy_listen.map(|listen| HaproxySettings {
                    binary: args.haproxy_bin,
                    listen,
                    listen_tls: args.haproxy_listen_tls,
                    dir: args.haproxy_dir,
                    default_certificate,
                }),
                kube: KubeSettings {
                    lease_namespace: args.lease_namespace,
                    lease_name: args.lease_name,
                    identity: args
                        .identity
                        .unwrap_or_else(|| format!("{}-{}", hostname(), std::process::id())),
                    status: StatusSettings {
                        addresses: args.status_address,
                        router_name: args.router_name,
                    },
                },
                serve: args.serve,
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(controller::run(config))?;
            Ok(())
        }
    }
}

async fn rules_text(args: RulesArgs) -> anyhow::Result<String> {
    let fetched = match (args.source, args.rules) {
        (Some(SourceSpec::Dir(dir)), _) => Fetched::local(snapshot_dir(
            &dir,
            &Options {
                ingress_class: args.ingress_class,
            },
        )?),
        (Some(SourceSpec::Kube), _) => Fetched::local(
            kubernetes::snapshot_once(&Options {
                ingress_class: args.ingress_class,
            })
            .await?,
        ),
        (None, Some(urls)) => {
            let mut failures = Vec::new();
            let mut found = None;
            for url in &urls {
                match rules::fetch(url).await {
                    Ok(fetched) => {
                        found = Some(fetched);
                        break;
                    }
                    Err(err) => failures.push(format!("{url}: {err}")),
                }
            }
            found.with_context(|| format!("no rules service answered: {}", failures.join("; ")))?
        }
        (None, None) => anyhow::bail!("give --source or --rules"),
    };
    Ok(match args.output {
        Output::Table => rules::render_fetched_table(&fetched),
        Output::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&rules::render_fetched_json(&fetched))?
        ),
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "router".to_owned())
}

/// The PEM texts of `--default-cert` and `--default-key`.
fn read_certificate(
    cert: &Option<PathBuf>,
    key: &Option<PathBuf>,
) -> anyhow::Result<Option<(String, String)>> {
    Ok(match (cert, key) {
        (Some(cert), Some(key)) => Some((
            std::fs::read_to_string(cert).with_context(|| format!("reading {}", cert.display()))?,
            std::fs::read_to_string(key).with_context(|| format!("reading {}", key.display()))?,
        )),
        _ => None,
    })
}

async fn router(args: RouterArgs) -> anyhow::Result<()> {
    let default_certificate = read_certificate(&args.default_cert, &args.default_key)?;
    let config = RouterConfig {
        ejection: Ejection {
            eject_after: args.eject_after.max(1),
            eject_for: Duration::from_secs(args.eject_seconds),
        },
        default_certificate,
    };
    let router = match (&args.source, &args.rules) {
        (Some(SourceSpec::Dir(dir)), _) => {
            let options = Options {
                ingress_class: args.ingress_class.clone(),
            };
            let snapshot = snapshot_dir(dir, &options)?;
            snapshot.log();
            let router = Router::new(config, snapshot.table.clone()).map_err(anyhow::Error::msg)?;
            let (sender, receiver) = tokio::sync::watch::channel(Arc::new(snapshot));
            tokio::spawn(watch_dir(dir.clone(), options, sender));
            tokio::spawn(
                router
                    .clone()
                    .follow(receiver, |s: &Arc<Snapshot>| s.table.clone()),
            );
            router
        }
        (Some(SourceSpec::Kube), _) => anyhow::bail!(
            "a router does not read Kubernetes itself: run `kuryr-l7 controller --source kube` and give the router --rules URL"
        ),
        (None, Some(urls)) => {
            let mut dial = DialOptions::default();
            if let Some(ca) = &args.rules_ca {
                dial.tls = Some(ClientTls::new().with_ca_file(ca)?);
            }
            let subscription = Subscription {
                urls: urls.clone(),
                router: args
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{}:{}", hostname(), args.listen.port())),
                address: args.listen.to_string(),
                dial,
                cache: args.rules_cache.clone(),
            };
            let cached = args.rules_cache.as_deref().and_then(load_cache);
            if let Some(cached) = &cached {
                tracing::info!(
                    "serving cached rules {} until a controller answers",
                    short(&cached.version)
                );
            }
            let (sender, mut receiver) =
                tokio::sync::watch::channel(Arc::new(cached.unwrap_or_default()));
            tokio::spawn(subscription.run(sender));
            // Listen once the first rules are in (or the cache had some), or after --rules-wait.
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
            let router = Router::new(config, table).map_err(anyhow::Error::msg)?;
            tokio::spawn(
                router
                    .clone()
                    .follow(receiver, |f: &Arc<Followed>| f.snapshot.table.clone()),
            );
            router
        }
        (None, None) => anyhow::bail!("give --source or --rules"),
    };

    if let Some(endpoint) = &args.metrics_listen {
        let mut registry = Registry::default();
        router.register_metrics(&mut registry);
        let metrics = MetricsServer::bind(endpoint, registry)
            .await
            .with_context(|| format!("binding --metrics-listen {endpoint}"))?;
        tokio::spawn(metrics.serve(std::future::pending()));
    }
    let http = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding --listen {}", args.listen))?;
    tracing::info!("serving HTTP on {}", http.local_addr()?);
    tokio::spawn(router.clone().serve_http(http));
    if let Some(address) = args.listen_tls {
        let tls = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding --listen-tls {address}"))?;
        tracing::info!("serving TLS on {}", tls.local_addr()?);
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
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
