//! `test-apiserver`: the in-memory Kubernetes API server as a process, for developers and
//! demos (`kubectl --server http://127.0.0.1:PORT ...`).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use nephrite_runtime::{LogFormat, ShutdownHandle, init_tracing};
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

#[tokio::main]
async fn main() -> std::process::ExitCode {
    nephrite_runtime::report::exit("test-apiserver", run().await)
}

async fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(args.log_format, std::env::var("RUST_LOG").ok().as_deref())
        .context("setting up logging from RUST_LOG")?;
    let server = TestApiServer::builder()
        .listen(args.listen)
        .bookmark_interval(Duration::from_millis(args.bookmark_interval_ms))
        .event_history(args.event_history)
        .start()
        .await
        .with_context(|| format!("starting the API server on {}", args.listen))?;
    println!("{}", server.url());
    tracing::info!(url = %server.url(), "serving");
    // SIGTERM and SIGINT stop the server the same way every Nephrite daemon stops.
    let shutdown = ShutdownHandle::new();
    shutdown
        .listen_for_signals()
        .context("installing the SIGTERM/SIGINT handlers")?;
    let stop = server.stop_handle();
    tokio::spawn(async move {
        let reason = shutdown.triggered().await;
        tracing::info!(%reason, "stopping");
        stop.stop();
    });
    server.wait().await.context("serving")?;
    Ok(())
}
