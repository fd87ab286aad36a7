//! `bmm-sim`: a simulator of the part of the NVIDIA Bare Metal Manager REST API that
//! bmm-provider uses, for development, demos and tests; its own daemon, so the provider depends
//! on it only in its tests.
//!
//! Faithful to `api/openapi.yaml`: request bodies are validated against the operation's schema
//! (required, type, enum, format) and refused with 400 and a `CarbideAPIError`; a missing,
//! invalid or expired HS256 bearer token gets 401 the same way; creates answer 201, deletes 202
//! (204 for subnets); lists page with `pageNumber`/`pageSize` and the `X-Pagination` header.
//! Beyond the spec, as the platform behaves: 409 on a duplicate name (with `data.id`), status
//! progressions with delays, deletion refused while dependants exist, machines allocated from
//! and returned to the pool. Faults (5xx/429, latency, lost responses) can be injected;
//! `/metrics` counts the objects ever created per kind.
//!
//! - [`openapi`]: the embedded OpenAPI description and JSON-schema validation against it.
//! - [`contract`]: a proxy that checks every request and response against that description,
//!   for tests of clients (the provider's) and of the simulator itself.
//! - [`auth`]: the bearer tokens; [`world`]: the simulated platform.
//! - [`cli`]: the `bmm-sim` command line.

pub mod auth;
pub mod cli;
pub mod contract;
mod http_api;
mod metrics;
pub mod openapi;
mod tls;
pub mod world;

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use http_api::router;
pub use tls::{SimTlsError, server_config};
pub use world::{Delays, INSTANCE_TYPE_ID, Kind, SITE_ID, World};

/// How the simulator behaves.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// HS256 secret of the bearer tokens (random by default: no well-known secret).
    pub jwt_secret: String,
    /// Time for an instance to become Ready (and to go after a delete).
    pub provision_delay: Duration,
    /// Time for a network object to become Ready (and to go after a delete).
    pub network_delay: Duration,
    /// Time an instance stays `Rebooting` after a reboot, a power cycle or a power-on.
    pub reboot_delay: Duration,
    /// Probability that a request is answered with an injected 429/502/503/504 before it is
    /// processed.
    pub fault_rate: f64,
    /// Probability that a create is processed but its answer replaced by a 503 (the client
    /// must find and adopt the object).
    pub lost_response_rate: f64,
    /// Latency added to every request.
    pub latency: Duration,
    /// Machines of the instance type.
    pub machines: usize,
    /// `Retry-After` (whole seconds, rounded up) sent with injected 429s and 503s.
    pub retry_after: Option<Duration>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            jwt_secret: auth::random_secret(),
            provision_delay: Duration::from_secs(5),
            network_delay: Duration::from_secs(1),
            reboot_delay: Duration::from_secs(2),
            fault_rate: 0.0,
            lost_response_rate: 0.0,
            latency: Duration::ZERO,
            machines: 64,
            retry_after: None,
        }
    }
}

impl SimConfig {
    /// A simulator for tests, with tokens signed with `jwt_secret`: instances Ready after
    /// 300 ms, network objects after 100 ms, the rest as [`SimConfig::default`].
    pub fn quick(jwt_secret: &str) -> SimConfig {
        SimConfig {
            jwt_secret: jwt_secret.into(),
            provision_delay: Duration::from_millis(300),
            network_delay: Duration::from_millis(100),
            ..SimConfig::default()
        }
    }
}

/// The simulator's shared state.
#[derive(Clone)]
pub struct Sim {
    /// The configuration.
    pub config: Arc<SimConfig>,
    /// The platform.
    pub world: Arc<Mutex<World>>,
    /// Counters.
    pub metrics: Arc<metrics::SimMetrics>,
    /// Requests still to be refused, and with which status (see [`Sim::fail_next`]).
    refused: Arc<AtomicU64>,
    refusal_status: Arc<AtomicU16>,
}

impl Sim {
    /// A fresh simulator.
    pub fn new(config: SimConfig) -> Sim {
        let world = World::new(
            Delays {
                provision: config.provision_delay,
                network: config.network_delay,
                reboot: config.reboot_delay,
            },
            config.machines,
        );
        Sim {
            config: Arc::new(config),
            world: Arc::new(Mutex::new(world)),
            metrics: Arc::new(metrics::SimMetrics::new()),
            refused: Arc::default(),
            refusal_status: Arc::new(AtomicU16::new(429)),
        }
    }

    /// Answers the next `n` requests 429 Too Many Requests (with `Retry-After` when
    /// [`SimConfig::retry_after`] is set), as a platform shedding load does.
    pub fn throttle_next(&self, n: u64) {
        self.fail_next(n, 429);
    }

    /// Answers the next `n` requests with `status` (a 5xx storm, a 429 burst) before they are
    /// processed; `n = 0` ends a storm.
    pub fn fail_next(&self, n: u64, status: u16) {
        self.refusal_status.store(status, Ordering::SeqCst);
        self.refused.store(n, Ordering::SeqCst);
    }

    /// The status to refuse this request with, when it is one of those [`Sim::fail_next`]
    /// asked to refuse.
    fn take_refused(&self) -> Option<u16> {
        self.refused
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .ok()
            .map(|_| self.refusal_status.load(Ordering::SeqCst))
    }

    /// The id of the simulated site.
    pub fn site_id(&self) -> String {
        self.world.lock().map(|w| w.site_id()).unwrap_or_default()
    }

    /// The id of the instance type.
    pub fn instance_type_id(&self) -> String {
        self.world
            .lock()
            .map(|w| {
                w.instance_type["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default()
    }

    /// Objects ever created of a kind.
    pub fn created(&self, kind: Kind) -> u64 {
        self.world
            .lock()
            .map(|w| w.created.get(&kind).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Live objects of a kind (after advancing time).
    pub fn live(&self, kind: Kind) -> usize {
        self.world
            .lock()
            .map(|mut w| {
                w.advance();
                w.count(kind)
            })
            .unwrap_or(0)
    }

    /// Requests answered so far (faults included).
    pub fn requests_answered(&self) -> u64 {
        self.metrics.answered.get()
    }

    /// Requests so far per `METHOD route` (e.g. `GET instance/{instanceId}`), faults included.
    pub fn requests_by_path(&self) -> Vec<(String, u64)> {
        self.metrics.requests_by_path()
    }

    /// When each of the most recent requests came (up to 100,000), oldest first, with its
    /// `METHOD route`, faults included.
    pub fn request_log(&self) -> Vec<(std::time::Instant, String)> {
        self.metrics.request_log()
    }

    /// Requests being answered right now.
    pub fn requests_in_flight(&self) -> i64 {
        self.metrics.in_flight.get()
    }

    /// Faults injected so far.
    pub fn faults_injected(&self) -> u64 {
        self.metrics.faults.get()
    }

    /// The id of the live instance named `name`, if any.
    pub fn instance_named(&self, name: &str) -> Option<String> {
        let world = self.world.lock().ok()?;
        world
            .list(Kind::Instance)
            .iter()
            .find(|i| i["name"].as_str() == Some(name))
            .and_then(|i| i["id"].as_str().map(str::to_string))
    }

    /// Out of band: puts an instance in `Error` (see [`World::fail_instance`]).
    pub fn fail_instance(&self, id: &str) -> bool {
        self.world.lock().is_ok_and(|mut w| w.fail_instance(id))
    }

    /// Out of band: removes an instance at once (see [`World::remove_instance`]).
    pub fn remove_instance(&self, id: &str) -> bool {
        self.world.lock().is_ok_and(|mut w| w.remove_instance(id))
    }

    /// Out of band: switches the power of the instance's tray (`on`, `off`, `cycle`, …, as
    /// `PATCH tray/{id}/power` takes them). Returns whether the instance has a tray.
    pub fn power_instance(&self, id: &str, state: &str) -> bool {
        self.world
            .lock()
            .is_ok_and(|mut w| w.power_instance(id, state))
    }

    /// The status of an instance (after advancing time).
    pub fn instance_status(&self, id: &str) -> Option<String> {
        let mut world = self.world.lock().ok()?;
        world.advance();
        world
            .get(Kind::Instance, id)
            .and_then(|i| i["status"].as_str().map(str::to_string))
    }

    /// Serves in the background on a free loopback port for as long as the runtime runs;
    /// returns its URL (`http://127.0.0.1:PORT`).
    pub async fn serve_on_loopback(&self) -> std::io::Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(self.clone().serve(listener, std::future::pending()));
        Ok(url)
    }

    /// Serves on a listener until `shutdown` resolves.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, router(self))
            .with_graceful_shutdown(shutdown)
            .await
    }
}
