//! The embedded data plane: an HTTP reverse proxy serving a compiled [`RouteTable`].
//!
//! - Plain listeners speak HTTP/1.x through the router's own codec and HTTP/2 with prior
//!   knowledge (h2c) through hyper; TLS listeners read the SNI first, forward passthrough hosts
//!   untouched, and terminate the rest with the certificate for the SNI (ALPN `h2` and
//!   `http/1.1`, served by hyper).
//! - The table comes from any source: [`Router::update`] swaps it atomically (arc-swap), and
//!   [`Router::follow`] applies every version a `watch` channel carries (the directory watcher
//!   or the controller's rules service). A request uses the version it started
//!   with to the end, so no request sees half an update and in-flight requests finish.
//! - Plain-HTTP members are reached through a hand-written HTTP/1.1 client with a keep-alive
//!   connection pool per member, driven in the task serving the client; reencrypt (HTTPS)
//!   members through hyper's pooled TLS client. Members are balanced by weighted round robin
//!   with passive ejection (see [`balance`]).
//! - Protocol upgrades (WebSocket) are forwarded, and a member's `101` opens a tunnel (see
//!   `upgrade`).
//! - [`Router::drain`] stops accepting and lets requests in flight finish, for at most a
//!   grace period (see `drain`).
//! - [`daemon`] is `kuryr-l7 router`: flags, where the rules come from, listeners, drain on
//!   SIGTERM.
//! - [`Router::register_metrics`] exposes answers by pool and status class, ejections,
//!   connections and the table in a Prometheus registry (see `metrics`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nephrite_l7::{PoolProtocol, RouteTable};
use prometheus_client::registry::Registry;
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub mod balance;
pub mod daemon;
mod drain;
mod filters;
mod limits;
mod metrics;
mod proxy;
mod server;
pub mod tls;
mod upgrade;
mod upstream;

use balance::{Balancer, Ejection, HealthRegistry};
use drain::Drain;
use limits::ClientLimit;
use metrics::{Listener, PoolCounters, RouterMetrics};
use upstream::{MemberConnections, Upstreams};

/// The request body handed to hyper's TLS client (reencrypt pools).
pub(crate) type RequestBody =
    http_body_util::combinators::BoxBody<bytes::Bytes, upstream::body::BoxError>;

pub(crate) type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, RequestBody>;

/// Router settings.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Passive ejection.
    pub ejection: Ejection,
    /// The certificate for TLS hosts without their own (PEM chain, PEM key).
    pub default_certificate: Option<(String, String)>,
    /// A plain-HTTP connection is closed when a request head is not complete this long after
    /// its first byte, or when no request starts this long after the last answer.
    pub head_timeout: Duration,
    /// At most this many connections open at once per client address (`None`: no limit).
    pub max_connections_per_client: Option<usize>,
}

/// The default [`RouterConfig::head_timeout`].
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            ejection: Ejection::default(),
            default_certificate: None,
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            max_connections_per_client: None,
        }
    }
}

/// A pool of one table version: its balancer and its counters.
pub(crate) struct PoolState {
    pub(crate) balancer: Balancer,
    pub(crate) counters: PoolCounters,
}

/// What one table version needs at request time.
pub(crate) struct RouterState {
    pub(crate) table: Arc<RouteTable>,
    pub(crate) pools: HashMap<String, PoolState>,
    /// Counters of answers made before a pool was chosen.
    pub(crate) unrouted: PoolCounters,
    pub(crate) https_clients: HashMap<String, HttpsClient>,
    pub(crate) connections: HashMap<SocketAddr, Arc<MemberConnections>>,
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
}

/// The router: serves the current table on any number of listeners.
pub struct Router {
    state: ArcSwap<RouterState>,
    registry: Arc<HealthRegistry>,
    upstreams: Upstreams,
    default_key: Option<Arc<CertifiedKey>>,
    metrics: RouterMetrics,
    drain: Drain,
    head_timeout: Duration,
    clients: ClientLimit,
}

fn connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(3)));
    connector.set_nodelay(true);
    connector.enforce_http(false);
    connector
}

impl Router {
    /// A router serving `table`. Fails when the default certificate does not parse.
    pub fn new(config: RouterConfig, table: Arc<RouteTable>) -> Result<Arc<Self>, String> {
        let default_key = match &config.default_certificate {
            Some((cert, key)) => Some(tls::certified_key(cert, key)?),
            None => None,
        };
        let registry = Arc::new(HealthRegistry::new(config.ejection));
        let upstreams = Upstreams::default();
        let metrics = RouterMetrics::default();
        let state = build_state(table, &registry, &upstreams, default_key.clone(), &metrics);
        metrics.table_served(state.pools.len(), false);
        Ok(Arc::new(Router {
            state: ArcSwap::from_pointee(state),
            registry,
            upstreams,
            default_key,
            metrics,
            drain: Drain::default(),
            head_timeout: config.head_timeout,
            clients: ClientLimit::new(config.max_connections_per_client),
        }))
    }

    /// Serves `table` from now on; requests already running finish on the table they started with.
    pub fn update(&self, table: Arc<RouteTable>) {
        let state = build_state(
            table,
            &self.registry,
            &self.upstreams,
            self.default_key.clone(),
            &self.metrics,
        );
        self.metrics.table_served(state.pools.len(), true);
        let previous = self.state.swap(Arc::new(state));
        let current = self.state.load();
        for pool in previous.pools.keys() {
            if !current.pools.contains_key(pool) {
                self.metrics.forget_pool(pool);
            }
        }
    }

    /// Drains the router: the listeners stop accepting (their ports close), HTTP/1
    /// connections close after the answer they are busy with (`Connection: close`), h2c and
    /// TLS connections shut down gracefully (idle ones at once, streams in flight finish),
    /// passthrough streams and upgrade tunnels run on. Returns once nothing is busy or `grace` has passed: how many
    /// requests, connections or streams were still busy then (0: a clean drain). Idle
    /// keep-alive connections are not waited for.
    pub async fn drain(&self, grace: Duration) -> usize {
        self.drain.run(grace).await
    }

    /// Registers the router's metrics in `registry`, named `kuryr_l7_router_*`:
    /// `responses_total{pool, code}` (status class; `pool` empty for answers made before a
    /// pool was chosen), `ejections_total{pool}`, `connections_total{listener}`,
    /// `open_connections{listener}`, `table_updates_total` and `pools`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.metrics.register(registry);
    }

    /// The table being served.
    pub fn table(&self) -> Arc<RouteTable> {
        self.state.load().table.clone()
    }

    pub(crate) fn state(&self) -> Arc<RouterState> {
        self.state.load_full()
    }

    /// Applies every version `versions` carries (`table_of` extracts the table) until the
    /// sender is gone.
    pub async fn follow<T: Send + Sync + 'static>(
        self: Arc<Self>,
        mut versions: watch::Receiver<T>,
        table_of: fn(&T) -> Arc<RouteTable>,
    ) {
        while versions.changed().await.is_ok() {
            let table = table_of(&versions.borrow_and_update());
            self.update(table);
        }
    }

    /// Serves plain HTTP/1.x and h2c on `listener` until the task is dropped or the router
    /// drains: HTTP/1 through the router's own codec (see `server`), h2c (prior knowledge)
    /// through hyper.
    pub async fn serve_http(self: Arc<Self>, listener: TcpListener) {
        self.accept_loop(listener, Listener::Http, |router, stream, client| {
            server::serve(router, stream, client)
        })
        .await;
    }

    /// Serves TLS on `listener` (passthrough by SNI, termination otherwise) until the task is
    /// dropped or the router drains.
    pub async fn serve_https(self: Arc<Self>, listener: TcpListener) {
        self.accept_loop(listener, Listener::Https, Router::handle_tls)
            .await;
    }

    /// Accepts on `listener` until the router drains (the listener is dropped then, closing
    /// the port), serving each connection with `serve` in a task of its own, counted in the
    /// metrics while open.
    async fn accept_loop<F, Fut>(self: Arc<Self>, listener: TcpListener, kind: Listener, serve: F)
    where
        F: Fn(Arc<Self>, TcpStream, SocketAddr) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let draining = self.drain.started();
        tokio::pin!(draining);
        loop {
            let accepted = tokio::select! {
                biased;
                () = &mut draining => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, client) = match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!("accept: {err}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let slot = match self.clients.acquire(client.ip()) {
                Some(slot) => Some(slot),
                None if self.clients.is_limited() => {
                    tracing::debug!(%client, "connection over the per-client cap closed");
                    continue;
                }
                None => None,
            };
            let _ = stream.set_nodelay(true);
            let open = self.metrics.connection(kind);
            let served = serve(self.clone(), stream, client);
            tokio::spawn(async move {
                served.await;
                drop(open);
                drop(slot);
            });
        }
    }

    async fn handle_tls(self: Arc<Self>, stream: TcpStream, client: SocketAddr) {
        let sni = match tls::peek_sni(&stream).await {
            Ok(sni) => sni,
            Err(err) => {
                tracing::debug!(%client, "TLS: {err}");
                return;
            }
        };
        let state = self.state();
        if let Some(host) = sni.as_deref().map(str::to_ascii_lowercase)
            && let Some(pool) = state.table.passthrough.get(&host)
        {
            let Some(PoolState { balancer, counters }) = state.pools.get(pool) else {
                return;
            };
            let Some(member) = balancer.pick() else {
                tracing::debug!(%client, %host, "passthrough: no live member");
                return;
            };
            match TcpStream::connect(member).await {
                Ok(mut upstream) => {
                    balancer.success(member);
                    let _busy = self.drain.busy();
                    let mut stream = stream;
                    let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
                }
                Err(err) => {
                    if balancer.failure(member) {
                        counters.ejected();
                    }
                    tracing::debug!(%member, "passthrough connect: {err}");
                }
            }
            return;
        }
        let Some(config) = state.tls.clone() else {
            tracing::debug!(%client, "TLS connection but no certificate configured");
            return;
        };
        drop(state);
        match tokio_rustls::TlsAcceptor::from(config).accept(stream).await {
            Ok(tls) => proxy::serve_connection(self, TokioIo::new(tls), client, true).await,
            Err(err) => tracing::debug!(%client, "TLS handshake: {err}"),
        }
    }
}

fn build_state(
    table: Arc<RouteTable>,
    registry: &Arc<HealthRegistry>,
    upstreams: &Upstreams,
    default_key: Option<Arc<CertifiedKey>>,
    metrics: &RouterMetrics,
) -> RouterState {
    let connections = upstreams.retain(
        table
            .pools
            .values()
            .filter(|pool| matches!(pool.protocol, PoolProtocol::Http))
            .flat_map(|pool| pool.members.iter().map(|m| m.address)),
    );
    let mut pools = HashMap::new();
    let mut https_clients = HashMap::new();
    for (id, pool) in &table.pools {
        let state = PoolState {
            balancer: Balancer::new(pool, registry.clone()),
            counters: metrics.pool(id),
        };
        pools.insert(id.clone(), state);
        if let PoolProtocol::Https { ca_pem } = &pool.protocol {
            match tls::client_config(ca_pem.as_deref()) {
                Ok(config) => {
                    let https = hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(config)
                        .https_only()
                        .enable_http1()
                        .wrap_connector(connector());
                    https_clients.insert(
                        id.clone(),
                        Client::builder(TokioExecutor::new()).build(https),
                    );
                }
                Err(err) => {
                    tracing::warn!(pool = %id, "reencrypt pool left without TLS client: {err}")
                }
            }
        }
    }
    let resolver = tls::CertificateResolver::new(&table.certificates, default_key);
    let tls = (!resolver.is_empty()).then(|| tls::server_config(resolver));
    RouterState {
        table,
        pools,
        unrouted: metrics.pool(""),
        https_clients,
        connections,
        tls,
    }
}
