//! A preparation plugin, out of process: serves `nephrite.preparer.plugin.v1.Preparer` and prepares a
//! resource by recording who prepared it in its `status` (`preparedBy`, plus the deployment id).
//!
//! ```text
//! cargo run -p nephrite-preparer --example annotate_plugin -- --listen 127.0.0.1:50061
//! preparer plugin register annotate --endpoint http://127.0.0.1:50061 --trigger example.org/v1/Tuning
//! ```
//!
//! `--mode crash | hang | garbage` make it misbehave (the preparer's tests use these: the
//! deployment stays unprepared with the error recorded, other deployments carry on).

use clap::{Parser, ValueEnum};
use nephrite_krm::{Gvk, Package};
use nephrite_proto::nephrite::preparer::plugin::v1::preparer_server::{Preparer, PreparerServer};
use nephrite_proto::nephrite::preparer::plugin::v1::{PrepareRequest, PrepareResponse};
use nephrite_runtime::{DaemonIdentity, GrpcServer, ServeArgs, init_tracing};
use tonic::{Request, Response, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Prepare the resource.
    Annotate,
    /// Exit the process on the first call.
    Crash,
    /// Never answer.
    Hang,
    /// Answer with something that is not a package.
    Garbage,
}

#[derive(Parser)]
#[command(name = "annotate-plugin")]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
    /// How to behave.
    #[arg(long, env = "ANNOTATE_PLUGIN_MODE", value_enum, default_value_t = Mode::Annotate)]
    mode: Mode,
}

struct Annotate {
    mode: Mode,
}

#[tonic::async_trait]
impl Preparer for Annotate {
    async fn prepare(
        &self,
        request: Request<PrepareRequest>,
    ) -> Result<Response<PrepareResponse>, Status> {
        let request = request.into_inner();
        match self.mode {
            Mode::Crash => std::process::exit(3),
            Mode::Hang => std::future::pending::<()>().await,
            Mode::Garbage => {
                return Ok(Response::new(PrepareResponse {
                    prepared: true,
                    package_yaml: "{{{ this is not a package".into(),
                    error: String::new(),
                }));
            }
            Mode::Annotate => {}
        }
        let mut package = Package::from_yaml(&request.package_yaml)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let target = request.target_gvk.unwrap_or_default();
        let gvk = Gvk::new(target.group, target.version, target.kind);
        let Some(object) = package.get_mut(&gvk, &request.target_name) else {
            return Ok(Response::new(PrepareResponse {
                prepared: false,
                package_yaml: String::new(),
                error: format!("{} {} is not in the package", gvk, request.target_name),
            }));
        };
        let status = object
            .status_mut()
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        status.insert("preparedBy".into(), "annotate-plugin".into());
        status.insert("deploymentId".into(), request.deployment_id.into());
        Ok(Response::new(PrepareResponse {
            prepared: true,
            package_yaml: package.to_yaml(),
            error: String::new(),
        }))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(
        cli.serve.log_format,
        std::env::var("RUST_LOG").ok().as_deref(),
    )?;
    let identity = DaemonIdentity::new("annotate-plugin", env!("CARGO_PKG_VERSION"));
    GrpcServer::from_args(identity, &cli.serve)?
        .add_service(PreparerServer::new(Annotate { mode: cli.mode }))
        .serve(&cli.serve.listen)
        .await?;
    Ok(())
}
