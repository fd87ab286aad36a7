//! When to look at an instance again: polls spaced by its age, so an instance that takes a
//! minute to provision costs a handful of API calls and is seen at most a quarter of its age
//! late.

use std::time::Duration;

/// The wait before the next poll of something that has been in progress for `age`: a quarter
/// of its age, within `[poll, cap]` (a `cap` below `poll` does not shorten it), jittered by
/// ±10% with `unit` in `[0, 1)` (the caller's random draw).
pub fn poll_after(poll: Duration, cap: Duration, age: Duration, unit: f64) -> Duration {
    let base = (age / 4).max(poll).min(cap.max(poll));
    base.mul_f64(0.9 + 0.2 * unit.clamp(0.0, 1.0))
}

/// The wait before the next poll of something in progress for `age` when others of its kind
/// took `expected` (learnt from their status history): none before then — the poll lands
/// when it is expected to be done, up to 2% of `expected` later (jittered with `unit` so a
/// batch created together does not poll in step); once overdue, [`poll_after`] on the
/// overdue time (the interval, backing off to the cap); without an expectation,
/// [`poll_after`] on the age.
pub fn poll_expecting(
    poll: Duration,
    cap: Duration,
    age: Duration,
    expected: Option<Duration>,
    unit: f64,
) -> Duration {
    match expected {
        Some(e) if age < e => (e - age) + e.mul_f64(0.02 * unit.clamp(0.0, 1.0)),
        Some(e) => poll_after(poll, cap, age - e, unit),
        None => poll_after(poll, cap, age, unit),
    }
}

/// How long instances of one kind (a site and instance type) took to provision, from their
/// status history: the expectation is the shortest of the last [`ProvisioningSamples::KEPT`]
/// times, so a fast outlier costs an early poll, never a late one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProvisioningSamples(std::collections::VecDeque<Duration>);

impl ProvisioningSamples {
    /// Provisioning times remembered.
    pub const KEPT: usize = 16;

    /// What an instance of this kind is expected to take; `None` before any was seen.
    pub fn expected(&self) -> Option<Duration> {
        self.0.iter().min().copied()
    }

    /// Remembers that an instance took `took`. True when that is news worth re-planning polls
    /// for: the first expectation, or one that dropped by more than a tenth.
    pub fn record(&mut self, took: Duration) -> bool {
        let before = self.expected();
        self.0.push_back(took);
        while self.0.len() > Self::KEPT {
            self.0.pop_front();
        }
        match (before, self.expected()) {
            (None, Some(_)) => true,
            (Some(b), Some(a)) => a < b.mul_f64(0.9),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
