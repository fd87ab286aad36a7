//! The least number of Octavia calls a change needs, counted from what must differ rather
//! than by planning: the yardstick the planner (and the benchmark) is held to.
//!
//! Every call creates, changes or deletes one object, so:
//! - each desired pool, member, listener, policy and rule with no usable owned counterpart
//!   costs one creation; each owned object that is not kept costs one deletion, unless
//!   something foreign still holds it (a pool in use, a listener with foreign policies); a
//!   deleted policy takes its rules along;
//! - a kept member with another weight, a kept listener with another default pool, costs one
//!   update; a kept policy's rules cost the larger of the rules to remove and to add (one
//!   update turns a rule to remove into one to add);
//! - a kept policy with another action costs one update, which can move it too; the kept
//!   policies with the right action that stay where they are must already follow the desired
//!   order, so at best the longest run of them that does is left alone and every other one
//!   moved once.

use std::collections::BTreeMap;

use super::plan::{Matched, diff_rules, match_members, match_policies, tls_differs};
use super::{Desired, Ownership, PolicyAction, Tree};

/// The length of a longest strictly increasing subsequence (quadratic; lists are short).
fn increasing_run(sequence: &[usize]) -> usize {
    let mut best = vec![1usize; sequence.len()];
    for i in 0..sequence.len() {
        for j in 0..i {
            if sequence[j] < sequence[i] {
                best[i] = best[i].max(best[j] + 1);
            }
        }
    }
    best.into_iter().max().unwrap_or(0)
}

/// The least number of calls that turn `tree` into `desired` for `owner`.
pub fn minimal_calls(desired: &Desired, tree: &Tree, owner: &Ownership) -> usize {
    let matched = Matched::new(desired, tree, owner);
    let mut calls = 0;
    // The id each desired pool will have, when it exists already.
    let mut pool_ids: BTreeMap<&str, &str> = BTreeMap::new();
    for pool in &desired.pools {
        match matched.pools.get(pool.name.as_str()) {
            Some(kept) => {
                pool_ids.insert(&pool.name, &kept.id);
                let (members, stale) = match_members(kept, &pool.members, owner);
                calls += stale.len();
                calls += pool
                    .members
                    .iter()
                    .filter(|m| members.get(&m.address).is_none_or(|k| k.weight != m.weight))
                    .count();
            }
            None => calls += 1 + pool.members.len(),
        }
    }
    let same_action = |observed: &PolicyAction<String>, wanted: &PolicyAction<String>| {
        let wanted = wanted.try_map_pool(|name| {
            pool_ids
                .get(name.as_str())
                .map(|id| (*id).to_owned())
                .ok_or(())
        });
        Ok(observed.clone()) == wanted
    };
    for listener in &desired.listeners {
        let Some(kept) = matched.listeners.get(listener.name.as_str()) else {
            calls += 1;
            calls += listener
                .policies
                .iter()
                .map(|p| 1 + p.rules.len())
                .sum::<usize>();
            continue;
        };
        let wanted_default = listener
            .default_pool
            .as_deref()
            .map(|name| pool_ids.get(name).copied());
        let observed_default = kept.default_pool.as_deref().map(Some);
        if wanted_default != observed_default || tls_differs(kept, listener) {
            calls += 1;
        }
        let (policies, stale) = match_policies(kept, Some(listener), owner);
        calls += stale.len();
        let mut in_order = Vec::new();
        for (index, wanted) in listener.policies.iter().enumerate() {
            match policies.get(&wanted.name) {
                None => calls += 1 + wanted.rules.len(),
                Some(observed) => {
                    let (removes, adds) = diff_rules(observed, &wanted.rules, owner);
                    calls += removes.len().max(adds.len());
                    if !same_action(&observed.action, &wanted.action) {
                        calls += 1;
                    } else {
                        let at = kept.policies.iter().position(|p| p.id == observed.id);
                        in_order.push((at, index));
                    }
                }
            }
        }
        in_order.sort();
        let order: Vec<usize> = in_order.iter().map(|(_, index)| *index).collect();
        calls += order.len() - increasing_run(&order);
    }
    for listener in tree.listeners.iter().filter(|l| l.status.is_live()) {
        if !matched.listeners.values().any(|k| k.id == listener.id) {
            calls += match_policies(listener, None, owner).1.len();
        }
    }
    calls += matched
        .stale_listeners
        .iter()
        .filter(|l| !Matched::listener_stays(l, owner))
        .count();
    calls += matched
        .stale_pools
        .iter()
        .filter(|p| !matched.pool_stays_used(p, tree, owner))
        .count();
    calls
}
