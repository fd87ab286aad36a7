//! `kuryr-l7`: the L7 controller, router and `rules` view. Parses the command line and hands
//! it to the library's `controller`, `router::daemon` or `rules`.

use clap::{Parser, Subcommand};
use nephrite_kuryr_l7::controller::{self, ControllerArgs};
use nephrite_kuryr_l7::router::daemon::{self, RouterArgs};
use nephrite_kuryr_l7::rules::{self, RulesArgs};
use nephrite_kuryr_l7::vif::{self, VifHandlerArgs};

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
    /// Allocate, record, activate and release pods' VIFs (Kuryr's VIF handler).
    VifHandler(VifHandlerArgs),
}

fn main() -> std::process::ExitCode {
    nephrite_runtime::report::exit("kuryr-l7", run())
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = std::env::var("RUST_LOG").ok();
    match cli.command {
        Command::Rules(args) => {
            nephrite_runtime::init_tracing(args.log_format, filter.as_deref())?;
            let text = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(rules::text(args))?;
            // A closed pipe (`| head`) is not an error.
            match std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()) {
                Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
                _ => Ok(()),
            }
        }
        Command::Router(args) => {
            nephrite_runtime::init_tracing(args.log_format, filter.as_deref())?;
            args.runtime()?.block_on(daemon::run(args))?;
            Ok(())
        }
        Command::Controller(args) => {
            nephrite_runtime::init_tracing(args.serve.log_format, filter.as_deref())?;
            let config = args.into_config()?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(controller::run(config))?;
            Ok(())
        }
        Command::VifHandler(args) => {
            nephrite_runtime::init_tracing(args.log_format, filter.as_deref())?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(vif::run(args))?;
            Ok(())
        }
    }
}
