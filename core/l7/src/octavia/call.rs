//! The plan's calls: one Octavia v2 request each, naming objects the plan creates by the index
//! of the call that creates them.

use std::net::SocketAddr;

use super::{ListenerProtocol, ListenerTls, PolicyAction, PoolProtocol};
use crate::model::Rule;

/// An object a call names: one that exists, or one an earlier call of the same plan creates.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ref {
    /// An existing object's id.
    Id(String),
    /// The object created by the plan's call at this index.
    Created(usize),
}

/// One Octavia v2 call (see [`Call::request`] for its method, path and body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `POST /v2/lbaas/pools` on the load balancer.
    CreatePool {
        /// Its name.
        name: String,
        /// Its protocol.
        protocol: PoolProtocol,
        /// Its tags.
        tags: Vec<String>,
    },
    /// `DELETE /v2/lbaas/pools/{pool}`.
    DeletePool {
        /// The pool's id.
        pool: String,
    },
    /// `POST /v2/lbaas/pools/{pool}/members`.
    CreateMember {
        /// The pool.
        pool: Ref,
        /// Address and port.
        address: SocketAddr,
        /// Weight.
        weight: u32,
        /// Its tags.
        tags: Vec<String>,
    },
    /// `PUT /v2/lbaas/pools/{pool}/members/{member}` (the weight).
    UpdateMember {
        /// The pool's id.
        pool: String,
        /// The member's id.
        member: String,
        /// The new weight.
        weight: u32,
    },
    /// `DELETE /v2/lbaas/pools/{pool}/members/{member}`.
    DeleteMember {
        /// The pool's id.
        pool: String,
        /// The member's id.
        member: String,
    },
    /// `POST /v2/lbaas/listeners` on the load balancer.
    CreateListener {
        /// Its name.
        name: String,
        /// Its protocol.
        protocol: ListenerProtocol,
        /// Its port.
        port: u16,
        /// Its default pool.
        default_pool: Option<Ref>,
        /// Its certificates (a `TERMINATED_HTTPS` listener).
        tls: Option<ListenerTls>,
        /// Its tags.
        tags: Vec<String>,
    },
    /// `PUT /v2/lbaas/listeners/{listener}` (the default pool, and the certificates when
    /// given).
    UpdateListener {
        /// The listener's id.
        listener: String,
        /// The new default pool.
        default_pool: Option<Ref>,
        /// The new certificates (None: left as they are).
        tls: Option<ListenerTls>,
    },
    /// `DELETE /v2/lbaas/listeners/{listener}`.
    DeleteListener {
        /// The listener's id.
        listener: String,
    },
    /// `POST /v2/lbaas/l7policies`.
    CreatePolicy {
        /// Its listener.
        listener: Ref,
        /// Its name.
        name: String,
        /// Its position (a taken one shifts the rest down).
        position: usize,
        /// What it does.
        action: PolicyAction<Ref>,
        /// Its tags.
        tags: Vec<String>,
    },
    /// `PUT /v2/lbaas/l7policies/{policy}` (position and action).
    UpdatePolicy {
        /// The policy's id.
        policy: String,
        /// Its new position.
        position: usize,
        /// What it does.
        action: PolicyAction<Ref>,
    },
    /// `DELETE /v2/lbaas/l7policies/{policy}` (its rules go with it).
    DeletePolicy {
        /// The policy's id.
        policy: String,
    },
    /// `POST /v2/lbaas/l7policies/{policy}/rules`.
    CreateRule {
        /// Its policy.
        policy: Ref,
        /// The rule.
        rule: Rule,
        /// Its tags.
        tags: Vec<String>,
    },
    /// `PUT /v2/lbaas/l7policies/{policy}/rules/{rule}` (every field).
    UpdateRule {
        /// The policy's id.
        policy: String,
        /// The rule's id.
        rule: String,
        /// What the rule becomes.
        to: Rule,
    },
    /// `DELETE /v2/lbaas/l7policies/{policy}/rules/{rule}`.
    DeleteRule {
        /// The policy's id.
        policy: String,
        /// The rule's id.
        rule: String,
    },
}
