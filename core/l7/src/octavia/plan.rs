//! The planner: the ordered Octavia calls from the observed tree to the desired one.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::{
    Call, Desired, DesiredListener, DesiredPolicy, ObservedListener, ObservedMember,
    ObservedPolicy, ObservedPool, ObservedRule, Ownership, PolicyAction, Ref, Tree,
};
use crate::model::Rule;

/// What the observed tree holds of the desired one: the owned object kept for each desired
/// name, and the owned objects that are not kept (stale, duplicate, in `ERROR`, or not
/// desired).
pub(super) struct Matched<'a> {
    pub(super) pools: BTreeMap<&'a str, &'a ObservedPool>,
    pub(super) stale_pools: Vec<&'a ObservedPool>,
    pub(super) listeners: BTreeMap<&'a str, &'a ObservedListener>,
    pub(super) stale_listeners: Vec<&'a ObservedListener>,
}

impl<'a> Matched<'a> {
    pub(super) fn new(desired: &'a Desired, tree: &'a Tree, owner: &Ownership) -> Self {
        let mut pools = BTreeMap::new();
        let mut stale_pools = Vec::new();
        for pool in tree
            .pools
            .iter()
            .filter(|p| owner.owns(&p.tags) && p.status.is_live())
        {
            let wanted = desired
                .pools
                .iter()
                .find(|d| d.name == pool.name && d.protocol == pool.protocol);
            match wanted {
                Some(d) if pool.status.is_usable() && !pools.contains_key(d.name.as_str()) => {
                    pools.insert(d.name.as_str(), pool);
                }
                _ => stale_pools.push(pool),
            }
        }
        let mut listeners = BTreeMap::new();
        let mut stale_listeners = Vec::new();
        for listener in tree
            .listeners
            .iter()
            .filter(|l| owner.owns(&l.tags) && l.status.is_live())
        {
            let wanted = desired.listeners.iter().find(|d| {
                d.name == listener.name
                    && d.protocol == listener.protocol
                    && d.port == listener.port
            });
            match wanted {
                Some(d)
                    if listener.status.is_usable() && !listeners.contains_key(d.name.as_str()) =>
                {
                    listeners.insert(d.name.as_str(), listener);
                }
                _ => stale_listeners.push(listener),
            }
        }
        Matched {
            pools,
            stale_pools,
            listeners,
            stale_listeners,
        }
    }

    /// Whether a stale listener stays (foreign policies keep it).
    pub(super) fn listener_stays(listener: &ObservedListener, owner: &Ownership) -> bool {
        listener
            .policies
            .iter()
            .any(|p| p.status.is_live() && !owner.owns(&p.tags))
    }

    /// Whether a stale pool is still used once the plan ran: by a foreign policy, or by a
    /// listener the plan leaves in place without changing its default pool.
    pub(super) fn pool_stays_used(
        &self,
        pool: &ObservedPool,
        tree: &Tree,
        owner: &Ownership,
    ) -> bool {
        let id = Some(pool.id.as_str());
        tree.listeners
            .iter()
            .filter(|l| l.status.is_live())
            .any(|listener| {
                let foreign_policy = listener.policies.iter().any(|p| {
                    p.status.is_live()
                        && !owner.owns(&p.tags)
                        && p.action.pool().map(String::as_str) == id
                });
                let ours = owner.owns(&listener.tags);
                let kept = self.listeners.values().any(|k| k.id == listener.id);
                let stays = !ours || (!kept && Self::listener_stays(listener, owner));
                foreign_policy || (stays && listener.default_pool.as_deref() == id)
            })
    }
}

/// The owned members of a kept pool: the one kept for each desired address, and the rest.
pub(super) fn match_members<'a>(
    pool: &'a ObservedPool,
    desired: &[crate::model::Member],
    owner: &Ownership,
) -> (
    BTreeMap<SocketAddr, &'a ObservedMember>,
    Vec<&'a ObservedMember>,
) {
    let mut kept = BTreeMap::new();
    let mut stale = Vec::new();
    for member in pool
        .members
        .iter()
        .filter(|m| owner.owns(&m.tags) && m.status.is_live())
    {
        let wanted = desired.iter().any(|d| d.address == member.address);
        if wanted && member.status.is_usable() && !kept.contains_key(&member.address) {
            kept.insert(member.address, member);
        } else {
            stale.push(member);
        }
    }
    (kept, stale)
}

/// Whether a kept listener's certificates differ from the desired ones (a listener that
/// should have none keeps what it has: only a `TERMINATED_HTTPS` listener has certificates,
/// and it has them from its creation).
pub(super) fn tls_differs(kept: &ObservedListener, desired: &DesiredListener) -> bool {
    desired.tls.as_ref().is_some_and(|wanted| {
        kept.tls.as_ref().map(|observed| observed.normalized()) != Some(wanted.normalized())
    })
}

/// The owned policies of a listener: the one kept for each desired name, and the rest.
pub(super) fn match_policies<'a>(
    listener: &'a ObservedListener,
    desired: Option<&DesiredListener>,
    owner: &Ownership,
) -> (
    BTreeMap<String, &'a ObservedPolicy>,
    Vec<&'a ObservedPolicy>,
) {
    let mut kept = BTreeMap::new();
    let mut stale = Vec::new();
    for policy in listener
        .policies
        .iter()
        .filter(|p| owner.owns(&p.tags) && p.status.is_live())
    {
        let wanted = desired.is_some_and(|d| d.policies.iter().any(|w| w.name == policy.name));
        if wanted && policy.status.is_usable() && !kept.contains_key(&policy.name) {
            kept.insert(policy.name.clone(), policy);
        } else {
            stale.push(policy);
        }
    }
    (kept, stale)
}

/// A kept policy's owned rules against the desired ones: the rules to remove and to add.
pub(super) fn diff_rules<'a>(
    policy: &'a ObservedPolicy,
    desired: &'a [Rule],
    owner: &Ownership,
) -> (Vec<&'a ObservedRule>, Vec<&'a Rule>) {
    let mut adds: Vec<&Rule> = desired.iter().collect();
    let mut removes = Vec::new();
    for rule in policy
        .rules
        .iter()
        .filter(|r| owner.owns(&r.tags) && r.status.is_live())
    {
        match adds.iter().position(|wanted| **wanted == rule.rule) {
            Some(index) if rule.status.is_usable() => {
                adds.remove(index);
            }
            _ => removes.push(rule),
        }
    }
    (removes, adds)
}

/// The indices (into `sequence`) of a longest strictly increasing subsequence.
fn longest_increasing(sequence: &[usize]) -> Vec<usize> {
    // tails[k]: index of the smallest tail of an increasing run of length k + 1.
    let mut tails: Vec<usize> = Vec::new();
    let mut previous: Vec<Option<usize>> = vec![None; sequence.len()];
    for (i, value) in sequence.iter().enumerate() {
        let k = tails.partition_point(|&t| sequence[t] < *value);
        previous[i] = k.checked_sub(1).map(|k| tails[k]);
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut next = tails.last().copied();
    while let Some(i) = next {
        out.push(i);
        next = previous[i];
    }
    out.reverse();
    out
}

/// A policy in the listener's list while the plan is built.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Existing(String),
    Created(usize),
}

/// Why a plan cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A policy or listener names a pool the desired tree does not have.
    #[error("{object} uses pool {pool:?}, which the desired tree does not have")]
    UnknownPool {
        /// The listener or policy.
        object: String,
        /// The pool's name.
        pool: String,
    },
}

/// Builds the calls in order.
struct Planner<'a> {
    desired: &'a Desired,
    tree: &'a Tree,
    owner: &'a Ownership,
    matched: Matched<'a>,
    pool_refs: BTreeMap<&'a str, Ref>,
    calls: Vec<Call>,
}

impl<'a> Planner<'a> {
    fn push(&mut self, call: Call) -> usize {
        self.calls.push(call);
        self.calls.len() - 1
    }

    fn pool_ref(&self, object: &str, name: &str) -> Result<Ref, PlanError> {
        self.pool_refs
            .get(name)
            .cloned()
            .ok_or_else(|| PlanError::UnknownPool {
                object: object.to_owned(),
                pool: name.to_owned(),
            })
    }

    fn action(&self, policy: &DesiredPolicy) -> Result<PolicyAction<Ref>, PlanError> {
        policy
            .action
            .try_map_pool(|name| self.pool_ref(&format!("policy {}", policy.name), name))
    }

    fn pools(&mut self) {
        let desired = self.desired;
        for pool in &desired.pools {
            let reference = match self.matched.pools.get(pool.name.as_str()).copied() {
                Some(kept) => {
                    let (members, stale) = match_members(kept, &pool.members, self.owner);
                    for member in stale {
                        self.push(Call::DeleteMember {
                            pool: kept.id.clone(),
                            member: member.id.clone(),
                        });
                    }
                    for wanted in &pool.members {
                        match members.get(&wanted.address) {
                            Some(member) if member.weight != wanted.weight => {
                                self.push(Call::UpdateMember {
                                    pool: kept.id.clone(),
                                    member: member.id.clone(),
                                    weight: wanted.weight,
                                });
                            }
                            Some(_) => {}
                            None => {
                                self.push(Call::CreateMember {
                                    pool: Ref::Id(kept.id.clone()),
                                    address: wanted.address,
                                    weight: wanted.weight,
                                    tags: self.owner.tags(&pool.object),
                                });
                            }
                        }
                    }
                    Ref::Id(kept.id.clone())
                }
                None => {
                    let index = self.push(Call::CreatePool {
                        name: pool.name.clone(),
                        protocol: pool.protocol,
                        tags: self.owner.tags(&pool.object),
                    });
                    for wanted in &pool.members {
                        self.push(Call::CreateMember {
                            pool: Ref::Created(index),
                            address: wanted.address,
                            weight: wanted.weight,
                            tags: self.owner.tags(&pool.object),
                        });
                    }
                    Ref::Created(index)
                }
            };
            self.pool_refs.insert(pool.name.as_str(), reference);
        }
    }

    fn create_policy(
        &mut self,
        listener: Ref,
        policy: &DesiredPolicy,
        position: usize,
    ) -> Result<usize, PlanError> {
        let action = self.action(policy)?;
        let index = self.push(Call::CreatePolicy {
            listener,
            name: policy.name.clone(),
            position,
            action,
            tags: self.owner.tags(&policy.object),
        });
        for rule in &policy.rules {
            self.push(Call::CreateRule {
                policy: Ref::Created(index),
                rule: rule.clone(),
                tags: self.owner.tags(&policy.object),
            });
        }
        Ok(index)
    }

    fn listener(&mut self, desired: &'a DesiredListener) -> Result<(), PlanError> {
        let default_pool = match &desired.default_pool {
            Some(name) => Some(self.pool_ref(&format!("listener {}", desired.name), name)?),
            None => None,
        };
        let Some(kept) = self.matched.listeners.get(desired.name.as_str()).copied() else {
            let index = self.push(Call::CreateListener {
                name: desired.name.clone(),
                protocol: desired.protocol,
                port: desired.port,
                default_pool,
                tls: desired.tls.clone(),
                tags: vec![self.owner.cluster_tag()],
            });
            for (i, policy) in desired.policies.iter().enumerate() {
                self.create_policy(Ref::Created(index), policy, i + 1)?;
            }
            return Ok(());
        };
        let observed_default = kept.default_pool.clone().map(Ref::Id);
        let tls_differs = tls_differs(kept, desired);
        if observed_default != default_pool || tls_differs {
            self.push(Call::UpdateListener {
                listener: kept.id.clone(),
                default_pool,
                tls: desired.tls.clone().filter(|_| tls_differs),
            });
        }
        let (policies, stale) = match_policies(kept, Some(desired), self.owner);
        for policy in &stale {
            self.push(Call::DeletePolicy {
                policy: policy.id.clone(),
            });
        }
        // The listener's list once the stale policies are gone.
        let mut slots: Vec<Slot> = kept
            .policies
            .iter()
            .filter(|p| p.status.is_live() && !stale.iter().any(|s| s.id == p.id))
            .map(|p| Slot::Existing(p.id.clone()))
            .collect();
        // Kept policies needing no change stay where they are when they already follow the
        // desired order (a longest increasing run of them); every other one is put in place.
        let mut actions = BTreeMap::new();
        for policy in &desired.policies {
            actions.insert(policy.name.as_str(), self.action(policy)?);
        }
        let desired_index: BTreeMap<&str, usize> = desired
            .policies
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let clean: Vec<(&ObservedPolicy, usize)> = kept
            .policies
            .iter()
            .filter_map(|p| {
                let kept = policies.get(&p.name).filter(|k| k.id == p.id)?;
                let wanted = &actions[kept.name.as_str()];
                let same = kept
                    .action
                    .try_map_pool(|id| Ok::<_, ()>(Ref::Id(id.clone())))
                    == Ok(wanted.clone());
                same.then(|| (*kept, desired_index[kept.name.as_str()]))
            })
            .collect();
        let order: Vec<usize> = clean.iter().map(|(_, i)| *i).collect();
        let staying: Vec<&str> = longest_increasing(&order)
            .into_iter()
            .map(|i| clean[i].0.id.as_str())
            .collect();
        let mut previous: Option<Slot> = None;
        for policy in &desired.policies {
            // Right after the policy before it, or first.
            let after = |slots: &[Slot]| {
                previous
                    .as_ref()
                    .and_then(|p| slots.iter().position(|s| s == p))
                    .map_or(0, |i| i + 1)
            };
            let slot = match policies.get(&policy.name) {
                Some(observed) if staying.contains(&observed.id.as_str()) => {
                    Slot::Existing(observed.id.clone())
                }
                Some(observed) => {
                    let slot = Slot::Existing(observed.id.clone());
                    slots.retain(|s| *s != slot);
                    let index = after(&slots);
                    slots.insert(index, slot.clone());
                    self.push(Call::UpdatePolicy {
                        policy: observed.id.clone(),
                        position: index + 1,
                        action: actions[policy.name.as_str()].clone(),
                    });
                    slot
                }
                None => {
                    let index = after(&slots);
                    let created =
                        self.create_policy(Ref::Id(kept.id.clone()), policy, index + 1)?;
                    let slot = Slot::Created(created);
                    slots.insert(index, slot.clone());
                    slot
                }
            };
            if let Some(observed) = policies.get(&policy.name) {
                self.rules(observed, policy);
            }
            previous = Some(slot);
        }
        Ok(())
    }

    fn rules(&mut self, observed: &ObservedPolicy, desired: &DesiredPolicy) {
        let (removes, adds) = diff_rules(observed, &desired.rules, self.owner);
        let mut adds = adds.into_iter();
        for remove in removes {
            match adds.next() {
                Some(to) => self.push(Call::UpdateRule {
                    policy: observed.id.clone(),
                    rule: remove.id.clone(),
                    to: to.clone(),
                }),
                None => self.push(Call::DeleteRule {
                    policy: observed.id.clone(),
                    rule: remove.id.clone(),
                }),
            };
        }
        for rule in adds {
            self.push(Call::CreateRule {
                policy: Ref::Id(observed.id.clone()),
                rule: rule.clone(),
                tags: self.owner.tags(&desired.object),
            });
        }
    }

    /// Owned policies on listeners that are not kept, then those listeners when nothing
    /// foreign holds them, then the pools nothing uses any more.
    fn leftovers(&mut self) {
        let tree = self.tree;
        for listener in tree.listeners.iter().filter(|l| l.status.is_live()) {
            if self.matched.listeners.values().any(|k| k.id == listener.id) {
                continue;
            }
            let (_, stale) = match_policies(listener, None, self.owner);
            for policy in stale {
                self.push(Call::DeletePolicy {
                    policy: policy.id.clone(),
                });
            }
        }
        let stale_listeners = self.matched.stale_listeners.clone();
        for listener in stale_listeners {
            if !Matched::listener_stays(listener, self.owner) {
                self.push(Call::DeleteListener {
                    listener: listener.id.clone(),
                });
            }
        }
        let stale_pools = self.matched.stale_pools.clone();
        for pool in stale_pools {
            if !self.matched.pool_stays_used(pool, tree, self.owner) {
                self.push(Call::DeletePool {
                    pool: pool.id.clone(),
                });
            }
        }
    }
}

/// The calls, in order, that turn `tree` into `desired`, touching only what `owner` owns.
/// Objects `PENDING_DELETE` count as gone; the executor runs each call once the load balancer
/// is `ACTIVE` again.
pub fn plan(desired: &Desired, tree: &Tree, owner: &Ownership) -> Result<Vec<Call>, PlanError> {
    let mut planner = Planner {
        desired,
        tree,
        owner,
        matched: Matched::new(desired, tree, owner),
        pool_refs: BTreeMap::new(),
        calls: Vec::new(),
    };
    planner.pools();
    for listener in &desired.listeners {
        planner.listener(listener)?;
    }
    planner.leftovers();
    Ok(planner.calls)
}

#[cfg(test)]
mod tests {
    use super::longest_increasing;

    #[test]
    fn longest_increasing_runs() {
        assert_eq!(longest_increasing(&[]), Vec::<usize>::new());
        assert_eq!(longest_increasing(&[3, 0, 1, 4, 2]).len(), 3);
        let run = longest_increasing(&[5, 1, 6, 2, 7, 3, 8]);
        let values: Vec<usize> = run.iter().map(|&i| [5, 1, 6, 2, 7, 3, 8][i]).collect();
        assert!(
            values.windows(2).all(|w| w[0] < w[1]) && values.len() == 4,
            "{values:?}"
        );
    }
}
