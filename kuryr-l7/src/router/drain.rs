//! Draining a router: stop accepting, let what is running finish, for at most a grace period.
//!
//! What a drain waits for is counted as *busy*: an HTTP/1 request of the router's own codec
//! (its connection closes after the answer once draining; an idle keep-alive connection is
//! not waited for), a connection hyper serves (h2c, terminated TLS: shut down gracefully,
//! which ends idle ones at once and lets streams in flight finish), a TLS passthrough stream
//! and an upgrade tunnel. Counting a request costs two atomic operations; nothing on the request path locks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// Whether a router is draining, and what is still busy.
#[derive(Debug)]
pub(crate) struct Drain {
    /// Set once draining starts: the cheap check of the request path.
    started: AtomicBool,
    /// The same, to wait on.
    signal: watch::Sender<bool>,
    busy: AtomicUsize,
    idle: Notify,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            started: AtomicBool::new(false),
            signal: watch::Sender::new(false),
            busy: AtomicUsize::new(0),
            idle: Notify::new(),
        }
    }
}

impl Drain {
    /// Whether draining has started.
    pub(crate) fn is_draining(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// Resolves once draining starts.
    pub(crate) async fn started(&self) {
        let mut signal = self.signal.subscribe();
        let _ = signal.wait_for(|started| *started).await;
    }

    /// Counts something busy until the guard is dropped.
    pub(crate) fn busy(&self) -> Busy<'_> {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self)
    }

    /// Starts draining, then waits until nothing is busy or `grace` has passed: how many were
    /// still busy.
    pub(crate) async fn run(&self, grace: Duration) -> usize {
        self.started.store(true, Ordering::SeqCst);
        self.signal.send_replace(true);
        let idle = async {
            loop {
                let notified = self.idle.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.busy.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(grace, idle).await;
        self.busy.load(Ordering::SeqCst)
    }
}

/// Something busy (see the module documentation).
pub(crate) struct Busy<'a>(&'a Drain);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if self.0.busy.fetch_sub(1, Ordering::SeqCst) == 1 && self.0.is_draining() {
            self.0.idle.notify_waiters();
        }
    }
}
