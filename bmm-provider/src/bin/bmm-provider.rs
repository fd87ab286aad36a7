//! `bmm-provider`: the Cluster API provider for NVIDIA BMM, its cloud-controller-manager, its
//! OpenShift Machine API controller and its standalone mode. Each subcommand is a module of
//! `nephrite_bmm_provider::cli`; this only parses, sets up logging and runs it.

use std::process::ExitCode;

use clap::Parser;
use nephrite_bmm_provider::cli::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let (format, default_filter) = cli.command.logging();
    let filter = std::env::var("RUST_LOG").ok();
    if let Err(e) = nephrite_runtime::init_tracing(format, filter.as_deref().or(default_filter)) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    nephrite_runtime::report::exit("bmm-provider", cli.command.run().await)
}
