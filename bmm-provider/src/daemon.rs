//! `bmm-provider serve` and `bmm-provider ccm` as a library: the controllers of a [`Role`] behind the shared daemon server of
//! `nephrite_runtime` (gRPC health, reflection, `GetInfo`, `/metrics` with
//! [`ProviderMetrics`](crate::metrics::ProviderMetrics), TLS, the SIGTERM drain), optionally
//! acting only while holding a Lease.

use nephrite_runtime::leader::{LeaderElection, LeaseLock, LeaseTiming};
use nephrite_runtime::{BoundServer, ServeError, ServeReport};

use crate::controller::{ControllerConfig, Role, run_role, run_while_leading};

/// Runs the controllers (while leading, when `election` is given) until the server shuts down
/// (SIGTERM, SIGINT or its `ShutdownHandle`); then steps down from the Lease. Register
/// `config.metrics` with the server before binding it so `/metrics` shows them.
pub async fn serve(
    server: BoundServer,
    client: kube::Client,
    config: ControllerConfig,
    role: Role,
    election: Option<(LeaseLock, LeaseTiming)>,
) -> Result<ServeReport, ServeError> {
    let shutdown = server.shutdown_handle();
    let election =
        election.map(|(lock, timing)| LeaderElection::start(client.clone(), lock, timing));
    let changes = election.as_ref().map(LeaderElection::changes);
    let controllers = async move {
        match changes {
            Some(leading) => run_while_leading(client, config, role, leading).await,
            None => run_role(client, config, role).await,
        }
    };
    let running = server.run();
    tokio::pin!(running);
    let report = tokio::select! {
        report = &mut running => report,
        _ = controllers => {
            tracing::warn!("the controllers stopped; shutting down");
            shutdown.trigger();
            running.await
        }
    };
    if let Some(election) = election {
        election.step_down().await;
    }
    report
}
