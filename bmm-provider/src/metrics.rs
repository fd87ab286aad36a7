//! What `bmm-provider serve` reports on `/metrics` (through `nephrite_runtime::GrpcServer`):
//! reconciles per controller and result with their durations, and BMM API calls per
//! operation and result.
//!
//! | metric | labels |
//! |---|---|
//! | `bmm_provider_reconciles_total` | `controller` (cluster, machine), `result` (ok, error, skipped) |
//! | `bmm_provider_reconcile_seconds` | `controller` |
//! | `bmm_provider_api_calls_total` | `operation` (`GET instance/{id}`, …), `result` (the HTTP status, `timeout`, `transport`) |
//! | `bmm_provider_reconciles_in_flight` | `controller` |
//! | `bmm_provider_api_calls_in_flight` | — |
//!
//! A `skipped` reconcile is one answered without calling BMM (its inputs had not changed and
//! its poll was not due).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// Labels of the reconcile counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `cluster` or `machine`.
    pub controller: String,
    /// `ok`, `error` or `skipped`.
    pub result: String,
}

/// Labels of the reconcile duration.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// `cluster` or `machine`.
    pub controller: String,
}

/// Labels of the API call counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiCallLabels {
    /// The operation, e.g. `POST instance`.
    pub operation: String,
    /// The HTTP status, or `timeout` / `transport`.
    pub result: String,
}

type Durations = Family<ControllerLabel, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 1 ms … ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The provider's metrics. Cheap to clone; clones count into the same metrics.
#[derive(Clone, Debug)]
pub struct ProviderMetrics {
    /// Reconciles per controller and result.
    pub reconciles: Family<ReconcileLabels, Counter>,
    /// Reconcile durations per controller (skipped ones excluded).
    pub reconcile_seconds: Durations,
    /// BMM API calls per operation and result.
    pub api_calls: Family<ApiCallLabels, Counter>,
    /// Reconciles running now, per controller (skipped ones excluded).
    pub reconciles_in_flight: Family<ControllerLabel, Gauge>,
    /// BMM API calls waiting for their answer now.
    pub api_calls_in_flight: Gauge,
}

/// Something in progress counted in a gauge: +1 when entered, −1 when dropped (also when the
/// future holding it is cancelled).
#[derive(Debug)]
pub struct InFlight(Gauge);

impl InFlight {
    /// Counts one more in `gauge` until the returned value is dropped.
    pub fn enter(gauge: &Gauge) -> InFlight {
        gauge.inc();
        InFlight(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Default for ProviderMetrics {
    fn default() -> Self {
        ProviderMetrics {
            reconciles: Family::default(),
            reconcile_seconds: Family::new_with_constructor(reconcile_histogram),
            api_calls: Family::default(),
            reconciles_in_flight: Family::default(),
            api_calls_in_flight: Gauge::default(),
        }
    }
}

impl ProviderMetrics {
    /// Counts a reconcile.
    pub fn reconciled(&self, controller: &str, result: &str, seconds: Option<f64>) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: controller.into(),
                result: result.into(),
            })
            .inc();
        if let Some(s) = seconds {
            self.reconcile_seconds
                .get_or_create(&ControllerLabel {
                    controller: controller.into(),
                })
                .observe(s);
        }
    }

    /// Counts a reconcile of `controller` as running until the result is dropped.
    pub fn reconciling(&self, controller: &str) -> InFlight {
        InFlight::enter(&self.reconciles_in_flight.get_or_create(&ControllerLabel {
            controller: controller.into(),
        }))
    }

    /// Reconciles of `controller` running now.
    pub fn reconciles_running(&self, controller: &str) -> i64 {
        self.reconciles_in_flight
            .get_or_create(&ControllerLabel {
                controller: controller.into(),
            })
            .get()
    }

    /// Counts an API call.
    pub fn api_call(&self, operation: &str, result: &str) {
        self.api_calls
            .get_or_create(&ApiCallLabels {
                operation: operation.into(),
                result: result.into(),
            })
            .inc();
    }

    /// Registers the metrics with the daemon's server (`bmm_provider_*`).
    pub fn register(
        &self,
        server: &mut nephrite_runtime::GrpcServer,
    ) -> Result<(), nephrite_runtime::InvalidHelp> {
        server.register_metric(
            "bmm_provider_reconciles",
            "Reconciles per controller and result (ok, error, skipped without calling BMM)",
            self.reconciles.clone(),
        )?;
        server.register_metric(
            "bmm_provider_reconcile_seconds",
            "Duration of the reconciles that ran, per controller",
            self.reconcile_seconds.clone(),
        )?;
        server.register_metric(
            "bmm_provider_reconciles_in_flight",
            "Reconciles running now, per controller",
            self.reconciles_in_flight.clone(),
        )?;
        server.register_metric(
            "bmm_provider_api_calls_in_flight",
            "BMM API calls waiting for their answer",
            self.api_calls_in_flight.clone(),
        )?;
        server.register_metric(
            "bmm_provider_api_calls",
            "BMM API calls per operation and result (HTTP status, timeout, transport)",
            self.api_calls.clone(),
        )
    }
}
