//! Per-object backoff after failed reconciles: each failure of an object doubles its wait
//! (jittered, capped, [`RetryPolicy::delay`]), a success forgets its failures, and one
//! object's failures never slow another's reconciles.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::client::RetryPolicy;

/// Failures in a row per object key.
#[derive(Debug)]
pub(crate) struct ErrorBackoff {
    policy: RetryPolicy,
    failures: Mutex<HashMap<String, u32>>,
}

impl ErrorBackoff {
    /// A backoff from `base` doubling up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> ErrorBackoff {
        ErrorBackoff {
            policy: RetryPolicy {
                max_attempts: u32::MAX,
                base,
                cap,
            },
            failures: Mutex::default(),
        }
    }

    /// Records a failure of `key`; how long to wait before trying it again.
    pub fn failed(&self, key: &str) -> Duration {
        let attempt = match self.failures.lock() {
            Ok(mut m) => {
                let n = m.entry(key.to_string()).or_insert(0);
                let attempt = *n;
                *n = n.saturating_add(1);
                attempt
            }
            Err(_) => 0,
        };
        self.policy.jittered(attempt)
    }

    /// Records a success of `key`: its next failure waits the base again.
    pub fn succeeded(&self, key: &str) {
        if let Ok(mut m) = self.failures.lock() {
            m.remove(key);
        }
    }

    /// Failures in a row of `key`.
    #[cfg(test)]
    fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .map(|m| m.get(key).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_per_object_up_to_the_cap_and_reset_on_success() {
        let b = ErrorBackoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let waits: Vec<Duration> = (0..6).map(|_| b.failed("a")).collect();
        // Each wait lies in the upper half of base · 2^n, capped.
        for (n, w) in waits.iter().enumerate() {
            let ceiling = Duration::from_millis(100 * (1 << n)).min(Duration::from_secs(1));
            assert!(*w >= ceiling / 2 && *w <= ceiling, "{n}: {w:?}");
        }
        // Another object starts from the base.
        assert!(b.failed("b") <= Duration::from_millis(100));
        b.succeeded("a");
        assert_eq!(b.failures("a"), 0);
        assert!(b.failed("a") <= Duration::from_millis(100));
        assert_eq!(b.failures("b"), 1);
    }
}
