//! An in-memory Kubernetes API server for tests, development and demos.
//!
//! It speaks the Kubernetes REST protocol the way kube-rs and kubectl use it (discovery and
//! `/openapi/v3`, CRUD, list/watch with resourceVersions and bookmarks, merge/JSON/apply
//! patches, the status subresource, finalizers, owner-reference garbage collection,
//! CustomResourceDefinitions), refuses what a real cluster refuses (invalid names, labels and
//! annotations, bodies over 3 MiB, unknown fields under `fieldValidation=Strict`), keeps every
//! object in memory as a `nephrite-krm` `Object`, and lets tests inject faults and count
//! requests.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use nephrite_test_apiserver::TestApiServer;
//! let server = TestApiServer::start().await?;
//! let client = server.client()?;
//! // ... run a controller against `client` ...
//! assert_eq!(server.requests().count("patch", "widgets"), 0);
//! server.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! The crate README lists what is implemented and what is deliberately left out.

mod error;
mod faults;
mod http;
mod openapi;
mod resources;
mod schema;
mod selector;
mod store;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::{ApiError, Error};
pub use faults::{Faults, Requests};

/// Options for a [`TestApiServer`].
#[derive(Debug, Clone)]
pub struct Builder {
    listen: SocketAddr,
    bookmark_interval: Duration,
    event_history: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            bookmark_interval: Duration::from_secs(5),
            event_history: 10_000,
        }
    }
}

impl Builder {
    /// The address to listen on (default `127.0.0.1:0`, a free loopback port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK (default 5 s).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// How many events (across all kinds) are kept for watches that resume from a
    /// resourceVersion (default 10 000). A watch from an older resourceVersion gets a
    /// 410 Expired ERROR event.
    pub fn event_history(mut self, events: usize) -> Self {
        self.event_history = events.max(1);
        self
    }

    /// Binds the listen address and starts serving in a background task.
    pub async fn start(self) -> Result<TestApiServer, Error> {
        let listener = TcpListener::bind(self.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: self.listen,
                source,
            })?;
        self.serve(listener)
    }

    /// Starts serving on an already bound listener.
    pub fn serve(self, listener: TcpListener) -> Result<TestApiServer, Error> {
        let addr = listener.local_addr().map_err(Error::LocalAddr)?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let faults = Faults::default();
        let requests = Requests::default();
        let shared = Arc::new(http::Shared {
            store: Mutex::new(store::Store::new(self.event_history)),
            faults: faults.clone(),
            requests: requests.clone(),
            bookmark_interval: self.bookmark_interval,
            shutdown: stop_rx.clone(),
        });
        let app = http::router(shared.clone());
        let mut stop = stop_rx;
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
        });
        Ok(TestApiServer {
            addr,
            shared,
            faults,
            requests,
            stop: stop_tx,
            task: Some(task),
        })
    }
}

/// A running server. Dropping it asks the server to stop; [`TestApiServer::shutdown`] also
/// waits for it.
#[derive(Debug)]
pub struct TestApiServer {
    addr: SocketAddr,
    shared: Arc<http::Shared>,
    faults: Faults,
    requests: Requests,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestApiServer {
    /// Options for a server.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts a server with default options on a free loopback port.
    pub async fn start() -> Result<Self, Error> {
        Builder::default().start().await
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig document for this server (no credentials, namespace `default`), for a
    /// binary started with `KUBECONFIG` or `--kubeconfig`.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: t, cluster: {{server: '{}'}}}}]\n\
             contexts: [{{name: t, context: {{cluster: t, user: t, namespace: default}}}}]\n\
             current-context: t\nusers: [{{name: t, user: {{}}}}]\n",
            self.url()
        )
    }

    /// A `kube::Client` for this server, default namespace `default`.
    pub fn client(&self) -> Result<kube::Client, Error> {
        let url = self.url();
        let uri = url.parse().map_err(|source| Error::Url {
            url: url.clone(),
            source,
        })?;
        let config = kube::Config::new(uri);
        kube::Client::try_from(config).map_err(|source| Error::Client { url, source })
    }

    /// Fault injection.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Request counts.
    pub fn requests(&self) -> &Requests {
        &self.requests
    }

    /// Ends every open watch of `resource` (a plural, or `*` for all) with a 410 Expired
    /// ERROR event, so watchers must re-list; returns how many watches were ended.
    /// Combine with [`Faults::expire_next_watch`] to also fail the watch that follows.
    pub fn expire_watches(&self, resource: &str) -> usize {
        self.shared.store().expire_watchers(resource)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().current_rv()
    }

    /// Stops serving (open watches end) and waits for the server task.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => task.await.map_err(Error::Join)?.map_err(Error::Serve),
            None => Ok(()),
        }
    }

    /// Waits until the server stops (after [`TestApiServer::stop_handle`] is used, or forever).
    pub async fn wait(mut self) -> Result<(), Error> {
        match self.task.take() {
            Some(task) => task.await.map_err(Error::Join)?.map_err(Error::Serve),
            None => Ok(()),
        }
    }

    /// A handle that stops the server when triggered (e.g. from a signal handler).
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Stops a [`TestApiServer`] from elsewhere.
#[derive(Debug, Clone)]
pub struct StopHandle(watch::Sender<bool>);

impl StopHandle {
    /// Asks the server to stop: new connections are refused and open watches end.
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}
