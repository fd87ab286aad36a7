//! `kuryr-l7 controller`: keeps the L7 rules from a source (a directory, or Kubernetes), serves
//! them on the rules service, and drives a data plane (`embedded`: routers follow the rules
//! service; `haproxy`: a local HAProxy is configured and reloaded as well).

use std::sync::Arc;

use nephrite_l7::Options;
use nephrite_runtime::{DaemonIdentity, GrpcServer, ServeArgs, ServeError, ServeReport};
use tokio::sync::watch;

use crate::haproxy::{Haproxy, HaproxyError, HaproxySettings};
use crate::kubernetes::{KubeSettings, KubeSource, KubeSourceError};
use crate::rules_service::{Publisher, RulesService};
use crate::source::{Snapshot, SourceError, SourceSpec, snapshot_dir, watch_dir};

/// The data plane the controller drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Driver {
    /// kuryr-l7 routers follow the rules service.
    Embedded,
    /// A local HAProxy 2.6, configured and reloaded hitlessly (routers may follow as well).
    Haproxy,
    /// OpenStack Octavia L7 policies through Neutron (not available yet: refused).
    #[value(name = "neutron_l7_policy", alias = "octavia")]
    NeutronL7Policy,
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The driver is not available.
    #[error(
        "--driver neutron_l7_policy (OpenStack Octavia) is not available yet; use --driver embedded or --driver haproxy"
    )]
    DriverUnavailable,
    /// The source could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The Kubernetes source could not start.
    #[error(transparent)]
    Kube(#[from] KubeSourceError),
    /// HAProxy could not be started.
    #[error(transparent)]
    Haproxy(#[from] HaproxyError),
    /// `--driver haproxy` without `--haproxy-listen`.
    #[error("--driver haproxy needs --haproxy-listen ADDR")]
    HaproxyListenMissing,
    /// The gRPC server failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Everything `kuryr-l7 controller` is told.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Where the objects come from.
    pub source: SourceSpec,
    /// The data plane.
    pub driver: Driver,
    /// Translation settings.
    pub options: Options,
    /// HAProxy settings (`--driver haproxy`); `None` when not given.
    pub haproxy: Option<HaproxySettings>,
    /// Kubernetes settings (`--source kube`).
    pub kube: KubeSettings,
    /// The shared serving flags.
    pub serve: ServeArgs,
}

/// Feeds every snapshot of `snapshots` to `publisher`.
pub async fn publish_all(publisher: Publisher, mut snapshots: watch::Receiver<Arc<Snapshot>>) {
    loop {
        {
            let snapshot = snapshots.borrow_and_update().clone();
            publisher.publish(&snapshot.translation, &snapshot.read_errors);
        }
        if snapshots.changed().await.is_err() {
            return;
        }
    }
}

/// Runs the controller until SIGTERM/SIGINT (or the server's shutdown handle).
pub async fn run(config: ControllerConfig) -> Result<ServeReport, ControllerError> {
    if config.driver == Driver::NeutronL7Policy {
        return Err(ControllerError::DriverUnavailable);
    }
    if config.driver == Driver::Haproxy && config.haproxy.is_none() {
        return Err(ControllerError::HaproxyListenMissing);
    }
    let identity = DaemonIdentity::new("kuryr-l7-controller", env!("CARGO_PKG_VERSION"));
    let server = GrpcServer::from_args(identity, &config.serve)?;
    let shutdown = server.shutdown_handle();
    let publisher = Publisher::default();

    match &config.source {
        SourceSpec::Dir(dir) => {
            let first = snapshot_dir(dir, &config.options)?;
            first.log();
            publisher.publish(&first.translation, &first.read_errors);
            let (sender, receiver) = watch::channel(Arc::new(first));
            tokio::spawn(watch_dir(dir.clone(), config.options.clone(), sender));
            tokio::spawn(publish_all(publisher.clone(), receiver));
        }
        SourceSpec::Kube => {
            let source = KubeSource::start(
                config.kube.clone(),
                config.options.clone(),
                publisher.clone(),
                shutdown.clone(),
            )
            .await?;
            tokio::spawn(source.run());
        }
    }

    let haproxy = match (config.driver, &config.haproxy) {
        (Driver::Haproxy, Some(settings)) => {
            let haproxy = Haproxy::start(settings.clone(), &publisher.current()).await?;
            tokio::spawn(haproxy.clone().follow(publisher.subscribe()));
            Some(haproxy)
        }
        (Driver::Haproxy, None) => return Err(ControllerError::HaproxyListenMissing),
        _ => None,
    };

    let service = RulesService::new(publisher, shutdown.clone());
    let report = server
        .add_service(service.into_server())
        .serve(&config.serve.listen)
        .await;
    if let Some(haproxy) = haproxy {
        haproxy.stop().await;
    }
    Ok(report?)
}
