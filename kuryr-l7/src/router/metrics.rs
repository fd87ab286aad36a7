//! The router's Prometheus metrics: answers by pool and status class, member ejections by
//! pool, client connections by listener, and the table being served.
//!
//! A request pays one atomic add: the counters of a pool are looked up in the families once,
//! the first time a table version needs them, and kept with that version ([`PoolCounters`]).
//! A pool that leaves the table leaves the exposition too.

use std::sync::OnceLock;

use http::StatusCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Status classes by the first digit of the code; anything outside 1..=5 counts as `5xx`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabels {
    pool: String,
    code: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

/// A listener kind, as the `listener` label names it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Listener {
    /// Plain HTTP/1.x and h2c.
    Http,
    /// TLS: terminated or passed through.
    Https,
}

/// Every metric of one router; clones count into the same series.
#[derive(Debug, Clone, Default)]
pub(crate) struct RouterMetrics {
    responses: Family<ResponseLabels, Counter>,
    ejections: Family<PoolLabels, Counter>,
    connections: Family<ListenerLabels, Counter>,
    open_connections: Family<ListenerLabels, Gauge>,
    table_updates: Counter,
    pools: Gauge,
}

impl RouterMetrics {
    /// Registers every metric in `registry` (names prefixed `kuryr_l7_router_`).
    pub(crate) fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("kuryr_l7_router");
        registry.register(
            "responses",
            "Answers sent by the pool the request was routed to (empty when answered before reaching one: no route, rejected, redirected or a bad request) and status class",
            self.responses.clone(),
        );
        registry.register(
            "ejections",
            "Members taken out of their pool after consecutive failures, by pool",
            self.ejections.clone(),
        );
        registry.register(
            "connections",
            "Client connections accepted, by listener (http, https)",
            self.connections.clone(),
        );
        registry.register(
            "open_connections",
            "Client connections open, by listener (http, https)",
            self.open_connections.clone(),
        );
        registry.register(
            "table_updates",
            "Route table versions applied after the first",
            self.table_updates.clone(),
        );
        registry.register(
            "pools",
            "Pools in the route table being served",
            self.pools.clone(),
        );
    }

    /// The counters of `pool` (`""`: answers made before a pool was chosen).
    pub(crate) fn pool(&self, pool: &str) -> PoolCounters {
        PoolCounters {
            pool: pool.to_owned(),
            responses: Default::default(),
            ejections: OnceLock::new(),
            response_family: self.responses.clone(),
            ejection_family: self.ejections.clone(),
        }
    }

    /// A table version with `pools` pools is served; `update` when it replaces another.
    pub(crate) fn table_served(&self, pools: usize, update: bool) {
        self.pools.set(i64::try_from(pools).unwrap_or(i64::MAX));
        if update {
            self.table_updates.inc();
        }
    }

    /// Drops the series of a pool that left the table.
    pub(crate) fn forget_pool(&self, pool: &str) {
        for code in CLASSES {
            self.responses.remove(&ResponseLabels {
                pool: pool.to_owned(),
                code,
            });
        }
        self.ejections.remove(&PoolLabels {
            pool: pool.to_owned(),
        });
    }

    /// Counts a client connection on `listener`, open until the guard is dropped.
    pub(crate) fn connection(&self, listener: Listener) -> OpenConnection {
        let labels = ListenerLabels {
            listener: match listener {
                Listener::Http => "http",
                Listener::Https => "https",
            },
        };
        self.connections.get_or_create(&labels).inc();
        let open = self.open_connections.get_or_create(&labels).clone();
        open.inc();
        OpenConnection { open }
    }
}

/// One pool's counters, resolved on first use.
#[derive(Debug)]
pub(crate) struct PoolCounters {
    pool: String,
    responses: [OnceLock<Counter>; 5],
    ejections: OnceLock<Counter>,
    response_family: Family<ResponseLabels, Counter>,
    ejection_family: Family<PoolLabels, Counter>,
}

impl PoolCounters {
    /// Counts an answer with `status`.
    pub(crate) fn answered(&self, status: StatusCode) {
        let class = usize::from(status.as_u16() / 100).clamp(1, 5) - 1;
        self.responses[class]
            .get_or_init(|| {
                let labels = ResponseLabels {
                    pool: self.pool.clone(),
                    code: CLASSES[class],
                };
                self.response_family.get_or_create(&labels).clone()
            })
            .inc();
    }

    /// Counts a member ejected.
    pub(crate) fn ejected(&self) {
        self.ejections
            .get_or_init(|| {
                let labels = PoolLabels {
                    pool: self.pool.clone(),
                };
                self.ejection_family.get_or_create(&labels).clone()
            })
            .inc();
    }
}

/// An open client connection, counted down when dropped.
pub(crate) struct OpenConnection {
    open: Gauge,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.open.dec();
    }
}
