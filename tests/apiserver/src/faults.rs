//! Fault injection and request counting for tests.
//!
//! Requests are identified by a verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
//! `delete`, `deletecollection`) and a resource: the plural (`widgets`), or `plural/status`
//! for the status subresource. Rules match a verb and a resource exactly, or `*` for any.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

fn matches(pattern: &str, value: &str) -> bool {
    pattern == "*" || pattern == value
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug, Clone)]
struct FailRule {
    verb: String,
    resource: String,
    remaining: usize,
    code: u16,
}

#[derive(Debug, Clone)]
struct LatencyRule {
    verb: String,
    resource: String,
    latency: Duration,
}

#[derive(Debug, Default)]
struct FaultRules {
    failures: Vec<FailRule>,
    latencies: Vec<LatencyRule>,
    expire_watches: Vec<(String, usize)>,
}

/// What the server does to one request because of the injected faults.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct FaultDecision {
    /// Sleep this long before handling.
    pub latency: Option<Duration>,
    /// Fail with this HTTP status code.
    pub fail: Option<u16>,
    /// (watch only) answer with a 410 Expired ERROR event.
    pub expire_watch: bool,
}

/// Injectable faults. Cheap to clone; clones share the rules.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<FaultRules>>,
}

impl Faults {
    /// Fails the next `times` requests matching `verb` and `resource` with HTTP `code` and a
    /// `Status` body (reason derived from the code, e.g. 500 → InternalError).
    pub fn fail_next(&self, verb: &str, resource: &str, times: usize, code: u16) {
        lock(&self.rules).failures.push(FailRule {
            verb: verb.into(),
            resource: resource.into(),
            remaining: times,
            code,
        });
    }

    /// Delays every request matching `verb` and `resource` by `latency` until cleared.
    pub fn add_latency(&self, verb: &str, resource: &str, latency: Duration) {
        lock(&self.rules).latencies.push(LatencyRule {
            verb: verb.into(),
            resource: resource.into(),
            latency,
        });
    }

    /// Makes the next watch of `resource` (plural or `*`) fail with a 410 Expired ERROR event,
    /// as when its resourceVersion has left the event history; watchers must re-list.
    pub fn expire_next_watch(&self, resource: &str) {
        lock(&self.rules).expire_watches.push((resource.into(), 1));
    }

    /// Removes every rule.
    pub fn clear(&self) {
        *lock(&self.rules) = FaultRules::default();
    }

    /// Consumes the rules that apply to one request.
    pub(crate) fn decide(&self, verb: &str, resource: &str) -> FaultDecision {
        let mut rules = lock(&self.rules);
        let mut decision = FaultDecision::default();
        for rule in &rules.latencies {
            if matches(&rule.verb, verb) && matches(&rule.resource, resource) {
                decision.latency = Some(decision.latency.unwrap_or_default() + rule.latency);
            }
        }
        if let Some(rule) = rules
            .failures
            .iter_mut()
            .find(|r| r.remaining > 0 && matches(&r.verb, verb) && matches(&r.resource, resource))
        {
            rule.remaining -= 1;
            decision.fail = Some(rule.code);
        }
        rules.failures.retain(|r| r.remaining > 0);
        if verb == "watch"
            && let Some(rule) = rules
                .expire_watches
                .iter_mut()
                .find(|(r, n)| *n > 0 && matches(r, resource))
        {
            rule.1 -= 1;
            decision.expire_watch = true;
        }
        rules.expire_watches.retain(|(_, n)| *n > 0);
        decision
    }
}

/// Counts of requests received, by verb and resource. Cheap to clone; clones share counts.
#[derive(Debug, Clone, Default)]
pub struct Requests {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
}

impl Requests {
    pub(crate) fn record(&self, verb: &str, resource: &str) {
        *lock(&self.counts)
            .entry((verb.to_string(), resource.to_string()))
            .or_default() += 1;
    }

    /// Requests seen matching `verb` and `resource` (either may be `*`) since the last reset.
    /// Subresource requests count under `plural/status`, not under `plural`.
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        lock(&self.counts)
            .iter()
            .filter(|((v, r), _)| matches(verb, v) && matches(resource, r))
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes (create, update, patch, delete, deletecollection) to `resource` or any of its
    /// subresources (`*` for all) since the last reset.
    pub fn writes(&self, resource: &str) -> u64 {
        lock(&self.counts)
            .iter()
            .filter(|((v, r), _)| {
                let base = r.split('/').next().unwrap_or(r);
                matches!(
                    v.as_str(),
                    "create" | "update" | "patch" | "delete" | "deletecollection"
                ) && matches(resource, base)
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// Every `(verb, resource)` with its count.
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        lock(&self.counts).clone()
    }

    /// Forgets all counts.
    pub fn reset(&self) {
        lock(&self.counts).clear();
    }
}

#[cfg(test)]
mod tests;
