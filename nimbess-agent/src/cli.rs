//! The `nimbess-agent` command line: `serve` runs the daemon
//! ([`crate::daemon`]); `ports`, `networks`, `pipelines` and `verify` ask a
//! running agent over its socket (with `--token-file`, or `--ca`, `--cert`
//! and `--key`, when the agent requires credentials), as does `explain`
//! ([`crate::explain`]); `fabric forget-host`
//! edits the fabric's store directly; `teardown` takes this network
//! namespace's kernel data plane down ([`crate::teardown`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use nimbess_client::InspectClient;

use crate::daemon::{DEFAULT_SOCKET, ServeCommand};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "nimbess-agent",
    version,
    about = "Per-host CNI agent with per-port pipelines"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Cmd,
}

/// How the inspection subcommands print.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    /// Aligned columns (pipelines: text).
    Table,
    /// The agent's JSON.
    Json,
    /// Graphviz DOT (pipelines; the others print JSON).
    Dot,
}

/// The subcommands.
// Parsed once per process: the size of the `serve` variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Serve the CNI API on the Unix socket.
    Serve(ServeCommand),
    /// List ports.
    Ports(ClientArgs),
    /// Show port pipelines.
    Pipelines {
        /// The agent and the output format.
        #[command(flatten)]
        client: ClientArgs,
        /// Only this port's pipeline.
        #[arg(long, env = "NIMBESS_PORT")]
        port: Option<String>,
    },
    /// List networks.
    Networks(ClientArgs),
    /// Compare the model with the data plane; exits 1 naming any drift.
    Verify(ClientArgs),
    /// Why SRC can or cannot reach DST: the verdict and the rule deciding
    /// it, from the running agent's model; `--live` checks the kernel's
    /// rules too (exit 1 when they disagree).
    Explain(crate::explain::ExplainArgs),
    /// Operate on the fabric's store directly (no agent needed).
    #[command(subcommand)]
    Fabric(FabricCmd),
    /// Remove every bridge, veth, VXLAN device, route, rule and nftables table
    /// the kernel driver made in this network namespace, and nothing else.
    /// Refused while an agent answers on `--socket`.
    Teardown(TeardownArgs),
}

/// `teardown` flags.
#[derive(Debug, clap::Args)]
pub struct TeardownArgs {
    /// The socket of this host's agent, which must not be serving.
    #[arg(long, env = "NIMBESS_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Tear down even when an agent answers on the socket (it would render
    /// its data plane again on its next change).
    #[arg(long)]
    pub force: bool,
    /// Output: `table` (one line per object removed) or `json`.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

/// `fabric` subcommands.
#[derive(Debug, Subcommand)]
pub enum FabricCmd {
    /// Release a host that is gone for good: its address claims (other
    /// hosts hand them out again) and any port records left. Refused while
    /// the host's lease is alive.
    ForgetHost {
        /// The host's name in the fabric.
        name: String,
        /// The fabric's store, `etcd://HOST:PORT[,HOST:PORT]`.
        #[arg(long, env = "NIMBESS_STORE")]
        store: String,
    },
}

/// Flags of the inspection subcommands.
#[derive(Debug, clap::Args)]
// No argument group of its own: the runtime's `ClientArgs` flattened in has one of that name.
#[group(skip)]
pub struct ClientArgs {
    /// The agent's socket.
    #[arg(long, env = "NIMBESS_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Credentials for an agent that requires them (`--token-file`, or `--ca`, `--cert` and
    /// `--key`).
    #[command(flatten)]
    pub credentials: nephrite_runtime::ClientArgs,
    /// Output format.
    #[arg(
        short = 'o',
        long,
        env = "NIMBESS_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    pub output: Output,
}

/// Run a subcommand other than `serve`.
///
/// # Errors
/// The agent or the store could not be reached, or answered nonsense.
pub async fn run(command: Cmd) -> anyhow::Result<ExitCode> {
    match command {
        Cmd::Serve(serve) => {
            crate::daemon::run(&serve).await?;
        }
        Cmd::Ports(c) => {
            let json = InspectClient::connect(&c.socket, &c.credentials)
                .await?
                .ports()
                .await?;
            print_list(
                &json,
                c.output,
                &["id", "network", "address", "remote.host", "netns"],
            )?;
        }
        Cmd::Networks(c) => {
            let json = InspectClient::connect(&c.socket, &c.credentials)
                .await?
                .networks()
                .await?;
            print_list(
                &json,
                c.output,
                &["spec.name", "spec.subnet", "gateway", "ports"],
            )?;
        }
        Cmd::Pipelines { client: c, port } => {
            let pipelines = InspectClient::connect(&c.socket, &c.credentials)
                .await?
                .pipelines(port)
                .await?;
            match c.output {
                Output::Json => println!("{}", pipelines.json),
                Output::Table => print!("{}", pipelines.text),
                Output::Dot => print!("{}", pipelines.dot),
            }
        }
        Cmd::Fabric(FabricCmd::ForgetHost { name, store }) => {
            let forgotten = crate::fabric::forget_host(&store, &name).await?;
            println!(
                "host {name} forgotten: {} address claims released, {} port records removed",
                forgotten.addresses, forgotten.ports
            );
        }
        Cmd::Teardown(args) => teardown(&args).await?,
        Cmd::Explain(args) => return crate::explain::run(&args).await,
        Cmd::Verify(c) => {
            let drift = InspectClient::connect(&c.socket, &c.credentials)
                .await?
                .verify()
                .await?;
            if drift.is_empty() {
                println!("no drift");
            } else {
                for d in &drift {
                    println!("{d}");
                }
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `teardown`: refused while an agent serves on the socket, unless forced.
async fn teardown(args: &TeardownArgs) -> anyhow::Result<()> {
    if !args.force && std::os::unix::net::UnixStream::connect(&args.socket).is_ok() {
        anyhow::bail!(
            "an agent is serving on {}: stop it first (or serve with --teardown-on-exit), \
             or pass --force",
            args.socket.display()
        );
    }
    let removed = crate::teardown::teardown()
        .await
        .context("teardown of the kernel data plane")?;
    match args.output {
        Output::Json | Output::Dot => println!("{}", serde_json::to_string(&removed)?),
        Output::Table => {
            for r in &removed {
                println!("removed {r}");
            }
            println!("{} objects of Nimbess removed", removed.len());
        }
    }
    Ok(())
}

fn field<'a>(v: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    path.split('.').fold(v, |v, k| &v[k])
}

fn print_list(json: &str, output: Output, columns: &[&str]) -> anyhow::Result<()> {
    if matches!(output, Output::Json | Output::Dot) {
        println!("{json}");
        return Ok(());
    }
    let items: Vec<serde_json::Value> =
        serde_json::from_str(json).context("agent sent invalid JSON")?;
    let headers = columns
        .iter()
        .map(|c| c.rsplit('.').next().unwrap_or(c).to_uppercase());
    let mut table = nephrite_runtime::table::Table::new(headers);
    for item in &items {
        table.row(columns.iter().map(|c| match field(item, c) {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "-".into(),
            other => other.to_string(),
        }));
    }
    print!("{table}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        // clap's own checks (unique argument and group names, valid requirements), which
        // would otherwise first fail when a subcommand is run.
        <Cli as clap::CommandFactory>::command().debug_assert();
        let cli = Cli::try_parse_from([
            "nimbess-agent",
            "ports",
            "--socket",
            "/run/a.sock",
            "--token-file",
            "/etc/t",
        ])
        .expect("parses");
        let Cmd::Ports(args) = cli.command else {
            panic!("not ports: {cli:?}");
        };
        assert_eq!(args.credentials.token_file, Some(PathBuf::from("/etc/t")));
    }
}
