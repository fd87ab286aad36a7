//! How often the controllers look at BMM.
//!
//! kube-runtime reconciles an object on every change of it — including the status the
//! controller itself just wrote — and on every event a related object's watch maps to it. A
//! reconcile costs BMM API calls, so [`Pacing`] remembers, per object, a fingerprint of
//! everything the reconcile reads from Kubernetes (the object without its status, and what it
//! depends on: the owner `Machine`, the `Cluster`, the infrastructure cluster) and when its
//! requeue falls due: a reconcile whose inputs are unchanged and whose time has not come is
//! answered without calling BMM. Our own status writes are thus free, and a poll happens when
//! it is due, not whenever something nearby moved.
//!
//! [`poll_after`] spaces the polls of something in progress by its age: at least the
//! configured interval, a quarter of the time it has been in progress (so a long provisioning
//! is observed at most 25% late, with a number of polls that grows with the logarithm of its
//! duration), at most the cap, with ±10% jitter so a thousand machines created together do not
//! poll in step.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::controller::Action;

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Reconcile again after this long.
    After(Duration),
    /// Reconcile again only when an input changes.
    Change,
}

impl From<Next> for Action {
    fn from(next: Next) -> Action {
        match next {
            Next::After(d) => Action::requeue(d),
            Next::Change => Action::await_change(),
        }
    }
}

struct Paced {
    inputs: u64,
    due: Option<Instant>,
    /// When it was recorded (the reconcile finished).
    at: Instant,
}

/// Per object: the fingerprint of the inputs of its last reconcile and when it is due again.
#[derive(Default)]
pub(super) struct Pacing(Mutex<HashMap<String, Paced>>);

impl Pacing {
    /// When `key` was reconciled with the same `inputs` and neither its requeue nor `sooner`
    /// is due yet: what is left of the wait (`None`: reconcile now). `sooner` is when
    /// something is expected to have happened (an instance Ready); it counts only when the
    /// last reconcile came before it, so an overdue expectation brings one reconcile forward,
    /// not a loop of them.
    pub(super) fn unchanged(
        &self,
        key: &str,
        inputs: u64,
        now: Instant,
        sooner: Option<Instant>,
    ) -> Option<Next> {
        let entries = self.0.lock().ok()?;
        let paced = entries.get(key).filter(|p| p.inputs == inputs)?;
        let sooner = sooner.filter(|s| *s > paced.at);
        let due = match (paced.due, sooner) {
            (Some(due), Some(sooner)) => Some(due.min(sooner)),
            (due, sooner) => due.or(sooner),
        };
        match due {
            None => Some(Next::Change),
            Some(due) if due > now => Some(Next::After(due - now)),
            Some(_) => None,
        }
    }

    /// Records a finished reconcile of `key`.
    pub(super) fn record(&self, key: &str, inputs: u64, next: Next, now: Instant) {
        if let Ok(mut entries) = self.0.lock() {
            let due = match next {
                Next::After(d) => Some(now + d),
                Next::Change => None,
            };
            entries.insert(
                key.to_string(),
                Paced {
                    inputs,
                    due,
                    at: now,
                },
            );
        }
    }

    /// Forgets `key` (the object is gone).
    pub(super) fn forget(&self, key: &str) {
        if let Ok(mut entries) = self.0.lock() {
            entries.remove(key);
        }
    }
}

/// A fingerprint of the JSON form of `parts` (what a reconcile reads).
pub(super) fn fingerprint(parts: &impl serde::Serialize) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_string(parts)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

/// The age of something that started at `since` (RFC 3339), seen at `now`; zero when unknown
/// or in the future.
pub(super) fn age_since(since: Option<&str>, now: jiff::Timestamp) -> Duration {
    since
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .and_then(|t| Duration::try_from(now.duration_since(t)).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
