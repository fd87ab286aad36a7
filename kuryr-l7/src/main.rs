//! `kuryr-l7`: the L7 router and its `rules` view.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use nephrite_kuryr_l7::router::balance::Ejection;
use nephrite_kuryr_l7::router::{Router, RouterConfig};
use nephrite_kuryr_l7::rules;
use nephrite_kuryr_l7::source::{Snapshot, SourceSpec, snapshot_dir, watch_dir};
use nephrite_l7::Options;
use nephrite_runtime::LogFormat;

#[derive(Parser)]
#[command(
    name = "kuryr-l7",
    version,
    about = "Ingress and Route L7 routing on an Octavia-shaped model"
)]
struct Cli {
    /// Log line format.
    #[arg(
        long,
        global = true,
        env = "NEPHRITE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
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
    /// Print the compiled policies, rules and pools, and the conflicts and rejections.
    Rules {
        /// Where the objects come from: dir:PATH.
        #[arg(long, env = "KURYR_L7_SOURCE")]
        source: SourceSpec,
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
    },
    /// Serve traffic by the rules.
    Router(RouterArgs),
}

#[derive(clap::Args)]
struct RouterArgs {
    /// Plain HTTP (HTTP/1.1 and h2c) address.
    #[arg(long, env = "KURYR_L7_LISTEN")]
    listen: SocketAddr,
    /// TLS address (termination by SNI, passthrough).
    #[arg(long, env = "KURYR_L7_LISTEN_TLS")]
    listen_tls: Option<SocketAddr>,
    /// Where the objects come from: dir:PATH.
    #[arg(long, env = "KURYR_L7_SOURCE")]
    source: SourceSpec,
    /// Our IngressClass.
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    ingress_class: String,
    /// Worker threads (default: one per core).
    #[arg(long, env = "KURYR_L7_THREADS")]
    threads: Option<usize>,
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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    nephrite_runtime::init_tracing(cli.log_format, std::env::var("RUST_LOG").ok().as_deref())?;
    match cli.command {
        Command::Rules {
            source,
            ingress_class,
            output,
        } => {
            let SourceSpec::Dir(dir) = source;
            let snapshot = snapshot_dir(&dir, &Options { ingress_class })?;
            let text = match output {
                Output::Table => rules::render_table(&snapshot),
                Output::Json => format!(
                    "{}\n",
                    serde_json::to_string_pretty(&rules::render_json(&snapshot))?
                ),
            };
            // A closed pipe (`| head`) is not an error.
            match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
                Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
                _ => Ok(()),
            }
        }
        Command::Router(args) => {
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
    }
}

async fn router(args: RouterArgs) -> anyhow::Result<()> {
    let SourceSpec::Dir(dir) = args.source;
    let options = Options {
        ingress_class: args.ingress_class,
    };
    let snapshot = snapshot_dir(&dir, &options)?;
    snapshot.log();
    let default_certificate = match (&args.default_cert, &args.default_key) {
        (Some(cert), Some(key)) => Some((
            std::fs::read_to_string(cert).with_context(|| format!("reading {}", cert.display()))?,
            std::fs::read_to_string(key).with_context(|| format!("reading {}", key.display()))?,
        )),
        _ => None,
    };
    let config = RouterConfig {
        ejection: Ejection {
            eject_after: args.eject_after.max(1),
            eject_for: Duration::from_secs(args.eject_seconds),
        },
        default_certificate,
    };
    let router = Router::new(config, snapshot.table.clone()).map_err(anyhow::Error::msg)?;
    let (sender, receiver) = tokio::sync::watch::channel(Arc::new(snapshot));
    tokio::spawn(watch_dir(dir, options, sender));
    tokio::spawn(
        router
            .clone()
            .follow(receiver, |s: &Arc<Snapshot>| s.table.clone()),
    );

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
    tracing::info!("stopping");
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
