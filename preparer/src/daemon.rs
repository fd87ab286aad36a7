//! `preparer serve`: the store, the Data API and the preparation loop in one process. The loop
//! stops with the server on SIGTERM, within the grace period.

use std::sync::Arc;
use std::time::Duration;

use nephrite_runtime::{DaemonIdentity, Endpoint, GrpcServer, ServeArgs, ShutdownHandle};
use tokio::task::JoinHandle;

use crate::api::{Changes, DataService, Watchers};
use crate::plugin_credentials::PluginCredentials;
use crate::preparation::{LoopConfig, PreparationLoop};
use crate::store::{self, Store};

/// `preparer serve` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeCommand {
    /// Shared serving flags (--listen, TLS, metrics, grace, log format).
    #[command(flatten)]
    pub serve: ServeArgs,
    /// The store: sqlite:PATH (created on first start) or postgres://USER@HOST:PORT/DB.
    #[arg(long, env = "PREPARER_STORE", default_value = "sqlite:preparer.db")]
    pub store: String,
    /// Approve prepared deployments whose nephio.org/approve is Default (or absent).
    #[arg(long, env = "PREPARER_AUTO_APPROVE", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_approve: bool,
    /// How often the loop polls (it also wakes on every change), e.g. 3s.
    #[arg(long, env = "PREPARER_INTERVAL", default_value = "3s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Time a plugin gets per call.
    #[arg(long, env = "PREPARER_PLUGIN_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub plugin_timeout: Duration,
    /// Modification lease of the loop (renewed every third of it while preparing).
    #[arg(long, env = "PREPARER_LEASE", default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// First retry delay after a failed preparation (doubles per failure).
    #[arg(long, env = "PREPARER_RETRY_BACKOFF", default_value = "1s", value_parser = humantime::parse_duration)]
    pub retry_backoff: Duration,
    /// Longest retry delay.
    #[arg(long, env = "PREPARER_MAX_BACKOFF", default_value = "60s", value_parser = humantime::parse_duration)]
    pub max_backoff: Duration,
    /// Deployments prepared at once.
    #[arg(long, env = "PREPARER_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    /// Revisions of its package each deployment keeps (its history); a write beyond them
    /// drops the oldest (at least 1).
    #[arg(long, env = "PREPARER_REVISIONS_KEPT", default_value_t = crate::store::DEFAULT_REVISIONS_KEPT)]
    pub revisions_kept: usize,
    /// Serve the web dashboard on this address (HOST:PORT; off when not given), with the
    /// API's TLS.
    #[arg(long, env = "PREPARER_WEB", value_name = "HOST:PORT")]
    pub web: Option<std::net::SocketAddr>,
    /// Credentials presented to plugins (--plugin-ca, --plugin-cert, --plugin-key,
    /// --plugin-token-file).
    #[command(flatten)]
    pub plugin_credentials: PluginCredentials,
}

/// A started daemon.
pub struct RunningDaemon {
    /// Where the Data API is served.
    pub endpoint: Endpoint,
    /// Stops the server and the loop.
    pub shutdown: ShutdownHandle,
    /// The store it serves.
    pub store: Arc<dyn Store>,
    /// Signalled on every write this daemon makes (the loop and watchers wake on it).
    pub changes: Changes,
    /// The web dashboard, when `--web` was given.
    pub web: Option<crate::web::WebDashboard>,
    server: JoinHandle<Result<nephrite_runtime::ServeReport, nephrite_runtime::ServeError>>,
    preparation: JoinHandle<()>,
}

impl RunningDaemon {
    /// Waits for the server and the loop to stop.
    pub async fn wait(self) -> anyhow::Result<()> {
        let report = self.server.await??;
        tracing::info!(reason = %report.reason, "server stopped");
        self.preparation.await?;
        if let Some(web) = self.web {
            web.wait().await;
        }
        Ok(())
    }

    /// Triggers shutdown and waits.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.trigger();
        self.wait().await
    }
}

/// Opens the store, binds the server and starts the loop. `handle_signals`: stop on
/// SIGTERM / SIGINT (the binary) or only through the handle (tests).
pub async fn start(command: &ServeCommand, handle_signals: bool) -> anyhow::Result<RunningDaemon> {
    let store = store::open(&command.store).await?;
    store.keep_revisions(command.revisions_kept);
    let changes = Changes::default();
    let identity = DaemonIdentity::new("preparer", env!("CARGO_PKG_VERSION"));
    let mut server =
        GrpcServer::from_args_with_roles(identity, &command.serve, crate::auth::roles())?;
    let watchers = Watchers::default();
    watchers.register(&mut server)?;
    let api = DataService::new(Arc::clone(&store), changes.clone(), command.auto_approve)
        .with_shutdown(server.shutdown_handle())
        .with_watchers(watchers);
    api.batch_writes().register(&mut server)?;
    let web = match command.web {
        Some(addr) => Some(
            crate::web::start(addr, &command.serve, api.clone(), server.shutdown_handle()).await?,
        ),
        None => None,
    };
    let bound = server
        .handle_signals(handle_signals)
        .add_service(crate::api::server(api))
        .bind(&command.serve.listen)
        .await?;
    let endpoint = bound.local_endpoint().clone();
    let shutdown = bound.shutdown_handle();
    let config = LoopConfig {
        auto_approve: command.auto_approve,
        interval: command.interval,
        plugin_timeout: command.plugin_timeout,
        lease: command.lease,
        backoff: command.retry_backoff,
        max_backoff: command.max_backoff,
        concurrency: command.concurrency,
        data_endpoint: endpoint.to_string(),
        plugin_credentials: command.plugin_credentials.client_args(),
    };
    let preparation = tokio::spawn(
        PreparationLoop::new(Arc::clone(&store), changes.clone(), config).run(shutdown.clone()),
    );
    let server = tokio::spawn(bound.run());
    tracing::info!(%endpoint, store = store.backend(), "preparer serving");
    Ok(RunningDaemon {
        endpoint,
        shutdown,
        store,
        changes,
        web,
        server,
        preparation,
    })
}
