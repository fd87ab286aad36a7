//! Prometheus metrics: the gRPC request metrics every daemon records and the
//! `/metrics` endpoint that exposes a daemon's whole registry.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::endpoint::Endpoint;
use crate::listen::{BindError, BoundListener, BoundSocket};

/// Content type of the OpenMetrics 1.0 text format that `/metrics` serves: what prometheus-client
/// writes and what Prometheus asks for first.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A metric's HELP text that cannot be written as is.
///
/// prometheus-client writes HELP verbatim, and a help string is a constant of the program, so
/// it is checked once, when the metric is registered, rather than escaped at every scrape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "HELP text of metric {metric:?} contains {found:?}: use plain text on one line without backslashes or double quotes"
)]
pub struct InvalidHelp {
    /// The metric's name.
    pub metric: String,
    /// The character refused.
    pub found: char,
}

/// Checks that `help` is plain one-line text, then registers `metric` as `name` in `registry`.
pub(crate) fn register_checked(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: impl prometheus_client::registry::Metric,
) -> Result<(), InvalidHelp> {
    if let Some(found) = help.chars().find(|c| matches!(c, '\\' | '"' | '\n' | '\r')) {
        return Err(InvalidHelp {
            metric: name.to_owned(),
            found,
        });
    }
    registry.register(name, help, metric);
    Ok(())
}

/// Labels of the gRPC request metrics, named as in go-grpc-prometheus.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GrpcLabels {
    pub(crate) grpc_service: String,
    pub(crate) grpc_method: String,
    pub(crate) grpc_code: String,
}

type HistogramConstructor = fn() -> Histogram;

/// Request count and latency by service, method and status code.
#[derive(Debug, Clone)]
pub(crate) struct GrpcMetrics {
    handled: Family<GrpcLabels, Counter>,
    handling_seconds: Family<GrpcLabels, Histogram, HistogramConstructor>,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl GrpcMetrics {
    /// Create the metrics and register them in `registry` as
    /// `grpc_server_handled_total` and `grpc_server_handling_seconds`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = GrpcMetrics {
            handled: Family::default(),
            handling_seconds: Family::new_with_constructor(
                latency_histogram as HistogramConstructor,
            ),
        };
        registry.register(
            "grpc_server_handled",
            "gRPC requests completed, by service, method and status code",
            metrics.handled.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "gRPC request duration until the last response byte, by service, method and status code",
            metrics.handling_seconds.clone(),
        );
        metrics
    }

    pub(crate) fn record(&self, labels: &GrpcLabels, seconds: f64) {
        self.handled.get_or_create(labels).inc();
        self.handling_seconds.get_or_create(labels).observe(seconds);
    }
}

/// `registry` in the OpenMetrics text format, as served on `/metrics`.
pub(crate) fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

/// Serve `GET /metrics` from `registry` on `listener` until `stop` resolves.
pub(crate) async fn serve_metrics(
    listener: BoundListener,
    registry: Arc<Registry>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::http::{StatusCode, header};
    use axum::routing::get;

    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let registry = Arc::clone(&registry);
            async move {
                match encode(&registry) {
                    Ok(text) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
                        text,
                    ),
                    Err(_) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                        "cannot encode metrics\n".to_owned(),
                    ),
                }
            }
        }),
    );
    match listener.socket {
        BoundSocket::Tcp(tcp) => axum::serve(tcp, app).with_graceful_shutdown(stop).await,
        BoundSocket::Unix(unix, _guard) => {
            axum::serve(unix, app).with_graceful_shutdown(stop).await
        }
    }
}

/// `GET /metrics` on its own, for a daemon that serves no gRPC (a data plane such as the L7
/// router): bind it, learn the address it got, then serve `registry` until a future resolves.
///
/// ```no_run
/// use nephrite_runtime::prometheus_client::{metrics::counter::Counter, registry::Registry};
/// use nephrite_runtime::{Endpoint, MetricsServer};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let mut registry = Registry::default();
/// let requests = Counter::<u64>::default();
/// registry.register("requests", "Requests served", requests.clone());
/// let server = MetricsServer::bind(&"127.0.0.1:9100".parse::<Endpoint>()?, registry).await?;
/// println!("metrics on {}", server.local_endpoint());
/// server.serve(std::future::pending()).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct MetricsServer {
    listener: BoundListener,
    registry: Arc<Registry>,
}

impl MetricsServer {
    /// Binds `endpoint` (TCP `HOST:PORT`, port 0 for any, or `unix:///PATH`) for `registry`.
    ///
    /// # Errors
    /// See [`BindError`].
    pub async fn bind(endpoint: &Endpoint, registry: Registry) -> Result<Self, BindError> {
        Ok(MetricsServer {
            listener: BoundListener::bind(endpoint).await?,
            registry: Arc::new(registry),
        })
    }

    /// Where `/metrics` is served: for TCP the actual IP and port.
    pub fn local_endpoint(&self) -> &Endpoint {
        self.listener.local_endpoint()
    }

    /// Serves `GET /metrics` until `stop` resolves.
    ///
    /// # Errors
    /// When accepting connections fails.
    pub async fn serve(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        tracing::info!(endpoint = %self.local_endpoint(), "serving /metrics");
        serve_metrics(self.listener, self.registry, stop).await
    }
}

#[cfg(test)]
mod tests;
