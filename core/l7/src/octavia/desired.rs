//! The tree the load balancer should hold, by names: what a translation asks of Octavia.

use std::collections::BTreeSet;

use super::{ListenerProtocol, ListenerTls, PolicyAction, PoolProtocol};
use crate::model::{self, Action, Certificate, L7Config, Listener, Rule};

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
    /// Its certificates (a `TERMINATED_HTTPS` listener).
    pub tls: Option<ListenerTls>,
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

/// The name of the `TERMINATED_HTTPS` listener (port 443) [`Desired::from_config_with_tls`]
/// asks for.
pub const HTTPS_LISTENER: &str = "kuryr-l7-https";

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
    /// termination needs certificates in Barbican: see [`Desired::from_config_with_tls`].
    pub fn from_config(config: &L7Config) -> Self {
        Self::from_config_with_tls(config, |_| None)
    }

    /// [`Desired::from_config`] and, when `config` has certificates, a `TERMINATED_HTTPS`
    /// listener on port 443 ([`HTTPS_LISTENER`]) with the HTTPS listener's policies and
    /// default pool; `container` gives each certificate's Barbican container reference (None:
    /// not stored, left out). Its default certificate is the first certificate's, and every
    /// certificate is an SNI certificate (Octavia picks one by the names in it). With no
    /// stored certificate there is no HTTPS listener. Passthrough needs a TCP listener and
    /// is not planned here.
    pub fn from_config_with_tls(
        config: &L7Config,
        container: impl Fn(&Certificate) -> Option<String>,
    ) -> Self {
        let mut used: BTreeSet<&str> = BTreeSet::new();
        let mut listeners = vec![desired_listener(
            &config.http,
            HTTP_LISTENER,
            ListenerProtocol::Http,
            80,
            None,
            &mut used,
        )];
        let refs: Vec<String> = config.certificates.iter().filter_map(&container).collect();
        if let Some(default_container) = refs.first().cloned() {
            let tls = ListenerTls {
                default_container,
                sni_containers: refs,
            }
            .normalized();
            listeners.push(desired_listener(
                &config.https,
                HTTPS_LISTENER,
                ListenerProtocol::TerminatedHttps,
                443,
                Some(tls),
                &mut used,
            ));
        }
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
        Desired { listeners, pools }
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&DesiredPool> {
        self.pools.iter().find(|p| p.name == name)
    }
}

/// One listener of the tree: `listener`'s policies in order and its default pool, the pools
/// they use added to `used`.
fn desired_listener<'a>(
    listener: &'a Listener,
    name: &str,
    protocol: ListenerProtocol,
    port: u16,
    tls: Option<ListenerTls>,
    used: &mut BTreeSet<&'a str>,
) -> DesiredListener {
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
    DesiredListener {
        name: name.to_owned(),
        protocol,
        port,
        default_pool: listener.default_pool.clone(),
        tls,
        policies,
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
