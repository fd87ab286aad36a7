//! How long instances take to provision, learnt from the status history BMM reports for the
//! instances already Ready, per site and instance type. The machine controller polls an
//! instance in progress when it is expected to be Ready
//! ([`poll_expecting`](nephrite_bmm::decide::poll_expecting)) instead of on a schedule that
//! knows nothing of it: a thousand instances of one type take one or two polls each, and
//! each is seen Ready within a few percent of the moment it is.
//!
//! What to expect and what is news is `nephrite_bmm`'s ([`ProvisioningSamples`]); this keeps
//! one per key and, on news, signals (`learnt`) that every machine be looked at again so that
//! polls scheduled before it came move to when their instance is due.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::channel::mpsc;
use nephrite_bmm::decide::ProvisioningSamples;

/// Provisioning times per `site/instance type`, and the signal that an expectation changed.
pub(super) struct ProvisioningTimes {
    samples: Mutex<HashMap<String, ProvisioningSamples>>,
    learnt: mpsc::UnboundedSender<()>,
}

impl ProvisioningTimes {
    /// An empty memory, and the stream that yields when an expectation is learnt or drops.
    pub(super) fn new() -> (ProvisioningTimes, mpsc::UnboundedReceiver<()>) {
        let (learnt, rx) = mpsc::unbounded();
        (
            ProvisioningTimes {
                samples: Mutex::default(),
                learnt,
            },
            rx,
        )
    }

    /// What an instance of `key` is expected to take.
    pub(super) fn expected(&self, key: &str) -> Option<Duration> {
        self.samples.lock().ok()?.get(key)?.expected()
    }

    /// Remembers that an instance of `key` took `took`; signals when that was news
    /// ([`ProvisioningSamples::record`]).
    pub(super) fn record(&self, key: &str, took: Duration) {
        let news = match self.samples.lock() {
            Ok(mut samples) => samples.entry(key.to_string()).or_default().record(took),
            Err(_) => return,
        };
        if news {
            let _ = self.learnt.unbounded_send(());
        }
    }
}

/// The key of a machine's instances: its site and instance type (`machine` for targeted
/// machines, which share no type).
pub(super) fn key(site: &str, instance_type: Option<&str>) -> String {
    format!("{site}/{}", instance_type.unwrap_or("machine"))
}

#[cfg(test)]
mod tests;
