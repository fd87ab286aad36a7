//! `bmm-sim`: the BMM API simulator, and `bmm-sim token` to mint a bearer token for it. The
//! command line is `nephrite_bmm_sim::cli`; this only parses, sets up logging and runs it.

use clap::Parser;
use nephrite_bmm_sim::cli::Cli;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if cli.serves() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    nephrite_runtime::report::exit("bmm-sim", cli.run().await)
}
