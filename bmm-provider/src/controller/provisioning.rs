//! How long instances take to provision, learnt from the status history BMM reports for the
//! instances already Ready, per site and instance type. The machine controller polls an
//! instance in progress when it is expected to be Ready
//! ([`poll_expecting`](nephrite_bmm::decide::poll_expecting)) instead of on a schedule that
//! knows nothing of it: a thousand instances of one type take one or two polls each, and
//! each is seen Ready within a few percent of the moment it is.
//!
//! The expectation is the shortest of the last [`SAMPLES`] provisioning times (a fast outlier
//! costs an early poll, never a late one). When it is first learnt, or drops by more than a
//! tenth, every machine is looked at again (`learnt`) so that polls scheduled before it came
//! move to when their instance is due.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use futures::channel::mpsc;

/// Provisioning times remembered per key.
pub(super) const SAMPLES: usize = 16;

/// Provisioning times per `site/instance type`, and the signal that an expectation changed.
pub(super) struct ProvisioningTimes {
    samples: Mutex<HashMap<String, VecDeque<Duration>>>,
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
        let samples = self.samples.lock().ok()?;
        samples.get(key)?.iter().min().copied()
    }

    /// Remembers that an instance of `key` took `took`; signals when the expectation was new
    /// or dropped by more than a tenth.
    pub(super) fn record(&self, key: &str, took: Duration) {
        let Ok(mut samples) = self.samples.lock() else {
            return;
        };
        let seen = samples.entry(key.to_string()).or_default();
        let before = seen.iter().min().copied();
        seen.push_back(took);
        while seen.len() > SAMPLES {
            seen.pop_front();
        }
        let after = seen.iter().min().copied();
        let news = match (before, after) {
            (None, Some(_)) => true,
            (Some(b), Some(a)) => a < b.mul_f64(0.9),
            _ => false,
        };
        drop(samples);
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
