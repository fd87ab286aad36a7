//! Prometheus metrics: the gRPC request metrics every daemon records and the
//! `/metrics` endpoint that exposes a daemon's whole registry.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::listen::{BoundListener, BoundSocket};

/// Content type of the `/metrics` response (OpenMetrics text, which
/// Prometheus scrapes natively).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

/// Encode `registry` in the text exposition format served on `/metrics`.
///
/// # Errors
/// Only if a metric's own encoder fails.
pub fn encode_metrics(registry: &Registry) -> Result<String, std::fmt::Error> {
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
                match encode_metrics(&registry) {
                    Ok(text) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
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
