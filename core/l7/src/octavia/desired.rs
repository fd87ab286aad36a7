//! The tree the load balancer should hold, by names: what a translation asks of Octavia.

use std::collections::BTreeSet;

use super::{ListenerProtocol, PolicyAction, PoolProtocol};
use crate::model::{self, Action, L7Config, Rule};

/// A policy as it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredPolicy {
    /// Its name (unique within the listener).
    pub name: String,
    /// What it does, naming a pool by name.
    pub action: PolicyAction<String>,
    /// Its rules (ANDed).
    pub rules: Vec<Rule>,
    /// The Kubernetes object it comes from (`Ingress shop/web`), for its tags.
    pub object: String,
}

/// A listener as it should be, its policies in position order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredListener {
    /// Its name (unique among the load balancer's listeners).
    pub name: String,
    /// Its protocol.
    pub protocol: ListenerProtocol,
    /// Its port.
    pub port: u16,
    /// The pool when no policy matches, by name.
    pub default_pool: Option<String>,
    /// The policies, position 1 first.
    pub policies: Vec<DesiredPolicy>,
}

/// A pool as it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredPool {
    /// Its name (unique among the load balancer's pools).
    pub name: String,
    /// Its protocol.
    pub protocol: PoolProtocol,
    /// Its members, one per address.
    pub members: Vec<model::Member>,
    /// The Kubernetes object it comes from (`Service shop/web`), for its tags.
    pub object: String,
}

/// The L7 tree a load balancer should hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// The listeners.
    pub listeners: Vec<DesiredListener>,
    /// The pools.
    pub pools: Vec<DesiredPool>,
}

/// The name of the plain HTTP listener [`Desired::from_config`] asks for.
pub const HTTP_LISTENER: &str = "kuryr-l7-http";

/// The Kubernetes object a pool id comes from: `shop/web:80` is `Service shop/web`,
/// `route:shop/web` is `Route shop/web`.
fn pool_object(id: &str) -> String {
    match id.strip_prefix("route:") {
        Some(route) => format!("Route {route}"),
        None => format!(
            "Service {}",
            id.rsplit_once(':').map_or(id, |(service, _)| service)
        ),
    }
}

impl Desired {
    /// The tree for `config`'s plain HTTP listener (port 80): its policies in order, its
    /// default pool, and every pool they use with its members (one per address). TLS
    /// termination and passthrough need certificates in Barbican and are not planned here.
    pub fn from_config(config: &L7Config) -> Self {
        let listener = &config.http;
        let mut used: BTreeSet<&str> = BTreeSet::new();
        used.extend(listener.default_pool.as_deref());
        let policies = listener
            .policies()
            .iter()
            .map(|policy| {
                let action = match &policy.action {
                    Action::Reject => PolicyAction::Reject,
                    Action::RedirectToUrl { url, code } => PolicyAction::RedirectToUrl {
                        url: url.clone(),
                        code: *code,
                    },
                    Action::RedirectPrefix { prefix, code } => PolicyAction::RedirectPrefix {
                        prefix: prefix.clone(),
                        code: *code,
                    },
                    Action::RedirectToPool { pool } => {
                        used.insert(pool);
                        PolicyAction::RedirectToPool(pool.clone())
                    }
                };
                DesiredPolicy {
                    name: policy.name.clone(),
                    action,
                    rules: policy.rules.clone(),
                    object: policy.origin.clone(),
                }
            })
            .collect();
        let pools = used
            .into_iter()
            .map(|id| {
                let pool = config.pools.get(id);
                let mut seen = BTreeSet::new();
                let members = pool
                    .map(|p| p.members.as_slice())
                    .unwrap_or_default()
                    .iter()
                    .filter(|m| seen.insert(m.address))
                    .cloned()
                    .collect();
                let protocol = match pool.map(|p| &p.protocol) {
                    Some(model::PoolProtocol::Https { .. }) => PoolProtocol::Https,
                    _ => PoolProtocol::Http,
                };
                DesiredPool {
                    name: id.to_owned(),
                    protocol,
                    members,
                    object: pool_object(id),
                }
            })
            .collect();
        Desired {
            listeners: vec![DesiredListener {
                name: HTTP_LISTENER.to_owned(),
                protocol: ListenerProtocol::Http,
                port: 80,
                default_pool: listener.default_pool.clone(),
                policies,
            }],
            pools,
        }
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&DesiredPool> {
        self.pools.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_name_their_service_or_route() {
        assert_eq!(pool_object("shop/web:80"), "Service shop/web");
        assert_eq!(pool_object("shop/web:http"), "Service shop/web");
        assert_eq!(pool_object("route:shop/web"), "Route shop/web");
    }
}
