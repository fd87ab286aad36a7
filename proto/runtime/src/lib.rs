//! The one way every Nephrite daemon serves and dials gRPC.
//!
//! A daemon builds a [`GrpcServer`] from its [`DaemonIdentity`] and
//! [`ServeArgs`], adds its tonic services and calls [`GrpcServer::serve`].
//! Every server then also has:
//!
//! - `grpc.health.v1.Health`: the server (`""`) and every service SERVING
//!   while running, NOT_SERVING once shutdown begins;
//! - server reflection v1 and v1alpha, describing exactly the services
//!   served (descriptors from `nephrite-proto` and tonic-health);
//! - `nephrite.daemon.v1.Daemon/GetInfo`: name, version, build, start time,
//!   services, draining;
//! - a tracing span per request (path, peer, status, duration) and the
//!   Prometheus metrics `grpc_server_handled_total` and
//!   `grpc_server_handling_seconds`, served with the daemon's own metrics
//!   ([`GrpcServer::register_metric`]) on `GET /metrics` in the OpenMetrics
//!   text format (what prometheus-client writes and Prometheus asks for) when
//!   `--metrics-listen` is set;
//! - TCP or Unix-socket listening (stale socket files are removed, live ones
//!   refused), optional TLS and mutual TLS;
//! - graceful shutdown on SIGTERM, SIGINT or [`ShutdownHandle::trigger`]:
//!   NOT_SERVING, stop accepting, drain, return within the grace period;
//! - authentication (client certificates, bearer tokens) and per-method roles from a policy
//!   file, checked before routing ([`auth`]); a non-loopback listener without authentication
//!   is refused unless `--insecure`;
//! - limits on every call: calls in progress per daemon and streams per connection, status
//!   messages cut to [`MAX_STATUS_MESSAGE`], undecodable requests answered INVALID_ARGUMENT.
//!
//! Clients use [`dial`] / [`dial_with`] for TCP, HTTPS and Unix endpoints.
//! [`ClientArgs`] carries a client's credentials (`--ca`, `--cert`, `--key`, `--token-file`).
//! [`init_tracing`] sets up logging from `--log-format` and a filter string; [`report::exit`]
//! ends a binary's `main` with one readable error line instead of a backtrace; every CLI's
//! `-o table` is a [`table::Table`]; [`host::hostname`] is a daemon's default identity.
//! With the `leader-election` feature, `leader` elects one replica of a
//! Kubernetes-mode daemon through a Lease; with `kube-watch`, `watch_backoff`
//! is the pause a kube-runtime `Controller` takes after its watches fail, and
//! [`KubeWatch`] the one way a daemon keeps a kind of object in a reflector
//! store outside a `Controller`: restarted with that backoff, its listings
//! counted, its changes told as [`WatchEvent`]s.

mod args;
pub mod auth;
mod call_limits;
mod client_args;
mod daemon_info;
mod dial;
mod endpoint;
mod health;
pub mod host;
#[cfg(feature = "kube-watch")]
mod kube_watch;
#[cfg(feature = "leader-election")]
pub mod leader;
mod listen;
mod metrics;
pub mod report;
mod request_telemetry;
mod server;
mod shutdown;
mod status;
pub mod table;
mod telemetry;
mod tls;
#[cfg(feature = "kube-watch")]
mod watch_backoff;

pub use args::{DEFAULT_LISTEN, ServeArgs};
pub use auth::{AuthPolicy, CallerIdentity};
pub use call_limits::{DEFAULT_MAX_CALLS, DEFAULT_MAX_STREAMS_PER_CONNECTION};
pub use client_args::{AuthChannel, ClientArgs, ClientError};
pub use daemon_info::DaemonIdentity;
pub use dial::{DialError, DialOptions, dial, dial_lazy, dial_with};
pub use endpoint::{Endpoint, EndpointError, MAX_UNIX_SOCKET_PATH};
#[cfg(feature = "kube-watch")]
pub use kube_watch::{KubeWatch, Unavailable, WatchEvent};
pub use listen::BindError;
pub use metrics::{InvalidHelp, MetricsServer};
pub use server::{BoundServer, DEFAULT_SHUTDOWN_GRACE, GrpcServer, ServeError, ServeReport};
pub use shutdown::{ShutdownHandle, ShutdownReason};
pub use status::{MAX_STATUS_MESSAGE, bounded_status, truncate_message};
pub use telemetry::{DEFAULT_LOG_FILTER, LogFormat, TelemetryError, init_tracing};
pub use tls::{ClientTls, ServerTls, TlsError};
#[cfg(feature = "kube-watch")]
pub use watch_backoff::{WATCH_BACKOFF_MAX, WATCH_BACKOFF_MIN, WATCH_BACKOFF_RESET, watch_backoff};

/// Re-exported so daemons can register their own metrics without naming
/// the crate version themselves.
pub use prometheus_client;
