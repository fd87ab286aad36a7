//! `nimbess-agent`: serve the CNI API on a Unix socket ([`nimbess_agent::daemon`]),
//! or inspect a running agent ([`nimbess_agent::cli`]).

use clap::Parser as _;
use nimbess_agent::cli::Cli;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match nimbess_agent::cli::run(Cli::parse().command).await {
        Ok(code) => code,
        Err(e) => nephrite_runtime::report::exit("nimbess-agent", Err(e)),
    }
}
