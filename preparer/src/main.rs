//! The `preparer` binary: `preparer serve` runs the daemon; every other subcommand is a client
//! of a running daemon's Data API (`--server`, env `PREPARER_SERVER`).

use clap::Parser;
use nephrite_preparer::cli::{Cli, Command};
use nephrite_preparer::daemon;
use nephrite_runtime::{LogFormat, init_tracing};

/// mimalloc rather than the system allocator: preparing is allocation-heavy (every merge
/// copies resources, every store row is decoded into a package), and mimalloc takes about a
/// third off merges and placements (`preparer/README.md`, "Benchmark"). The library leaves the
/// allocator to whoever embeds it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Serve(serve) => serve.serve.log_format,
        _ => LogFormat::Text,
    };
    let filter = std::env::var("RUST_LOG").ok();
    let default_filter = match &cli.command {
        Command::Serve(_) => None,
        // Log lines would tear the dashboard's screen.
        Command::Dashboard => Some("off"),
        _ => Some("warn"),
    };
    if let Err(err) = init_tracing(format, filter.as_deref().or(default_filter)) {
        eprintln!("error: {err}");
        return std::process::ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Serve(serve) => match daemon::start(&serve, true).await {
            Ok(running) => running.wait().await,
            Err(err) => Err(err),
        },
        _ => nephrite_preparer::cli::run(cli).await,
    };
    nephrite_runtime::report::exit("preparer", result)
}
