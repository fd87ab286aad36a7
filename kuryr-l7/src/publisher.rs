//! The controller's current rules, handed from the source to the drivers and the rules
//! service as domain values.
//!
//! A [`Publisher`] holds the current [`Snapshot`] (translation, compiled table, read errors).
//! A new one replaces it only when its content differs, and always whole (a snapshot is built
//! completely before it is published, so no driver or router ever sees half of one). How the
//! rules travel to routers (protobuf, versions by content hash) is the rules service's
//! business; what a router said it serves comes back as a [`RouterAck`].

use std::sync::Arc;

use tokio::sync::watch;

use crate::source::Snapshot;

/// Publishes snapshots to whoever follows them (the rules service, the HAProxy driver).
#[derive(Clone)]
pub struct Publisher {
    sender: Arc<watch::Sender<Arc<Snapshot>>>,
}

impl Default for Publisher {
    fn default() -> Self {
        Self::new(Arc::default())
    }
}

impl Publisher {
    /// A publisher whose first snapshot is `snapshot`.
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        let (sender, _) = watch::channel(snapshot);
        Publisher {
            sender: Arc::new(sender),
        }
    }

    /// Makes `snapshot` the current one; returns whether its content differs from the one
    /// before (the same content is not published again).
    pub fn publish(&self, snapshot: Arc<Snapshot>) -> bool {
        let changed = self.sender.send_if_modified(|current| {
            if current.translation == snapshot.translation
                && current.read_errors == snapshot.read_errors
            {
                false
            } else {
                *current = snapshot;
                true
            }
        });
        if changed {
            let current = self.current();
            let config = &current.translation.config;
            tracing::info!(
                http = config.http.policies().len(),
                https = config.https.policies().len(),
                pools = config.pools.len(),
                "published new rules"
            );
        }
        changed
    }

    /// The current snapshot.
    pub fn current(&self) -> Arc<Snapshot> {
        self.sender.borrow().clone()
    }

    /// Follows the current snapshot.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.sender.subscribe()
    }
}

/// What a router last said it serves (the rules API's value, defined in the client crate).
pub use kuryr_l7_client::RouterAck;
