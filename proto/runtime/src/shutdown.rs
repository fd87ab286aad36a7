//! One shutdown path for signals and programmatic triggers.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

/// Why shutdown began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownReason {
    /// [`ShutdownHandle::trigger`] was called.
    Requested,
    /// The process received a signal, named here (`"SIGTERM"`, `"SIGINT"`).
    Signal(&'static str),
}

impl fmt::Display for ShutdownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShutdownReason::Requested => f.write_str("shutdown requested"),
            ShutdownReason::Signal(name) => write!(f, "received {name}"),
        }
    }
}

/// A cloneable trigger and observer of a daemon's shutdown.
///
/// SIGTERM/SIGINT (see [`ShutdownHandle::listen_for_signals`]) and
/// [`ShutdownHandle::trigger`] end in the same place: the first trigger wins,
/// later ones are ignored, and everything waiting in
/// [`ShutdownHandle::triggered`] wakes up.
#[derive(Clone)]
pub struct ShutdownHandle {
    state: Arc<watch::Sender<Option<ShutdownReason>>>,
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle")
            .field("reason", &*self.state.borrow())
            .finish()
    }
}

impl Default for ShutdownHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl ShutdownHandle {
    /// A handle that has not been triggered.
    pub fn new() -> Self {
        ShutdownHandle {
            state: Arc::new(watch::channel(None).0),
        }
    }

    /// Begin shutdown, exactly as SIGTERM would.
    pub fn trigger(&self) {
        self.trigger_with(ShutdownReason::Requested);
    }

    /// Begin shutdown with a reason; a no-op when shutdown already began.
    pub fn trigger_with(&self, reason: ShutdownReason) {
        self.state.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Why shutdown began, or `None` while running.
    pub fn reason(&self) -> Option<ShutdownReason> {
        *self.state.borrow()
    }

    /// Whether shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        self.reason().is_some()
    }

    /// Resolves once shutdown has begun (immediately if it already has).
    pub async fn triggered(&self) -> ShutdownReason {
        let mut rx = self.state.subscribe();
        loop {
            if let Some(reason) = *rx.borrow_and_update() {
                return reason;
            }
            if rx.changed().await.is_err() {
                // unreachable while `self` holds the sender; treat as a request
                return ShutdownReason::Requested;
            }
        }
    }

    /// Spawn a task that triggers this handle on SIGTERM or SIGINT. The task
    /// ends after the first signal or when shutdown begins for another reason.
    ///
    /// Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// Fails when the signal handlers cannot be installed.
    pub fn listen_for_signals(&self) -> std::io::Result<tokio::task::JoinHandle<()>> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let handle = self.clone();
        Ok(tokio::spawn(async move {
            let reason = tokio::select! {
                _ = term.recv() => ShutdownReason::Signal("SIGTERM"),
                _ = int.recv() => ShutdownReason::Signal("SIGINT"),
                _ = handle.triggered() => return,
            };
            tracing::info!(%reason, "shutdown signal received");
            handle.trigger_with(reason);
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_trigger_wins_and_wakes_waiters() {
        let handle = ShutdownHandle::new();
        assert!(!handle.is_triggered());
        let waiter = tokio::spawn({
            let handle = handle.clone();
            async move { handle.triggered().await }
        });
        handle.trigger_with(ShutdownReason::Signal("SIGTERM"));
        handle.trigger();
        assert_eq!(
            waiter.await.expect("waiter"),
            ShutdownReason::Signal("SIGTERM")
        );
        assert_eq!(handle.reason(), Some(ShutdownReason::Signal("SIGTERM")));
        // late waiters resolve immediately
        assert_eq!(handle.triggered().await, ShutdownReason::Signal("SIGTERM"));
    }
}
