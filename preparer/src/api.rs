//! The Data API (`nephrite.preparer.data.v1.Data`) over a [`Store`]: argument checks (ids,
//! patterns, YAML with document and line), package-derived fields (prepared, approved, error,
//! metadata), modifications, and `Watch`. Every successful write wakes the preparation loop
//! and the watchers through [`Changes`].
//!
//! [`DataService`]'s calls take and return the Data API's domain values
//! (`nephrite_preparer_client`); two edges expose them: `grpc` serves them as the gRPC
//! service (the only module here that names protobuf), and `in_process` implements the
//! client's [`DataApi`](nephrite_preparer_client::DataApi) trait over them, for callers in
//! this process (the web dashboard) that would otherwise dial the daemon itself.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::store::Store;

pub use batch::BatchWrites;
pub use deployments::Writer;
pub use grpc::server;
pub use leases::DEFAULT_NAMED_LEASE;
pub use watching::{FeedStream, SLOW_WATCHER, WATCH_BUFFER, Watchers};

mod batch;
mod catalog;
mod convert;
mod deployments;
mod grpc;
mod history;
mod in_process;
mod leases;
mod modifications;
mod watching;

/// Default modification lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A counter bumped on every write; the loop and watchers wait on it.
#[derive(Debug, Clone)]
pub struct Changes(Arc<watch::Sender<u64>>);

impl Default for Changes {
    fn default() -> Self {
        Changes(Arc::new(watch::channel(0).0))
    }
}

impl Changes {
    /// Signals a change.
    pub fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that wakes on the next change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// The Data API over a store: its calls, whichever edge they arrive through.
#[derive(Clone)]
pub struct DataService {
    store: Arc<dyn Store>,
    changes: Changes,
    auto_approve: bool,
    shutdown: Option<nephrite_runtime::ShutdownHandle>,
    watchers: Watchers,
    batch_writes: BatchWrites,
}

impl DataService {
    /// A service over `store`; `changes` is shared with the loop.
    pub fn new(store: Arc<dyn Store>, changes: Changes, auto_approve: bool) -> Self {
        DataService {
            store,
            changes,
            auto_approve,
            shutdown: None,
            watchers: Watchers::default(),
            batch_writes: BatchWrites::default(),
        }
    }

    /// The deployments its batches wrote, by kind of write (register them on the server).
    pub fn batch_writes(&self) -> &BatchWrites {
        &self.batch_writes
    }

    /// Its `Watch` streams share `watchers` (their patience, store reads and metrics).
    pub fn with_watchers(mut self, watchers: Watchers) -> Self {
        self.watchers = watchers;
        self
    }

    /// Ends `Watch` streams when `shutdown` triggers, so the server can drain.
    pub fn with_shutdown(mut self, shutdown: nephrite_runtime::ShutdownHandle) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// The revision a listing reflects, read just before the listing's own read: revisions
    /// become visible in commit order (the store's promise), so every change up to it is
    /// committed and seen by the read that follows, whichever connection makes it. A change
    /// committed in between shows in the listing and is sent again by a `Watch` from this
    /// revision, which leaves the watcher's rows the same.
    async fn listing_revision(&self) -> Result<u64, crate::errors::ApiError> {
        let revision = self.store.current_revision().await?;
        Ok(u64::try_from(revision).unwrap_or(0))
    }
}
