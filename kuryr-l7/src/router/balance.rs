//! Weighted round robin over a pool's members, and passive ejection.
//!
//! The schedule is smooth weighted round robin (as nginx does it), precomputed per pool on every
//! table update: a member of weight 3 next to one of weight 1 is picked 3 times in 4, spread out.
//! Passive ejection: `eject_after` consecutive failures (connection refused, reset, timeout)
//! eject a member for `eject_for`; a success resets its count. A pool never has more than half
//! its members ejected (at least one of a pool stays in); health is kept per address, so it
//! survives table updates.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nephrite_l7::Pool;

#[cfg(test)]
mod tests;

/// Passive ejection settings.
#[derive(Debug, Clone, Copy)]
pub struct Ejection {
    /// Consecutive failures that eject a member.
    pub eject_after: u32,
    /// How long an ejected member stays out.
    pub eject_for: Duration,
}

impl Default for Ejection {
    fn default() -> Self {
        Ejection {
            eject_after: 3,
            eject_for: Duration::from_secs(10),
        }
    }
}

/// The health of one member address.
#[derive(Debug, Default)]
pub struct MemberHealth {
    failures: AtomicU32,
    /// Milliseconds since the registry's epoch until which the member is out (0 = in).
    ejected_until: AtomicU64,
}

/// Member health by address, shared by every table version.
#[derive(Debug)]
pub struct HealthRegistry {
    epoch: Instant,
    members: Mutex<HashMap<SocketAddr, Arc<MemberHealth>>>,
    /// The ejection settings.
    pub ejection: Ejection,
}

impl HealthRegistry {
    /// An empty registry.
    pub fn new(ejection: Ejection) -> Self {
        HealthRegistry {
            epoch: Instant::now(),
            members: Mutex::new(HashMap::new()),
            ejection,
        }
    }

    fn health(&self, address: SocketAddr) -> Arc<MemberHealth> {
        let mut members = self.members.lock().unwrap_or_else(|e| e.into_inner());
        members.entry(address).or_default().clone()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

#[derive(Debug)]
struct Slot {
    address: SocketAddr,
    health: Arc<MemberHealth>,
}

/// What a pick gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// Forward to this member.
    Member(SocketAddr),
    /// The pool's unavailable share: answer 500.
    Unavailable,
    /// No live member with weight: answer 503.
    None,
}

/// A pool ready to pick members.
#[derive(Debug)]
pub struct Balancer {
    slots: Vec<Slot>,
    schedule: Vec<u32>,
    next: AtomicUsize,
    registry: Arc<HealthRegistry>,
}

/// Smooth weighted round robin over `weights` (scaled down to at most `MAX_SCHEDULE` picks).
fn schedule(weights: &[u32]) -> Vec<u32> {
    const MAX_SCHEDULE: u64 = 4096;
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return Vec::new();
    }
    let scaled: Vec<i64> = if total > MAX_SCHEDULE {
        weights
            .iter()
            .map(|w| match *w {
                0 => 0,
                w => ((u64::from(w) * MAX_SCHEDULE / total).max(1)) as i64,
            })
            .collect()
    } else {
        weights.iter().map(|w| i64::from(*w)).collect()
    };
    let sum: i64 = scaled.iter().sum();
    let mut current = vec![0i64; scaled.len()];
    let mut out = Vec::with_capacity(sum as usize);
    for _ in 0..sum {
        for (c, w) in current.iter_mut().zip(&scaled) {
            *c += w;
        }
        let (best, _) = current
            .iter()
            .enumerate()
            .filter(|(i, _)| scaled[*i] > 0)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .unwrap_or((0, &0));
        current[best] -= sum;
        out.push(best as u32);
    }
    out
}

impl Balancer {
    /// A balancer for `pool`.
    pub fn new(pool: &Pool, registry: Arc<HealthRegistry>) -> Self {
        let slots = pool
            .members
            .iter()
            .map(|m| Slot {
                address: m.address,
                health: registry.health(m.address),
            })
            .collect();
        // The unavailable share is one more slot of the schedule, past the members'.
        let weights: Vec<u32> = pool
            .members
            .iter()
            .map(|m| m.weight)
            .chain((pool.unavailable_weight > 0).then_some(pool.unavailable_weight))
            .collect();
        Balancer {
            slots,
            schedule: schedule(&weights),
            next: AtomicUsize::new(0),
            registry,
        }
    }

    fn is_ejected(&self, slot: &Slot, now: u64) -> bool {
        slot.health.ejected_until.load(Ordering::Relaxed) > now
    }

    /// The next member that is not ejected, or `None` (503) when none is left or no member has
    /// weight; the pool's unavailable share is skipped.
    pub fn pick(&self) -> Option<SocketAddr> {
        match self.pick_share() {
            Pick::Member(address) => Some(address),
            Pick::Unavailable | Pick::None => None,
        }
    }

    /// The next slot of the schedule: a member that is not ejected (an ejected one passes its
    /// turn to the next), the unavailable share, or none.
    pub fn pick_share(&self) -> Pick {
        if self.schedule.is_empty() {
            return Pick::None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = self.registry.now_ms();
        for offset in 0..self.schedule.len() {
            let index = self.schedule[(start + offset) % self.schedule.len()] as usize;
            match self.slots.get(index) {
                None if offset == 0 => return Pick::Unavailable,
                None => {}
                Some(slot) if !self.is_ejected(slot, now) => return Pick::Member(slot.address),
                Some(_) => {}
            }
        }
        Pick::None
    }

    /// Records a successful exchange with `address`.
    pub fn success(&self, address: SocketAddr) {
        if let Some(slot) = self.slots.iter().find(|s| s.address == address) {
            slot.health.failures.store(0, Ordering::Relaxed);
        }
    }

    /// Records a failure talking to `address`; ejects it after enough in a row unless half the
    /// pool is already out. Returns whether it was ejected.
    pub fn failure(&self, address: SocketAddr) -> bool {
        let Some(slot) = self.slots.iter().find(|s| s.address == address) else {
            return false;
        };
        let failures = slot.health.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures < self.registry.ejection.eject_after {
            return false;
        }
        let now = self.registry.now_ms();
        let out = self
            .slots
            .iter()
            .filter(|s| self.is_ejected(s, now))
            .count();
        if (out + 1) * 2 > self.slots.len() {
            return false;
        }
        let until =
            now + u64::try_from(self.registry.ejection.eject_for.as_millis()).unwrap_or(u64::MAX);
        slot.health.ejected_until.store(until, Ordering::Relaxed);
        slot.health.failures.store(0, Ordering::Relaxed);
        tracing::warn!(member = %address, "ejected after {failures} consecutive failures");
        true
    }
}
