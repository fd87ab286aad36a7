//! The smallest Nephrite daemon: health, reflection, `GetInfo` and, with
//! `--metrics-listen`, `/metrics`; drains on SIGTERM.
//!
//! ```text
//! cargo run -p nephrite-runtime --example hello_daemon -- --listen 127.0.0.1:50051 \
//!     --metrics-listen 127.0.0.1:9090
//! grpcurl -plaintext 127.0.0.1:50051 nephrite.daemon.v1.Daemon/GetInfo
//! ```

use clap::Parser;
use nephrite_runtime::prometheus_client::metrics::counter::Counter;
use nephrite_runtime::{DaemonIdentity, GrpcServer, ServeArgs, init_tracing};

/// Command line: the shared serving flags plus whatever the daemon needs.
#[derive(Parser)]
#[command(name = "hello-daemon", version)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(
        cli.serve.log_format,
        std::env::var("RUST_LOG").ok().as_deref(),
    )?;

    let identity = DaemonIdentity::new("hello-daemon", env!("CARGO_PKG_VERSION"));
    let mut server = GrpcServer::from_args(identity, &cli.serve)?;
    // A daemon's own metric, served next to the gRPC ones.
    let greetings = Counter::<u64>::default();
    server.register_metric("hello_greetings", "Greetings sent", greetings.clone())?;
    // Real daemons add their services here: `.add_service(FooServer::new(foo))`.

    let report = server.serve(&cli.serve.listen).await?;
    tracing::info!(reason = %report.reason, "bye");
    Ok(())
}
