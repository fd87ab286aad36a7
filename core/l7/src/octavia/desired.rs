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
        .filter(|policy| !unexpressed(policy).iter().any(|u| u.refused))
        .map(|policy| {
            let action = match &policy.action {
                // `unexpressed` let through only the forms Octavia has.
                Action::Redirect {
                    scheme,
                    host,
                    port,
                    path,
                    code,
                } => {
                    let authority = match port {
                        Some(port) => format!("{}:{port}", host.as_deref().unwrap_or_default()),
                        None => host.clone().unwrap_or_default(),
                    };
                    match path {
                        Some(model::PathChange::Full(full)) => PolicyAction::RedirectToUrl {
                            url: format!("{scheme}://{authority}{full}"),
                            code: *code,
                        },
                        _ => PolicyAction::RedirectPrefix {
                            prefix: format!("{scheme}://{authority}"),
                            code: *code,
                        },
                    }
                }
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

/// Something of a policy Octavia's L7 model cannot say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpressed {
    /// The policy's name.
    pub policy: String,
    /// Where it came from (`HTTPRoute shop/web spec.rules[0]…`).
    pub origin: String,
    /// The model field (`rules[2] METHOD`, `filters.request_headers`, …).
    pub field: String,
    /// Refused: the policy is left out of the tree (serving it without the field would send
    /// requests elsewhere). Otherwise it is served without the field.
    pub refused: bool,
    /// What Octavia lacks.
    pub reason: String,
}

/// What of `policy` Octavia cannot express: rules of kuryr-only types, request-relative
/// redirects keeping the request's host or changing the path by prefix, rewrites (refused),
/// header changes and mirrors (served without). A REDIRECT to a fixed host becomes
/// REDIRECT_PREFIX, or REDIRECT_TO_URL for a full path (which drops the query).
pub fn unexpressed(policy: &model::Policy) -> Vec<Unexpressed> {
    let mut out = Vec::new();
    let mut note = |field: String, refused: bool, reason: &str| {
        out.push(Unexpressed {
            policy: policy.name.clone(),
            origin: policy.origin.clone(),
            field,
            refused,
            reason: reason.to_owned(),
        })
    };
    for (index, rule) in policy.rules.iter().enumerate() {
        if matches!(
            rule.rule_type,
            model::RuleType::Method | model::RuleType::QueryParam
        ) {
            note(
                format!("rules[{index}] {}", rule.rule_type),
                true,
                "Octavia has no such L7 rule type",
            );
        }
    }
    if let Action::Redirect { host, path, .. } = &policy.action {
        if host.is_none() {
            note(
                "action REDIRECT host".into(),
                true,
                "Octavia redirects to a fixed host only",
            );
        }
        if matches!(path, Some(model::PathChange::Prefix { .. })) {
            note(
                "action REDIRECT path (prefix)".into(),
                true,
                "Octavia cannot replace a path prefix in a redirect",
            );
        }
    }
    let filters = &policy.filters;
    if filters.rewrite_host.is_some() {
        note(
            "filters.rewrite_host".into(),
            true,
            "Octavia cannot rewrite the Host",
        );
    }
    if filters.rewrite_path.is_some() {
        note(
            "filters.rewrite_path".into(),
            true,
            "Octavia cannot rewrite the path",
        );
    }
    if !filters.request_headers.is_empty() {
        note(
            "filters.request_headers".into(),
            false,
            "Octavia cannot change request headers",
        );
    }
    if !filters.response_headers.is_empty() {
        note(
            "filters.response_headers".into(),
            false,
            "Octavia cannot change response headers",
        );
    }
    if !filters.mirrors.is_empty() {
        note(
            "filters.mirrors".into(),
            false,
            "Octavia cannot mirror requests",
        );
    }
    out
}

/// [`unexpressed`] for every policy of `config`, and each pool whose 500 share Octavia cannot
/// answer (served by its members alone; `policy` is empty, `origin` the pool id).
pub fn unexpressed_in(config: &L7Config) -> Vec<Unexpressed> {
    let mut out: Vec<Unexpressed> = config
        .http
        .policies()
        .iter()
        .chain(config.https.policies())
        .flat_map(unexpressed)
        .collect();
    out.extend(
        config
            .pools
            .values()
            .filter(|p| p.unavailable_weight > 0)
            .map(|pool| Unexpressed {
                policy: String::new(),
                origin: pool.id.clone(),
                field: "pool unavailable_weight".into(),
                refused: false,
                reason: "Octavia cannot answer 500 for a share of a pool".into(),
            }),
    );
    out
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
