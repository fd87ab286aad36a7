//! Jittered exponential backoff for transient failures.

use std::time::Duration;

/// How often and how patiently transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total (1 = no retry).
    pub max_attempts: u32,
    /// The first delay.
    pub base: Duration,
    /// The longest delay (60 s by default).
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            base: Duration::from_millis(200),
            cap: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (0-based): `base · 2^attempt`, capped, then a
    /// random point in its upper half so that many clients do not retry in step. `unit` is a
    /// random number in `[0, 1)`.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        let exp = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt.min(30)));
        let ceiling = exp.min(self.cap);
        ceiling
            .mul_f64(0.5 + 0.5 * unit.clamp(0.0, 1.0))
            .min(self.cap)
    }

    /// The delay with a fresh random jitter.
    pub fn jittered(&self, attempt: u32) -> Duration {
        self.delay(attempt, fastrand::f64())
    }

    /// The delay before retry number `attempt` when the server asked for `retry_after`
    /// (`Retry-After` on a 429 or 503): never sooner than it asked, nor than the backoff,
    /// and at most the cap.
    pub fn honouring(&self, attempt: u32, unit: f64, retry_after: Option<Duration>) -> Duration {
        self.delay(attempt, unit)
            .max(retry_after.unwrap_or_default())
            .min(self.cap)
    }
}

/// Reads a `Retry-After` header (RFC 9110 §10.2.3): delay-seconds (`120`) or an HTTP-date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, a wait until then, zero when past); `None` when it is
/// neither.
pub fn retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    Some(Duration::try_from(at.duration_since(now)).unwrap_or_default())
}

#[cfg(test)]
mod tests;
