//! `test-apiserver`: the in-memory Kubernetes API server as a process, for developers and
//! demos (`kubectl --server http://127.0.0.1:PORT ...`).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use nephrite_test_apiserver::TestApiServer;

/// In-memory Kubernetes API server (plain HTTP, no authentication).
#[derive(Debug, Parser)]
#[command(name = "test-apiserver", version)]
struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "TEST_APISERVER_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Interval between watch BOOKMARK events, in milliseconds.
    #[arg(
        long,
        env = "TEST_APISERVER_BOOKMARK_INTERVAL_MS",
        default_value_t = 5000
    )]
    bookmark_interval_ms: u64,
    /// Number of watch events kept for resuming watches (older → 410 Expired).
    #[arg(long, env = "TEST_APISERVER_EVENT_HISTORY", default_value_t = 10_000)]
    event_history: usize,
    /// Log format.
    #[arg(long, env = "TEST_APISERVER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => fmt.init(),
        LogFormat::Json => fmt.json().init(),
    }
    let server = TestApiServer::builder()
        .listen(args.listen)
        .bookmark_interval(Duration::from_millis(args.bookmark_interval_ms))
        .event_history(args.event_history)
        .start()
        .await
        .with_context(|| format!("starting the API server on {}", args.listen))?;
    println!("{}", server.url());
    tracing::info!(url = %server.url(), "serving");
    let stop = server.stop_handle();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("stopping");
        stop.stop();
    });
    server.wait().await.context("serving")?;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
