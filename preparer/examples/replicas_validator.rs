//! A validation plugin, out of process: serves `nephrite.preparer.plugin.v1.Validator` and
//! refuses a resource whose `spec.replicas` is not a whole number between 1 and the
//! registration's property `maxReplicas` (3 when absent). The preparer calls it on every
//! prepared deployment holding one of its trigger kinds; a refusal keeps the deployment
//! unapproved with these reasons as its error.
//!
//! ```text
//! cargo run -p nephrite-preparer --example replicas_validator -- --listen 127.0.0.1:50062
//! preparer plugin register replicas --type validate --endpoint http://127.0.0.1:50062 \
//!   --trigger example.org/v1/Scaler --property maxReplicas=5
//! ```

use clap::Parser;
use nephrite_krm::{Gvk, Package};
use nephrite_proto::nephrite::preparer::plugin::v1::validator_server::{
    Validator, ValidatorServer,
};
use nephrite_proto::nephrite::preparer::plugin::v1::{ValidateRequest, ValidateResponse};
use nephrite_runtime::{DaemonIdentity, GrpcServer, ServeArgs, init_tracing};
use tonic::{Request, Response, Status};

/// The most replicas allowed when the registration names no `maxReplicas`.
const DEFAULT_MAX: u64 = 3;

#[derive(Parser)]
#[command(name = "replicas-validator")]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
}

struct Replicas;

#[tonic::async_trait]
impl Validator for Replicas {
    async fn validate(
        &self,
        request: Request<ValidateRequest>,
    ) -> Result<Response<ValidateResponse>, Status> {
        let request = request.into_inner();
        let max = match request.properties.get("maxReplicas") {
            None => DEFAULT_MAX,
            Some(text) => text.parse().map_err(|_| {
                Status::invalid_argument(format!("property maxReplicas {text:?} is not a number"))
            })?,
        };
        let package = Package::from_yaml(&request.package_yaml)
            .map_err(|e| Status::invalid_argument(format!("package_yaml: {e}")))?;
        let target = request.target_gvk.unwrap_or_default();
        let gvk = Gvk::new(target.group, target.version, target.kind);
        let Some(object) = package.get(&gvk, &request.target_name) else {
            return Err(Status::invalid_argument(format!(
                "{gvk} {} is not in the package",
                request.target_name
            )));
        };
        let replicas = object.spec().and_then(|spec| spec.get("replicas"));
        let mut reasons = Vec::new();
        match replicas.and_then(|value| value.as_u64()) {
            None => reasons.push(format!(
                "spec.replicas must be a whole number, not {}",
                replicas.map_or("absent".to_owned(), |v| v.to_string())
            )),
            Some(0) => reasons.push("spec.replicas must be at least 1".to_owned()),
            Some(n) if n > max => {
                reasons.push(format!("spec.replicas is {n}, more than the {max} allowed"))
            }
            Some(_) => {}
        }
        Ok(Response::new(ValidateResponse { reasons }))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(
        cli.serve.log_format,
        std::env::var("RUST_LOG").ok().as_deref(),
    )?;
    let identity = DaemonIdentity::new("replicas-validator", env!("CARGO_PKG_VERSION"));
    GrpcServer::from_args(identity, &cli.serve)?
        .add_service(ValidatorServer::new(Replicas))
        .serve(&cli.serve.listen)
        .await?;
    Ok(())
}
