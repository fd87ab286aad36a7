//! The Octavia plan: which Octavia v2 calls turn the load balancer's observed L7 tree into the
//! desired one, decided without IO.
//!
//! An executor reads the tree (listeners, pools with members, L7 policies with rules, each
//! with id, name, tags and provisioning status) into a [`Tree`], builds the [`Desired`] tree
//! from a translation ([`Desired::from_config`]), and runs the [`plan`] one [`Call`] at a
//! time, waiting for the load balancer to be `ACTIVE` between calls. Objects a call creates
//! are named by later calls as [`Ref::Created`] (the index of the creating call), so the plan
//! is decided before any id exists.
//!
//! - Ownership: objects this controller creates carry the tags of [`Ownership`] (the cluster,
//!   and the Kubernetes object they come from). Objects without the cluster's tag are foreign:
//!   no call ever names them, and a pool a foreign policy or listener uses is never deleted.
//! - Identity: listeners, pools and policies by name, members by address and port, rules by
//!   content. Several owned objects with one name (a crash between a create and its record)
//!   keep one and delete the rest, so a re-plan after any interruption converges with no
//!   duplicate. Owned objects in `ERROR` are replaced; objects `PENDING_DELETE` are gone.
//! - Order: pools first (policies and listeners refer to them), then members, listeners,
//!   policies (deletions, then each desired policy in order, placed right after the one before
//!   it), rules, and last the pools nothing uses any more.
//! - Minimal: every call is needed; [`minimal_calls`] counts the least number of calls a
//!   change needs, independently of the planner, and the planner meets it.
//!
//! [`Tree::apply`] is Octavia's own semantics of these calls (positions shifting on insert and
//! renumbered 1..n, a pool in use refusing deletion), for tests and simulations.

mod call;
mod desired;
mod minimal;
mod plan;
mod readback;
mod request;
mod tree;

#[cfg(test)]
mod tests;

pub use call::{Call, Ref};
pub use desired::{
    Desired, DesiredListener, DesiredPolicy, DesiredPool, Unexpressed, unexpressed, unexpressed_in,
};
pub use desired::{HTTP_LISTENER, HTTPS_LISTENER};
pub use minimal::minimal_calls;
pub use plan::{PlanError, plan};
pub use request::{Method, Request, add_tls, answer_key};
pub use tree::{
    ApplyError, ListenerProtocol, ListenerTls, ObservedListener, ObservedMember, ObservedPolicy,
    ObservedPool, ObservedRule, PoolProtocol, ProvisioningStatus, Tree,
};

/// What a matching L7 policy does; `P` names the pool (an id, a name, or a [`Ref`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyAction<P> {
    /// Refuse the request.
    Reject,
    /// Redirect to a URL.
    RedirectToUrl {
        /// The URL.
        url: String,
        /// The redirect code.
        code: u16,
    },
    /// Redirect to a prefix followed by the request target.
    RedirectPrefix {
        /// The prefix.
        prefix: String,
        /// The redirect code.
        code: u16,
    },
    /// Forward to a pool.
    RedirectToPool(P),
}

impl<P> PolicyAction<P> {
    /// The same action with its pool mapped by `f` (which may fail).
    pub fn try_map_pool<Q, E>(
        &self,
        f: impl FnOnce(&P) -> Result<Q, E>,
    ) -> Result<PolicyAction<Q>, E> {
        Ok(match self {
            PolicyAction::Reject => PolicyAction::Reject,
            PolicyAction::RedirectToUrl { url, code } => PolicyAction::RedirectToUrl {
                url: url.clone(),
                code: *code,
            },
            PolicyAction::RedirectPrefix { prefix, code } => PolicyAction::RedirectPrefix {
                prefix: prefix.clone(),
                code: *code,
            },
            PolicyAction::RedirectToPool(pool) => PolicyAction::RedirectToPool(f(pool)?),
        })
    }

    /// The pool it forwards to.
    pub fn pool(&self) -> Option<&P> {
        match self {
            PolicyAction::RedirectToPool(pool) => Some(pool),
            _ => None,
        }
    }
}

/// The tags that mark what this controller owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The cluster this controller serves.
    pub cluster: String,
}

/// The tag prefix naming the cluster.
pub const CLUSTER_TAG: &str = "kuryr-l7-cluster:";
/// The tag prefix naming the Kubernetes object.
pub const OBJECT_TAG: &str = "kuryr-l7-object:";

impl Ownership {
    /// The owner of objects for `cluster`.
    pub fn new(cluster: impl Into<String>) -> Self {
        Ownership {
            cluster: cluster.into(),
        }
    }

    /// The cluster's tag.
    pub fn cluster_tag(&self) -> String {
        format!("{CLUSTER_TAG}{}", self.cluster)
    }

    /// The tags of an object created for the Kubernetes `object` (`Ingress shop/web`).
    pub fn tags(&self, object: &str) -> Vec<String> {
        vec![self.cluster_tag(), format!("{OBJECT_TAG}{object}")]
    }

    /// Whether an object with `tags` is ours.
    pub fn owns(&self, tags: &[String]) -> bool {
        let ours = self.cluster_tag();
        tags.contains(&ours)
    }
}
