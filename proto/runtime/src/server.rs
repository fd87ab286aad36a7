//! The gRPC server every daemon runs: its services plus health, reflection,
//! daemon info, request telemetry, authentication and call limits, optional TLS,
//! `/metrics`, and graceful shutdown with a grace period.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt as _;
use nephrite_proto::daemon_v1::daemon_server::DaemonServer;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{oneshot, watch};
use tonic::body::Body as TonicBody;
use tonic::server::NamedService;
use tonic::service::RoutesBuilder;
use tonic::transport::server::{Connected, TcpIncoming};
use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};
use tower::Service;

use crate::args::ServeArgs;
use crate::auth::layer::{AuthConfig, AuthLayer};
use crate::auth::{AuthPolicy, PolicyError, TokenError, TokenFile};
use crate::call_limits::{CallLimitsLayer, DEFAULT_MAX_CALLS, DEFAULT_MAX_STREAMS_PER_CONNECTION};
use crate::daemon_info::{DaemonIdentity, DaemonInfoService};
use crate::endpoint::Endpoint;
use crate::health::DrainingHealth;
use crate::listen::{BindError, BoundListener, BoundSocket};
use crate::metrics::{GrpcMetrics, InvalidHelp, register_checked, serve_metrics};
use crate::request_telemetry::RequestTelemetryLayer;
use crate::shutdown::{ShutdownHandle, ShutdownReason};
use crate::tls::{ServerTls, TlsError, ensure_crypto_provider};

/// Default time in-flight requests get to finish after shutdown begins.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long a forced close may take before `run` returns anyway.
const FORCE_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The gRPC or metrics endpoint could not be bound.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// TLS material could not be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// tonic rejected the TLS configuration (e.g. a key that does not match).
    #[error("cannot configure TLS for {endpoint}: {source}")]
    TlsConfig {
        /// The listen endpoint.
        endpoint: Endpoint,
        /// tonic's error.
        source: tonic::transport::Error,
    },
    /// A descriptor set given for reflection is invalid.
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The auth policy file could not be loaded.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The token file could not be loaded.
    #[error(transparent)]
    Tokens(#[from] TokenError),
    /// A non-loopback address would be served to anyone.
    #[error(
        "refusing to serve {endpoint} without authentication: it is not a loopback address or a \
         Unix socket. Configure --auth-tokens or --tls-client-ca (with --auth-policy for roles), \
         or pass --insecure to serve it open"
    )]
    Unauthenticated {
        /// The listen endpoint.
        endpoint: Endpoint,
    },
    /// SIGTERM/SIGINT handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(io::Error),
    /// The server stopped with a transport error.
    #[error("gRPC server on {endpoint} failed: {source}")]
    Transport {
        /// The listen endpoint.
        endpoint: Endpoint,
        /// tonic's error.
        source: tonic::transport::Error,
    },
    /// In-flight requests did not finish within the grace period; their
    /// connections were closed forcibly.
    #[error(
        "gRPC server on {endpoint} did not drain within {grace:?} after {reason}; \
         remaining connections were closed"
    )]
    DrainTimedOut {
        /// The listen endpoint.
        endpoint: Endpoint,
        /// The grace period that ran out.
        grace: Duration,
        /// Why shutdown began.
        reason: ShutdownReason,
    },
}

/// How a server that shut down cleanly ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeReport {
    /// Why shutdown began.
    pub reason: ShutdownReason,
    /// From the start of shutdown until the last connection closed.
    pub drain_time: Duration,
}

/// Builder of a daemon's gRPC server. See the crate docs for what every
/// server gets.
pub struct GrpcServer {
    identity: DaemonIdentity,
    routes: RoutesBuilder,
    services: Vec<String>,
    tls: Option<ServerTls>,
    grace: Duration,
    registry: Registry,
    metrics_listen: Option<Endpoint>,
    shutdown: ShutdownHandle,
    handle_signals: bool,
    policy: Option<AuthPolicy>,
    tokens: Option<TokenFile>,
    insecure: bool,
    max_calls: usize,
    max_streams_per_connection: u32,
}

impl std::fmt::Debug for GrpcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcServer")
            .field("identity", &self.identity)
            .field("services", &self.services)
            .field("tls", &self.tls)
            .field("grace", &self.grace)
            .field("metrics_listen", &self.metrics_listen)
            .field("token_file", &self.tokens)
            .field("roles", &self.policy.is_some())
            .field("insecure", &self.insecure)
            .finish_non_exhaustive()
    }
}

impl GrpcServer {
    /// A server for the daemon `identity`, with no services of its own yet,
    /// no TLS, no `/metrics` endpoint, a [`DEFAULT_SHUTDOWN_GRACE`] and
    /// SIGTERM/SIGINT handling on.
    pub fn new(identity: DaemonIdentity) -> Self {
        GrpcServer {
            identity,
            routes: RoutesBuilder::default(),
            services: Vec::new(),
            tls: None,
            grace: DEFAULT_SHUTDOWN_GRACE,
            registry: Registry::default(),
            metrics_listen: None,
            shutdown: ShutdownHandle::new(),
            handle_signals: true,
            policy: None,
            tokens: None,
            insecure: false,
            max_calls: DEFAULT_MAX_CALLS,
            max_streams_per_connection: DEFAULT_MAX_STREAMS_PER_CONNECTION,
        }
    }

    /// A server configured from the common command-line flags: TLS files,
    /// shutdown grace and metrics address. (The listen address is passed to
    /// [`GrpcServer::bind`].)
    ///
    /// # Errors
    /// When the TLS files cannot be read or are invalid.
    pub fn from_args(identity: DaemonIdentity, args: &ServeArgs) -> Result<Self, ServeError> {
        Self::from_args_with_roles(identity, args, AuthPolicy::new())
    }

    /// [`GrpcServer::from_args`] for a daemon that defines roles (`read`, `write`, narrow ones)
    /// and the default roles of identities a policy does not name: calls are checked against
    /// `roles`, with `--auth-policy`, when given, merged onto it.
    ///
    /// # Errors
    /// When the TLS, policy or token files cannot be read or are invalid.
    pub fn from_args_with_roles(
        identity: DaemonIdentity,
        args: &ServeArgs,
        roles: AuthPolicy,
    ) -> Result<Self, ServeError> {
        Ok(Self::new(identity)
            .tls(args.server_tls()?)
            .auth_policy(Some(args.auth_policy(roles)?))
            .token_file(args.token_file()?)
            .insecure(args.insecure)
            .max_calls(args.max_calls)
            .max_streams_per_connection(args.max_streams_per_connection)
            .shutdown_grace(args.shutdown_grace)
            .metrics_listen(args.metrics_listen.clone()))
    }

    /// Check every call against this policy (`None`: every authenticated caller may call
    /// everything). Callers authenticate with a token ([`GrpcServer::token_file`]) or a client
    /// certificate (mutual [`GrpcServer::tls`]).
    #[must_use]
    pub fn auth_policy(mut self, policy: Option<AuthPolicy>) -> Self {
        self.policy = policy;
        self
    }

    /// Accept the bearer tokens of this file.
    #[must_use]
    pub fn token_file(mut self, tokens: Option<TokenFile>) -> Self {
        self.tokens = tokens;
        self
    }

    /// Serve a non-loopback TCP address even without authentication (logged as a warning).
    #[must_use]
    pub fn insecure(mut self, insecure: bool) -> Self {
        self.insecure = insecure;
        self
    }

    /// At most this many calls in progress at once (health checks aside).
    #[must_use]
    pub fn max_calls(mut self, max: usize) -> Self {
        self.max_calls = max.max(1);
        self
    }

    /// At most this many concurrent streams on one connection.
    #[must_use]
    pub fn max_streams_per_connection(mut self, max: u32) -> Self {
        self.max_streams_per_connection = max.max(1);
        self
    }

    fn authenticates(&self) -> bool {
        self.tokens.is_some() || self.tls.as_ref().is_some_and(ServerTls::is_mutual)
    }

    /// Serve `service`, a tonic-generated `*Server`. Its name is reported
    /// SERVING by health, listed by reflection and by `GetInfo`.
    #[must_use]
    pub fn add_service<S>(mut self, service: S) -> Self
    where
        S: Service<http::Request<TonicBody>, Error = Infallible>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Response: axum::response::IntoResponse,
        S::Future: Send + 'static,
    {
        self.services.push(S::NAME.to_owned());
        self.routes.add_service(service);
        self
    }

    /// Serve over TLS (`Some`) or plaintext (`None`).
    #[must_use]
    pub fn tls(mut self, tls: Option<ServerTls>) -> Self {
        self.tls = tls;
        self
    }

    /// How long in-flight requests may take to finish after shutdown begins.
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Serve `GET /metrics` on this endpoint (`None`: no metrics endpoint).
    #[must_use]
    pub fn metrics_listen(mut self, endpoint: Option<Endpoint>) -> Self {
        self.metrics_listen = endpoint;
        self
    }

    /// Register one of the daemon's own metrics, exposed on `/metrics` with the gRPC request
    /// metrics. `help` must be plain one-line text (it is written verbatim).
    ///
    /// # Errors
    /// When `help` holds a backslash, a double quote or a line break.
    pub fn register_metric(
        &mut self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) -> Result<(), InvalidHelp> {
        register_checked(&mut self.registry, name, help, metric)
    }

    /// Whether SIGTERM/SIGINT trigger shutdown (default on). Tests that run
    /// several servers in one process turn it off and use
    /// [`ShutdownHandle::trigger`].
    #[must_use]
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.handle_signals = on;
        self
    }

    /// The handle that shuts this server down.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Bind the gRPC endpoint (and the metrics endpoint, if any) without
    /// serving yet, so the caller can learn the actual addresses.
    ///
    /// # Errors
    /// When an endpoint cannot be bound or the TLS set-up is inconsistent.
    pub async fn bind(self, listen: &Endpoint) -> Result<BoundServer, ServeError> {
        if listen.is_tls() && self.tls.is_none() {
            return Err(BindError::TlsWithoutCertificate {
                endpoint: listen.clone(),
            }
            .into());
        }
        if !self.authenticates() && !is_local(listen) {
            if !self.insecure {
                return Err(ServeError::Unauthenticated {
                    endpoint: listen.clone(),
                });
            }
            tracing::warn!(
                endpoint = %listen,
                "INSECURE: serving a non-loopback address without authentication (--insecure): \
                 anyone who can reach it may call every method"
            );
        }
        let listener = BoundListener::bind(listen).await?;
        let metrics_listener = match &self.metrics_listen {
            Some(endpoint) => Some(BoundListener::bind(endpoint).await?),
            None => None,
        };
        Ok(BoundServer {
            config: self,
            listener,
            metrics_listener,
        })
    }

    /// Bind `listen` and serve until shutdown; see [`BoundServer::run`].
    ///
    /// # Errors
    /// See [`GrpcServer::bind`] and [`BoundServer::run`].
    pub async fn serve(self, listen: &Endpoint) -> Result<ServeReport, ServeError> {
        self.bind(listen).await?.run().await
    }
}

/// A server whose sockets are bound; [`BoundServer::run`] serves.
#[derive(Debug)]
pub struct BoundServer {
    config: GrpcServer,
    listener: BoundListener,
    metrics_listener: Option<BoundListener>,
}

type ServeFuture = Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>>;

impl BoundServer {
    /// Where gRPC is served (the actual port when `:0` was asked for).
    pub fn local_endpoint(&self) -> &Endpoint {
        self.listener.local_endpoint()
    }

    /// Where `/metrics` is served, if anywhere.
    pub fn metrics_endpoint(&self) -> Option<&Endpoint> {
        self.metrics_listener
            .as_ref()
            .map(BoundListener::local_endpoint)
    }

    /// The handle that shuts this server down.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.config.shutdown.clone()
    }

    /// Serve until shutdown is triggered (SIGTERM, SIGINT or
    /// [`ShutdownHandle::trigger`]), then:
    ///
    /// 1. report NOT_SERVING for the server and every service (health
    ///    watchers are told, then their streams end);
    /// 2. stop accepting connections and let in-flight requests finish;
    /// 3. return [`ServeReport`] once every connection has closed, or, when
    ///    the grace period runs out first, close the remaining connections
    ///    and return [`ServeError::DrainTimedOut`].
    ///
    /// `/metrics` keeps answering during the drain and stops with the server.
    ///
    /// # Errors
    /// See [`ServeError`].
    pub async fn run(self) -> Result<ServeReport, ServeError> {
        let BoundServer {
            config,
            listener,
            metrics_listener,
        } = self;
        let GrpcServer {
            identity,
            mut routes,
            services: user_services,
            tls,
            grace,
            mut registry,
            metrics_listen: _,
            shutdown,
            handle_signals,
            policy,
            tokens,
            insecure: _,
            max_calls,
            max_streams_per_connection,
        } = config;
        let auth = AuthConfig {
            policy,
            tokens,
            client_certificates: tls.as_ref().is_some_and(ServerTls::is_mutual),
        };
        let endpoint = listener.local_endpoint().clone();

        let signal_task = if handle_signals {
            Some(shutdown.listen_for_signals().map_err(ServeError::Signals)?)
        } else {
            None
        };

        // Every service this endpoint answers for.
        let health_name = <HealthServer<DrainingHealth> as NamedService>::NAME;
        let daemon_name = <DaemonServer<DaemonInfoService> as NamedService>::NAME;
        let mut services: Vec<String> = user_services;
        services.extend(
            [health_name, daemon_name, REFLECTION_V1, REFLECTION_V1ALPHA].map(str::to_owned),
        );
        services.sort();
        services.dedup();

        let reporter = HealthReporter::new();
        reporter
            .set_service_status("", ServingStatus::Serving)
            .await;
        for service in &services {
            reporter
                .set_service_status(service, ServingStatus::Serving)
                .await;
        }
        routes.add_service(HealthServer::new(DrainingHealth::new(
            HealthService::from_health_reporter(reporter.clone()),
            shutdown.clone(),
        )));
        routes.add_service(DaemonServer::new(DaemonInfoService {
            identity: identity.clone(),
            started_at: SystemTime::now(),
            services: services.clone(),
            shutdown: shutdown.clone(),
        }));
        let reflection = || {
            let mut builder = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(nephrite_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(
                    tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
                );
            for service in &services {
                builder = builder.with_service_name(service.clone());
            }
            builder
        };
        routes.add_service(reflection().build_v1()?);
        routes.add_service(reflection().build_v1alpha()?);

        let metrics = GrpcMetrics::register(&mut registry);
        let layers = tower::ServiceBuilder::new()
            .layer(RequestTelemetryLayer::new(metrics, services.clone()))
            .layer(CallLimitsLayer::new(max_calls))
            .layer(AuthLayer::new(auth.clone()));
        let mut server = tonic::transport::Server::builder()
            .max_concurrent_streams(max_streams_per_connection)
            .layer(layers);
        if let Some(tls) = &tls {
            ensure_crypto_provider();
            server = server
                .tls_config(tls.to_tonic())
                .map_err(|source| ServeError::TlsConfig {
                    endpoint: endpoint.clone(),
                    source,
                })?;
        }
        let router = server.add_routes(routes.routes());

        let (drain_tx, drain_rx) = oneshot::channel::<()>();
        let drain = async move {
            let _ = drain_rx.await;
        };
        let (force_tx, force_rx) = watch::channel(false);
        let mut serve: ServeFuture = match listener.socket {
            BoundSocket::Tcp(tcp) => {
                let incoming = TcpIncoming::from(tcp)
                    .with_nodelay(Some(true))
                    .map(move |io| io.map(|io| ForceClosable::new(io, force_rx.clone())));
                Box::pin(router.serve_with_incoming_shutdown(incoming, drain))
            }
            BoundSocket::Unix(unix, guard) => {
                let incoming = tokio_stream::wrappers::UnixListenerStream::new(unix)
                    .map(move |io| io.map(|io| ForceClosable::new(io, force_rx.clone())));
                Box::pin(async move {
                    let result = router.serve_with_incoming_shutdown(incoming, drain).await;
                    drop(guard);
                    result
                })
            }
        };

        let (metrics_stop_tx, metrics_stop_rx) = oneshot::channel::<()>();
        let metrics_task = metrics_listener.map(|metrics_listener| {
            let metrics_endpoint = metrics_listener.local_endpoint().clone();
            tracing::info!(endpoint = %metrics_endpoint, "serving /metrics");
            tokio::spawn(serve_metrics(
                metrics_listener,
                Arc::new(registry),
                async move {
                    let _ = metrics_stop_rx.await;
                },
            ))
        });

        tracing::info!(
            daemon = %identity.name,
            version = %identity.version,
            endpoint = %endpoint,
            tls = tls.is_some(),
            authentication = auth.authenticates(),
            default_roles = %auth
                .policy
                .as_ref()
                .map_or_else(|| "every method".to_owned(), |p| p.default_roles().join(",")),
            services = %services.join(","),
            "serving gRPC"
        );

        let reason = tokio::select! {
            result = &mut serve => {
                // The server stopped without being asked to.
                let _ = metrics_stop_tx.send(());
                if let Some(task) = signal_task {
                    task.abort();
                }
                return match result {
                    Err(source) => Err(ServeError::Transport { endpoint, source }),
                    Ok(()) => Ok(ServeReport {
                        reason: ShutdownReason::Requested,
                        drain_time: Duration::ZERO,
                    }),
                };
            }
            reason = shutdown.triggered() => reason,
        };

        let drain_started = Instant::now();
        tracing::info!(%reason, ?grace, "shutting down: reporting NOT_SERVING, draining requests");
        reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
        for service in &services {
            reporter
                .set_service_status(service, ServingStatus::NotServing)
                .await;
        }
        let _ = drain_tx.send(());

        let outcome = match tokio::time::timeout(grace, &mut serve).await {
            Ok(Ok(())) => Ok(ServeReport {
                reason,
                drain_time: drain_started.elapsed(),
            }),
            Ok(Err(source)) => Err(ServeError::Transport {
                endpoint: endpoint.clone(),
                source,
            }),
            Err(_elapsed) => {
                tracing::warn!(?grace, "grace period over: closing remaining connections");
                let _ = force_tx.send(true);
                if tokio::time::timeout(FORCE_CLOSE_WAIT, &mut serve)
                    .await
                    .is_err()
                {
                    tracing::warn!("connections still open after forced close; returning anyway");
                }
                Err(ServeError::DrainTimedOut {
                    endpoint: endpoint.clone(),
                    grace,
                    reason,
                })
            }
        };
        drop(serve);

        let _ = metrics_stop_tx.send(());
        if let Some(task) = metrics_task {
            match tokio::time::timeout(FORCE_CLOSE_WAIT, task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(error))) => tracing::warn!(%error, "metrics endpoint failed"),
                Ok(Err(error)) => tracing::warn!(%error, "metrics task failed"),
                Err(_) => tracing::warn!("metrics endpoint did not stop in time"),
            }
        }
        if let Some(task) = signal_task {
            task.abort();
        }
        if let Ok(report) = &outcome {
            tracing::info!(
                drain_ms = report.drain_time.as_millis() as u64,
                "drained, server stopped"
            );
        }
        outcome
    }
}

/// Whether `endpoint` is reachable only from this host: a Unix socket or a loopback address.
fn is_local(endpoint: &Endpoint) -> bool {
    match endpoint {
        Endpoint::Unix { .. } => true,
        Endpoint::Tcp { host, .. } => {
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

const REFLECTION_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";

/// A connection that fails all IO once the grace period is over, so hyper
/// drops it even while a handler is still running.
struct ForceClosable<IO> {
    inner: IO,
    force: Pin<Box<dyn Future<Output = ()> + Send>>,
    forced: bool,
}

impl<IO> ForceClosable<IO> {
    fn new(inner: IO, mut force: watch::Receiver<bool>) -> Self {
        ForceClosable {
            inner,
            force: Box::pin(async move {
                // An error means the server is gone, which also means "close".
                let _ = force.wait_for(|forced| *forced).await;
            }),
            forced: false,
        }
    }

    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.forced && self.force.as_mut().poll(cx).is_ready() {
            self.forced = true;
        }
        if self.forced {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "shutdown grace period over",
            ))
        } else {
            Ok(())
        }
    }
}

impl<IO: Connected> Connected for ForceClosable<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for ForceClosable<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for ForceClosable<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check(cx)?;
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
