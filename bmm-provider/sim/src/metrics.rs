//! The simulator's `/metrics`: objects ever created per kind, requests, injected faults.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of the per-kind counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The object kind (`vpc`, `instance`, …).
    pub kind: String,
}

/// Labels of the request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabel {
    /// HTTP method.
    pub method: String,
    /// HTTP status answered.
    pub status: String,
}

/// Requests the request log keeps.
pub const LOG_LIMIT: usize = 100_000;

/// The counters.
pub struct SimMetrics {
    registry: Registry,
    /// Objects ever created.
    pub created: Family<KindLabel, Counter>,
    /// Requests answered.
    pub requests: Family<RequestLabel, Counter>,
    /// Faults injected.
    pub faults: Counter,
    /// Requests answered, all together.
    pub answered: Counter,
    /// Requests being answered right now (latency included).
    pub in_flight: Gauge,
    /// Requests per `METHOD route` (e.g. `GET instance/{instanceId}`).
    by_path: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// When each request came, per `METHOD route` (the most recent [`LOG_LIMIT`]).
    log: std::sync::Mutex<std::collections::VecDeque<(std::time::Instant, String)>>,
}

impl SimMetrics {
    /// Registers the counters.
    pub fn new() -> SimMetrics {
        let mut registry = Registry::with_prefix("bmm_sim");
        let created = Family::<KindLabel, Counter>::default();
        let requests = Family::<RequestLabel, Counter>::default();
        let faults = Counter::default();
        registry.register(
            "objects_created",
            "Objects ever created, per kind",
            created.clone(),
        );
        registry.register(
            "requests",
            "Requests answered, per method and status",
            requests.clone(),
        );
        registry.register("faults_injected", "Faults injected", faults.clone());
        let in_flight = Gauge::default();
        registry.register(
            "requests_in_flight",
            "Requests being answered (injected latency included)",
            in_flight.clone(),
        );
        SimMetrics {
            registry,
            created,
            requests,
            faults,
            answered: Counter::default(),
            in_flight,
            by_path: Default::default(),
            log: Default::default(),
        }
    }

    /// Counts a request to `route` (`METHOD path-template`).
    pub fn count_path(&self, route: &str) {
        if let Ok(mut m) = self.by_path.lock() {
            *m.entry(route.to_string()).or_default() += 1;
        }
        if let Ok(mut log) = self.log.lock() {
            if log.len() == LOG_LIMIT {
                log.pop_front();
            }
            log.push_back((std::time::Instant::now(), route.to_string()));
        }
    }

    /// When each of the most recent requests came, oldest first, with its `METHOD route`.
    pub fn request_log(&self) -> Vec<(std::time::Instant, String)> {
        self.log
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Requests per `METHOD route`, faults included.
    pub fn requests_by_path(&self) -> Vec<(String, u64)> {
        self.by_path
            .lock()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

impl Default for SimMetrics {
    fn default() -> Self {
        SimMetrics::new()
    }
}
