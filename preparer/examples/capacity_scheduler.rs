//! A scheduling plugin, out of process: serves `nephrite.preparer.plugin.v1.Scheduler` and
//! chooses, among a Placement entry's candidate sites, the `count` (a registration property, 2
//! when absent) with the most capacity: the number in each site's metadata key `capacityKey`
//! (a property, `Site.capacity` when absent). A site without a number there is never chosen;
//! equal capacities keep the candidates' order. Its reason names the sites and their capacity.
//!
//! `--mode fail` answers every call with an error and `--mode stray` chooses a site that is not
//! a candidate (to see what the preparer does with a scheduler that misbehaves).
//!
//! ```text
//! cargo run -p nephrite-preparer --example capacity_scheduler -- --listen 127.0.0.1:50063
//! preparer plugin register capacity --type schedule --endpoint http://127.0.0.1:50063 \
//!   --trigger topology.nephio.org/v1alpha1/Placement --property count=2
//! ```

use clap::{Parser, ValueEnum};
use nephrite_proto::nephrite::preparer::plugin::v1::scheduler_server::{
    Scheduler, SchedulerServer,
};
use nephrite_proto::nephrite::preparer::plugin::v1::{ScheduleRequest, ScheduleResponse};
use nephrite_runtime::{DaemonIdentity, GrpcServer, ServeArgs, init_tracing};
use tonic::{Request, Response, Status};

/// Sites chosen when the registration names no `count`.
const DEFAULT_COUNT: usize = 2;
/// The metadata key read when the registration names no `capacityKey`.
const DEFAULT_KEY: &str = "Site.capacity";

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Choose the sites with the most capacity.
    Choose,
    /// Answer every call with an error.
    Fail,
    /// Choose a site that is not a candidate.
    Stray,
}

#[derive(Parser)]
#[command(name = "capacity-scheduler")]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
    /// How it behaves.
    #[arg(long, value_enum, default_value = "choose")]
    mode: Mode,
}

struct Capacity {
    mode: Mode,
}

#[tonic::async_trait]
impl Scheduler for Capacity {
    async fn schedule(
        &self,
        request: Request<ScheduleRequest>,
    ) -> Result<Response<ScheduleResponse>, Status> {
        let request = request.into_inner();
        match self.mode {
            Mode::Choose => {}
            Mode::Fail => return Err(Status::unavailable("capacity data is not available")),
            Mode::Stray => {
                return Ok(Response::new(ScheduleResponse {
                    site_ids: vec!["nowhere/0".to_owned()],
                    reason: "a site of its own".to_owned(),
                }));
            }
        }
        let count = match request.properties.get("count") {
            None => DEFAULT_COUNT,
            Some(text) => text.parse().map_err(|_| {
                Status::invalid_argument(format!("property count {text:?} is not a number"))
            })?,
        };
        let key = request
            .properties
            .get("capacityKey")
            .map_or(DEFAULT_KEY, String::as_str);
        let mut sized: Vec<(&str, u64)> = request
            .candidates
            .iter()
            .filter_map(|site| {
                let capacity = site.metadata.get(key)?.parse().ok()?;
                Some((site.id.as_str(), capacity))
            })
            .collect();
        // Stable: equal capacities keep the candidates' order.
        sized.sort_by_key(|&(_, capacity)| std::cmp::Reverse(capacity));
        sized.truncate(count);
        let listed: Vec<String> = sized
            .iter()
            .map(|(id, capacity)| format!("{id}={capacity}"))
            .collect();
        let reason = format!(
            "the {} of {} sites with the most {key} ({})",
            sized.len(),
            request.candidates.len(),
            listed.join(", ")
        );
        Ok(Response::new(ScheduleResponse {
            site_ids: sized.iter().map(|(id, _)| (*id).to_owned()).collect(),
            reason,
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
    let identity = DaemonIdentity::new("capacity-scheduler", env!("CARGO_PKG_VERSION"));
    GrpcServer::from_args(identity, &cli.serve)?
        .add_service(SchedulerServer::new(Capacity { mode: cli.mode }))
        .serve(&cli.serve.listen)
        .await?;
    Ok(())
}
