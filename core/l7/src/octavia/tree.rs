//! The load balancer's L7 tree as Octavia reports it, and what Octavia does with each call of a
//! plan ([`Tree::apply`]): ids for created objects, L7 policy positions shifting on insert and
//! renumbered 1..n, a pool in use refusing deletion.

use std::net::SocketAddr;

use super::{Call, PolicyAction, Ref};
use crate::model::Rule;

/// An Octavia object's `provisioning_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProvisioningStatus {
    /// Settled.
    Active,
    /// Being created.
    PendingCreate,
    /// Being changed.
    PendingUpdate,
    /// Being deleted: as good as gone.
    PendingDelete,
    /// Failed: an owned object in `ERROR` is replaced.
    Error,
}

impl ProvisioningStatus {
    /// Whether the object still counts (not being deleted).
    pub fn is_live(self) -> bool {
        self != ProvisioningStatus::PendingDelete
    }

    /// Whether an owned object in this status can be kept as it is.
    pub fn is_usable(self) -> bool {
        self.is_live() && self != ProvisioningStatus::Error
    }
}

/// A listener's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListenerProtocol {
    /// `HTTP`: L7 policies see plain requests.
    Http,
    /// `TERMINATED_HTTPS`.
    TerminatedHttps,
}

/// How a pool talks to its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolProtocol {
    /// `HTTP`.
    Http,
    /// `HTTPS` (OpenShift reencrypt).
    Https,
}

/// An L7 rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRule {
    /// Octavia's id.
    pub id: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its provisioning status.
    pub status: ProvisioningStatus,
    /// Type, compare type, key, value, invert.
    pub rule: Rule,
}

/// An L7 policy; its position is its index in the listener's list plus one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedPolicy {
    /// Octavia's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its provisioning status.
    pub status: ProvisioningStatus,
    /// What it does, naming a pool by id.
    pub action: PolicyAction<String>,
    /// Its rules (ANDed; unordered).
    pub rules: Vec<ObservedRule>,
}

/// A listener and its L7 policies in position order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedListener {
    /// Octavia's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its provisioning status.
    pub status: ProvisioningStatus,
    /// Its protocol.
    pub protocol: ListenerProtocol,
    /// Its port.
    pub port: u16,
    /// The pool when no policy matches, by id.
    pub default_pool: Option<String>,
    /// A `TERMINATED_HTTPS` listener's certificates (None on other listeners).
    pub tls: Option<ListenerTls>,
    /// The L7 policies, position 1 first.
    pub policies: Vec<ObservedPolicy>,
}

/// A `TERMINATED_HTTPS` listener's certificates, as Barbican references.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ListenerTls {
    /// `default_tls_container_ref`: the certificate for a client whose SNI names no other.
    pub default_container: String,
    /// `sni_container_refs`, sorted: the certificates Octavia chooses from by SNI.
    pub sni_containers: Vec<String>,
}

impl ListenerTls {
    /// The same certificates with the SNI references sorted and deduplicated (Octavia does not
    /// promise the order it lists them in).
    pub fn normalized(&self) -> ListenerTls {
        let mut sni_containers = self.sni_containers.clone();
        sni_containers.sort();
        sni_containers.dedup();
        ListenerTls {
            default_container: self.default_container.clone(),
            sni_containers,
        }
    }
}

/// A pool member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedMember {
    /// Octavia's id.
    pub id: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its provisioning status.
    pub status: ProvisioningStatus,
    /// `address` and `protocol_port`.
    pub address: SocketAddr,
    /// Its weight.
    pub weight: u32,
}

/// A pool of the load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedPool {
    /// Octavia's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its provisioning status.
    pub status: ProvisioningStatus,
    /// Its protocol.
    pub protocol: PoolProtocol,
    /// Its members.
    pub members: Vec<ObservedMember>,
}

/// One load balancer's listeners and pools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    /// The listeners with their policies.
    pub listeners: Vec<ObservedListener>,
    /// The pools with their members.
    pub pools: Vec<ObservedPool>,
}

/// A call Octavia would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// A reference to a call that created nothing (or comes later).
    #[error("call {0} created nothing to refer to")]
    Dangling(usize),
    /// No object with this id.
    #[error("no {kind} {id}")]
    NotFound {
        /// What was looked for.
        kind: &'static str,
        /// The id.
        id: String,
    },
    /// A pool still used by a policy or a listener.
    #[error("pool {0} is in use")]
    PoolInUse(String),
}

fn not_found(kind: &'static str, id: &str) -> ApplyError {
    ApplyError::NotFound {
        kind,
        id: id.to_owned(),
    }
}

/// Inserts at the 1-based `position` as Octavia does: a taken position shifts the rest down,
/// 0 or past the end appends.
fn insert_at<T>(list: &mut Vec<T>, position: usize, item: T) {
    if (1..=list.len()).contains(&position) {
        list.insert(position - 1, item);
    } else {
        list.push(item);
    }
}

impl Tree {
    /// The tree once Octavia finished what was pending: objects `PENDING_DELETE` gone, objects
    /// `PENDING_CREATE` or `PENDING_UPDATE` `ACTIVE` (`ERROR` stays). An executor runs each call
    /// on a settled tree: it waits for the load balancer to be `ACTIVE` first.
    pub fn settle(&mut self) {
        fn settled(status: &mut ProvisioningStatus) -> bool {
            match status {
                ProvisioningStatus::PendingDelete => false,
                ProvisioningStatus::PendingCreate | ProvisioningStatus::PendingUpdate => {
                    *status = ProvisioningStatus::Active;
                    true
                }
                ProvisioningStatus::Active | ProvisioningStatus::Error => true,
            }
        }
        self.pools.retain_mut(|pool| {
            pool.members.retain_mut(|m| settled(&mut m.status));
            settled(&mut pool.status)
        });
        self.listeners.retain_mut(|listener| {
            listener.policies.retain_mut(|policy| {
                policy.rules.retain_mut(|r| settled(&mut r.status));
                settled(&mut policy.status)
            });
            settled(&mut listener.status)
        });
    }

    /// The id a reference names, given the ids the plan's calls created so far.
    pub fn resolve<'a>(
        reference: &'a Ref,
        created: &'a [Option<String>],
    ) -> Result<&'a str, ApplyError> {
        match reference {
            Ref::Id(id) => Ok(id),
            Ref::Created(index) => created
                .get(*index)
                .and_then(Option::as_deref)
                .ok_or(ApplyError::Dangling(*index)),
        }
    }

    fn pool_mut(&mut self, id: &str) -> Result<&mut ObservedPool, ApplyError> {
        self.pools
            .iter_mut()
            .find(|p| p.id == id)
            .ok_or_else(|| not_found("pool", id))
    }

    fn policy_mut(&mut self, id: &str) -> Result<(usize, usize), ApplyError> {
        self.listeners
            .iter()
            .enumerate()
            .find_map(|(l, listener)| {
                listener
                    .policies
                    .iter()
                    .position(|p| p.id == id)
                    .map(|p| (l, p))
            })
            .ok_or_else(|| not_found("L7 policy", id))
    }

    fn pool_in_use(&self, id: &str) -> bool {
        self.listeners.iter().any(|l| {
            l.default_pool.as_deref() == Some(id)
                || l.policies
                    .iter()
                    .any(|p| p.action.pool().map(String::as_str) == Some(id))
        })
    }

    /// Performs `call` as Octavia would, the objects settled at once (`ACTIVE`). `created`
    /// holds the id each earlier call of the plan created; the id of a new object comes from
    /// `new_id`. Returns the id of the object created, if any.
    pub fn apply(
        &mut self,
        call: &Call,
        created: &[Option<String>],
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<Option<String>, ApplyError> {
        let active = ProvisioningStatus::Active;
        let resolve_action = |action: &PolicyAction<Ref>| {
            action.try_map_pool(|pool| Self::resolve(pool, created).map(str::to_owned))
        };
        match call {
            Call::CreatePool {
                name,
                protocol,
                tags,
            } => {
                let id = new_id();
                self.pools.push(ObservedPool {
                    id: id.clone(),
                    name: name.clone(),
                    tags: tags.clone(),
                    status: active,
                    protocol: *protocol,
                    members: Vec::new(),
                });
                return Ok(Some(id));
            }
            Call::DeletePool { pool } => {
                if self.pool_in_use(pool) {
                    return Err(ApplyError::PoolInUse(pool.clone()));
                }
                let before = self.pools.len();
                self.pools.retain(|p| p.id != *pool);
                if self.pools.len() == before {
                    return Err(not_found("pool", pool));
                }
            }
            Call::CreateMember {
                pool,
                address,
                weight,
                tags,
            } => {
                let pool = Self::resolve(pool, created)?.to_owned();
                let id = new_id();
                self.pool_mut(&pool)?.members.push(ObservedMember {
                    id: id.clone(),
                    tags: tags.clone(),
                    status: active,
                    address: *address,
                    weight: *weight,
                });
                return Ok(Some(id));
            }
            Call::UpdateMember {
                pool,
                member,
                weight,
            } => {
                let found = self
                    .pool_mut(pool)?
                    .members
                    .iter_mut()
                    .find(|m| m.id == *member)
                    .ok_or_else(|| not_found("member", member))?;
                found.weight = *weight;
                found.status = active;
            }
            Call::DeleteMember { pool, member } => {
                let members = &mut self.pool_mut(pool)?.members;
                let before = members.len();
                members.retain(|m| m.id != *member);
                if members.len() == before {
                    return Err(not_found("member", member));
                }
            }
            Call::CreateListener {
                name,
                protocol,
                port,
                default_pool,
                tls,
                tags,
            } => {
                let default_pool = match default_pool {
                    Some(pool) => Some(Self::resolve(pool, created)?.to_owned()),
                    None => None,
                };
                let id = new_id();
                self.listeners.push(ObservedListener {
                    id: id.clone(),
                    name: name.clone(),
                    tags: tags.clone(),
                    status: active,
                    protocol: *protocol,
                    port: *port,
                    default_pool,
                    tls: tls.clone(),
                    policies: Vec::new(),
                });
                return Ok(Some(id));
            }
            Call::UpdateListener {
                listener,
                default_pool,
                tls,
            } => {
                let default_pool = match default_pool {
                    Some(pool) => Some(Self::resolve(pool, created)?.to_owned()),
                    None => None,
                };
                let found = self
                    .listeners
                    .iter_mut()
                    .find(|l| l.id == *listener)
                    .ok_or_else(|| not_found("listener", listener))?;
                found.default_pool = default_pool;
                if let Some(tls) = tls {
                    found.tls = Some(tls.clone());
                }
                found.status = active;
            }
            Call::DeleteListener { listener } => {
                let before = self.listeners.len();
                self.listeners.retain(|l| l.id != *listener);
                if self.listeners.len() == before {
                    return Err(not_found("listener", listener));
                }
            }
            Call::CreatePolicy {
                listener,
                name,
                position,
                action,
                tags,
            } => {
                let listener = Self::resolve(listener, created)?.to_owned();
                let action = resolve_action(action)?;
                let id = new_id();
                let found = self
                    .listeners
                    .iter_mut()
                    .find(|l| l.id == listener)
                    .ok_or_else(|| not_found("listener", &listener))?;
                let policy = ObservedPolicy {
                    id: id.clone(),
                    name: name.clone(),
                    tags: tags.clone(),
                    status: active,
                    action,
                    rules: Vec::new(),
                };
                insert_at(&mut found.policies, *position, policy);
                return Ok(Some(id));
            }
            Call::UpdatePolicy {
                policy,
                position,
                action,
            } => {
                let action = resolve_action(action)?;
                let (l, p) = self.policy_mut(policy)?;
                let policies = &mut self.listeners[l].policies;
                let mut moved = policies.remove(p);
                moved.action = action;
                moved.status = active;
                insert_at(policies, *position, moved);
            }
            Call::DeletePolicy { policy } => {
                let (l, p) = self.policy_mut(policy)?;
                self.listeners[l].policies.remove(p);
            }
            Call::CreateRule { policy, rule, tags } => {
                let policy = Self::resolve(policy, created)?.to_owned();
                let (l, p) = self.policy_mut(&policy)?;
                let id = new_id();
                self.listeners[l].policies[p].rules.push(ObservedRule {
                    id: id.clone(),
                    tags: tags.clone(),
                    status: active,
                    rule: rule.clone(),
                });
                return Ok(Some(id));
            }
            Call::UpdateRule { policy, rule, to } => {
                let (l, p) = self.policy_mut(policy)?;
                let found = self.listeners[l].policies[p]
                    .rules
                    .iter_mut()
                    .find(|r| r.id == *rule)
                    .ok_or_else(|| not_found("L7 rule", rule))?;
                found.rule = to.clone();
                found.status = active;
            }
            Call::DeleteRule { policy, rule } => {
                let (l, p) = self.policy_mut(policy)?;
                let rules = &mut self.listeners[l].policies[p].rules;
                let before = rules.len();
                rules.retain(|r| r.id != *rule);
                if rules.len() == before {
                    return Err(not_found("L7 rule", rule));
                }
            }
        }
        Ok(None)
    }

    /// Performs every call of `plan` in order (see [`apply`](Self::apply)).
    pub fn apply_all(
        &mut self,
        plan: &[Call],
        new_id: &mut dyn FnMut() -> String,
    ) -> Result<(), ApplyError> {
        let mut created = Vec::with_capacity(plan.len());
        for call in plan {
            created.push(self.apply(call, &created, new_id)?);
        }
        Ok(())
    }
}
