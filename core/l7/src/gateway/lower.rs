//! The compiled Gateways written into the [`L7Config`](crate::model::L7Config) every driver
//! is fed (the rules service carries that model to routers, HAProxy renders it, Octavia plans
//! it), so HTTPRoutes are served beside Ingresses and Routes by the same drivers.
//!
//! Why a lowering and not the compiled form itself: the rules service's wire form is the L7
//! model, and a router, HAProxy and Octavia all take it. The model is Octavia's shape with
//! what Gateway API needs beyond it: `METHOD` and `QUERY_PARAM` rules, a request-relative
//! `REDIRECT` action, per-policy [`Filters`] (header changes, rewrites, mirrors) and a pool's
//! 500 share. What the controller's driver ([`Settings::driver`](super::Settings)) cannot
//! express is decided per rule by [`capabilities::explain`](super::capabilities::explain): a
//! rule that would send requests elsewhere without a missing feature is left out and reported
//! as a rejection; one that only loses something (a mirror on HAProxy; header changes, mirrors,
//! the 500 share on Octavia) is served and reported as a warning. Either way the route's
//! parents get the [`SERVED_CONDITION`] naming the field, never a silent difference.
//!
//! How an entry (rule × match × hostname, in the spec's precedence) becomes a policy:
//! - hostname: exact `HOST_NAME EQUAL_TO`; a wildcard (one or more labels) `HOST_NAME REGEX`;
//! - path: `Exact` is `PATH EQUAL_TO`, `PathPrefix` the element-wise `PATH REGEX` Ingress uses
//!   (`/` is `PATH STARTS_WITH /`, so a policy never lacks a rule), `RegularExpression` an
//!   anchored `PATH REGEX`;
//! - headers: `HEADER EQUAL_TO` / anchored `HEADER REGEX` keyed by name; query parameters the
//!   same as `QUERY_PARAM`; the method `METHOD EQUAL_TO`;
//! - RequestRedirect: `REDIRECT_PREFIX scheme://host[:port]` when it keeps the path and names
//!   a host (the redirect's or the entry's exact hostname), else `REDIRECT` (the request's
//!   host, a full or prefix path change, the query kept);
//! - URLRewrite, RequestHeaderModifier, ResponseHeaderModifier, RequestMirror: the policy's
//!   [`Filters`] (a prefix rewrite names the prefix the entry matched; a mirror's Service is a
//!   pool `gateway-mirror:<namespace>/<service>:<port>`);
//! - backends: one pool per rule (`gateway:<namespace>/<route>/<rule>`) mixing the valid
//!   Services' ready endpoints with member weights giving each Service its share, and the
//!   invalid backends' share as the pool's `unavailable_weight` (500).
//!
//! Policies of every HTTP listener of our Gateways go, in precedence order, after the Ingress
//! and Route policies of the HTTP listener; HTTPS listeners' to the TLS listener with their
//! certificates. Listener ports are the driver's addresses: kuryr-l7 serves one HTTP and one TLS
//! address, so a Gateway's listener port does not choose a socket.

use std::collections::{BTreeMap, BTreeSet};

use nephrite_krm::Object;

use super::capabilities::{Driver, DriverCapabilities, RuleSupport, Served, explain};
use super::compiled::{
    BackendTarget, CompiledListener, Filter, PathMatcher, PathModifier, Protocol, RouteEntry,
    RuleAction, ServiceBackend, ValueMatcher, precedence_key,
};
use super::hostname::Hostname;
use super::outcome::{Model, Verdict};
use super::{ObjectKey, api::GROUP};
use crate::backends::weighted_members;
use crate::model::{
    Action, Certificate, CompareType, DEFAULT_REDIRECT_CODE, Filters, HeaderChanges, Mirror,
    PathChange, Policy, Pool, PoolProtocol, Rule, RuleType,
};
use crate::objects::SecretBody;
use crate::table::path_prefix_regex;
use crate::translate::{Rejection, Translation, Warning};

/// The HTTPRoute parent condition saying how much of the route the data plane serves.
pub const SERVED_CONDITION: &str = "l7.kuryr.nephrite.io/Served";

/// The origin of reports about Gateway API objects.
pub const ORIGIN: &str = "gateway";

/// One rule's support on one listener of a Gateway, as the lowering decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSupport {
    /// The Gateway.
    pub gateway: ObjectKey,
    /// The listener.
    pub listener: String,
    /// How much of each rule is served.
    pub rules: Vec<RuleSupport>,
}

fn host_rule(hostname: &Hostname) -> Rule {
    match hostname {
        Hostname::Exact(host) => Rule::new(RuleType::HostName, CompareType::EqualTo, host),
        Hostname::Wildcard(suffix) => Rule::new(
            RuleType::HostName,
            CompareType::Regex,
            format!("(?s)^(?:[^.]+\\.)+{}$", regex::escape(suffix)),
        ),
    }
}

fn path_rule(path: &PathMatcher) -> Rule {
    match path {
        PathMatcher::Exact(exact) => Rule::new(RuleType::Path, CompareType::EqualTo, exact),
        PathMatcher::Prefix(prefix) if prefix.is_empty() => {
            Rule::new(RuleType::Path, CompareType::StartsWith, "/")
        }
        PathMatcher::Prefix(prefix) => Rule::new(
            RuleType::Path,
            CompareType::Regex,
            path_prefix_regex(prefix),
        ),
        PathMatcher::Regex(pattern) => Rule::new(
            RuleType::Path,
            CompareType::Regex,
            format!("^(?:{})$", pattern.source()),
        ),
    }
}

fn header_rule(name: &str, value: &ValueMatcher) -> Rule {
    match value {
        ValueMatcher::Exact(exact) => {
            Rule::new(RuleType::Header, CompareType::EqualTo, exact).with_key(name)
        }
        ValueMatcher::Regex(pattern) => Rule::new(
            RuleType::Header,
            CompareType::Regex,
            format!("^(?:{})$", pattern.source()),
        )
        .with_key(name),
    }
}

fn query_rule(name: &str, value: &ValueMatcher) -> Rule {
    match value {
        ValueMatcher::Exact(exact) => {
            Rule::new(RuleType::QueryParam, CompareType::EqualTo, exact).with_key(name)
        }
        ValueMatcher::Regex(pattern) => Rule::new(
            RuleType::QueryParam,
            CompareType::Regex,
            format!("^(?:{})$", pattern.source()),
        )
        .with_key(name),
    }
}

/// The pool id of a rule's backends.
pub fn pool_id(route: &ObjectKey, rule: usize) -> String {
    format!("gateway:{route}/{rule}")
}

/// The path change of a redirect or rewrite on `entry`'s path match (`ReplacePrefixMatch`
/// needs a `PathPrefix` match, which building the route checked).
fn path_change(modifier: &PathModifier, entry: &RouteEntry) -> Result<PathChange, String> {
    match (modifier, &entry.matcher.path) {
        (PathModifier::ReplaceFullPath(full), _) => Ok(PathChange::Full(full.clone())),
        (PathModifier::ReplacePrefixMatch(replacement), PathMatcher::Prefix(prefix)) => {
            Ok(PathChange::Prefix {
                matched: prefix.clone(),
                replacement: replacement.clone(),
            })
        }
        (PathModifier::ReplacePrefixMatch(_), other) => Err(format!(
            "ReplacePrefixMatch needs a PathPrefix match, not {other}"
        )),
    }
}

/// The pool id of a mirror's Service port.
pub fn mirror_pool_id(backend: &ServiceBackend) -> String {
    format!("gateway-mirror:{}:{}", backend.service, backend.port)
}

/// The filters of `entry`'s rule other than a redirect, and the mirror pools they use.
fn filters(entry: &RouteEntry, rule: &RuleAction) -> Result<(Filters, Vec<Pool>), String> {
    let mut out = Filters::default();
    let mut pools = Vec::new();
    let changes = |modifier: &super::compiled::HeaderModifier, into: &mut HeaderChanges| {
        into.set.extend(modifier.set.iter().cloned());
        into.add.extend(modifier.add.iter().cloned());
        into.remove.extend(modifier.remove.iter().cloned());
    };
    for filter in &rule.filters {
        match filter {
            Filter::RequestHeaders(modifier) => changes(modifier, &mut out.request_headers),
            Filter::ResponseHeaders(modifier) => changes(modifier, &mut out.response_headers),
            Filter::Rewrite(rewrite) => {
                if let Some(host) = &rewrite.hostname {
                    out.rewrite_host = Some(host.clone());
                }
                if let Some(modifier) = &rewrite.path {
                    out.rewrite_path = Some(path_change(modifier, entry)?);
                }
            }
            Filter::Mirror(mirror) => {
                let id = mirror_pool_id(&mirror.backend);
                let services = [(1, mirror.backend.endpoints.iter().copied().collect())];
                pools.push(Pool {
                    id: id.clone(),
                    members: weighted_members(&services),
                    protocol: PoolProtocol::default(),
                    unavailable_weight: 0,
                });
                out.mirrors.push(Mirror {
                    pool: id,
                    numerator: mirror.fraction.0,
                    denominator: mirror.fraction.1.max(1),
                });
            }
            Filter::Redirect(_) => {}
        }
    }
    Ok((out, pools))
}

/// The pool of a rule's weighted backends: the valid Services' ready endpoints as members
/// weighted so each Service gets its share, and the invalid backends' share answering 500
/// (all of it when no backend has a weight).
fn backend_pool(rule: &RuleAction) -> Pool {
    let services: Vec<(u32, BTreeSet<std::net::SocketAddr>)> = rule
        .backends
        .iter()
        .filter_map(|b| match &b.target {
            BackendTarget::Service(service) => {
                Some((b.weight, service.endpoints.iter().copied().collect()))
            }
            BackendTarget::Invalid(_) => None,
        })
        .collect();
    let members = weighted_members(&services);
    let invalid: u64 = rule
        .backends
        .iter()
        .filter(|b| matches!(b.target, BackendTarget::Invalid(_)))
        .map(|b| u64::from(b.weight))
        .sum();
    let total: u64 = rule.backends.iter().map(|b| u64::from(b.weight)).sum();
    // The members carry `weight × scale` per Service (see `weighted_members`).
    let served: u64 = services
        .iter()
        .filter(|(_, addresses)| !addresses.is_empty())
        .map(|(weight, _)| u64::from(*weight))
        .sum();
    let member_total: u64 = members.iter().map(|m| u64::from(m.weight)).sum();
    let unavailable_weight = if total == 0 || invalid == total {
        1
    } else if let Some(scale) = member_total.checked_div(served) {
        u32::try_from(invalid.saturating_mul(scale)).unwrap_or(u32::MAX)
    } else {
        0
    };
    let id = pool_id(&rule.route, rule.rule);
    Pool {
        id,
        members,
        protocol: PoolProtocol::default(),
        unavailable_weight,
    }
}

/// The action, filters and pools of `entry`.
fn action(
    listener: &CompiledListener,
    entry: &RouteEntry,
    rule: &RuleAction,
) -> Result<(Action, Filters, Vec<Pool>), String> {
    let (filters, mut pools) = filters(entry, rule)?;
    let redirect = rule.filters.iter().find_map(|f| match f {
        Filter::Redirect(redirect) => Some(redirect),
        _ => None,
    });
    if let Some(redirect) = redirect {
        let scheme = redirect
            .scheme
            .as_deref()
            .unwrap_or(listener.protocol.scheme());
        let port = redirect.port.unwrap_or(match redirect.scheme.as_deref() {
            Some("http") => 80,
            Some("https") => 443,
            _ => listener.port,
        });
        let host = match (&redirect.hostname, &entry.hostname) {
            (Some(host), _) => Some(host.clone()),
            (None, Some(Hostname::Exact(host))) => Some(host.clone()),
            _ => None,
        };
        let port = (!matches!((scheme, port), ("http", 80) | ("https", 443))).then_some(port);
        let code = match redirect.status_code {
            0 => DEFAULT_REDIRECT_CODE,
            code => code,
        };
        let path = redirect
            .path
            .as_ref()
            .map(|m| path_change(m, entry))
            .transpose()?;
        let action = match (&host, path) {
            // Octavia's own action when it says the same.
            (Some(host), None) => Action::RedirectPrefix {
                prefix: match port {
                    Some(port) => format!("{scheme}://{host}:{port}"),
                    None => format!("{scheme}://{host}"),
                },
                code,
            },
            (_, path) => Action::Redirect {
                scheme: scheme.to_owned(),
                host,
                port,
                path,
                code,
            },
        };
        // A redirect forwards nothing: only its response header changes apply.
        let filters = Filters {
            response_headers: filters.response_headers,
            ..Filters::default()
        };
        return Ok((action, filters, Vec::new()));
    }
    let pool = backend_pool(rule);
    let id = pool.id.clone();
    pools.push(pool);
    Ok((Action::RedirectToPool { pool: id }, filters, pools))
}

fn certificates(
    listener: &CompiledListener,
    objects: &[Object],
) -> Vec<Result<Certificate, String>> {
    listener
        .certificates
        .iter()
        .map(|key| {
            let secret = objects
                .iter()
                .find(|o| {
                    o.kind == "Secret"
                        && o.api_version == "v1"
                        && o.name() == Some(key.name.as_str())
                        && o.namespace().unwrap_or("default") == key.namespace
                })
                .ok_or_else(|| format!("Secret {key} is not found"))?;
            let body: SecretBody = serde_json::from_value(serde_json::Value::Object(
                secret
                    .body
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ))
            .map_err(|err| format!("Secret {key}: {err}"))?;
            let field = |name: &str| {
                body.text(name)
                    .map_err(|err| format!("Secret {key}: {err}"))?
                    .ok_or_else(|| format!("Secret {key} has no {name}"))
            };
            Ok(Certificate {
                hosts: listener.hostname.iter().map(ToString::to_string).collect(),
                cert_pem: field("tls.crt")?,
                key_pem: field("tls.key")?,
                origin: format!("Gateway listener {}", listener.name),
            })
        })
        .collect()
}

/// A policy ready to insert, with its precedence among all Gateway policies of its listener.
struct Placed<'a> {
    key: super::compiled::PrecedenceKey<'a>,
    policy: Policy,
    https: bool,
}

fn describe_route(route: &ObjectKey) -> String {
    format!("HTTPRoute {route}")
}

fn served_verdict(gaps: &[(Served, String)]) -> Option<Verdict> {
    let worst = gaps.iter().map(|(served, _)| *served).max()?;
    let message = gaps
        .iter()
        .map(|(_, text)| text.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    Some(match worst {
        Served::Not => Verdict::no("RuleNotServed", message),
        _ => Verdict::no("RulePartlyServed", message),
    })
}

/// Writes `model`'s compiled Gateways into `translation` (policies, pools, certificates,
/// reports) and sets each route parent's [`SERVED_CONDITION`]. `objects` are the source's
/// (for the listeners' certificate Secrets). Returns what each listener's rules get.
pub fn lower(
    model: &mut Model,
    objects: &[Object],
    driver: Driver,
    translation: &mut Translation,
) -> Vec<ListenerSupport> {
    let capabilities = DriverCapabilities::through_rules(driver);
    let mut supports = Vec::new();
    let mut placed: Vec<Placed<'_>> = Vec::new();
    let mut pools: BTreeMap<String, Pool> = BTreeMap::new();
    // Per route, per Gateway: the gaps found, as (served, text).
    let mut gaps: BTreeMap<(ObjectKey, ObjectKey), Vec<(Served, String)>> = BTreeMap::new();
    let mut reported: BTreeSet<(ObjectKey, usize, String)> = BTreeSet::new();
    for gateway in &model.compiled {
        for listener in &gateway.listeners {
            let rules = explain(listener, &capabilities);
            let https = listener.protocol == Protocol::Https;
            if https {
                for certificate in certificates(listener, objects) {
                    match certificate {
                        Ok(certificate) if !certificate.hosts.is_empty() => {
                            translation.config.certificates.push(certificate)
                        }
                        Ok(_) => translation.warnings.push(Warning {
                            object: format!("Gateway {}", gateway.gateway),
                            origin: ORIGIN.into(),
                            message: format!(
                                "listener {}: a certificate without a listener hostname is \
                                 not used (the TLS listener chooses certificates by host)",
                                listener.name
                            ),
                        }),
                        Err(reason) => translation.warnings.push(Warning {
                            object: format!("Gateway {}", gateway.gateway),
                            origin: ORIGIN.into(),
                            message: format!("listener {}: {reason}", listener.name),
                        }),
                    }
                }
            }
            for (action_index, support) in rules.iter().enumerate() {
                let rule = &listener.actions[action_index];
                let route_gaps = gaps
                    .entry((rule.route.clone(), gateway.gateway.clone()))
                    .or_default();
                for gap in &support.gaps {
                    let text = format!("{}: {}", gap.field, gap.note);
                    route_gaps.push((support.served, text.clone()));
                    if reported.insert((rule.route.clone(), rule.rule, text.clone())) {
                        let object = describe_route(&rule.route);
                        if support.served == Served::Not {
                            translation.rejections.push(Rejection {
                                object,
                                origin: ORIGIN.into(),
                                reason: text,
                            });
                        } else {
                            translation.warnings.push(Warning {
                                object,
                                origin: ORIGIN.into(),
                                message: text,
                            });
                        }
                    }
                }
                if support.served == Served::Not {
                    continue;
                }
                for entry in listener.entries.iter().filter(|e| e.action == action_index) {
                    let mut rules = Vec::new();
                    if let Some(hostname) = &entry.hostname {
                        rules.push(host_rule(hostname));
                    }
                    rules.push(path_rule(&entry.matcher.path));
                    rules.extend(entry.matcher.headers.iter().map(|(n, v)| header_rule(n, v)));
                    rules.extend(
                        entry.matcher.method.iter().map(|method| {
                            Rule::new(RuleType::Method, CompareType::EqualTo, method)
                        }),
                    );
                    rules.extend(entry.matcher.query.iter().map(|(n, v)| query_rule(n, v)));
                    let (action, filters, new_pools) = match action(listener, entry, rule) {
                        Ok(done) => done,
                        Err(reason) => {
                            let text = format!("spec.rules[{}].filters: {reason}", rule.rule);
                            route_gaps.push((Served::Not, text.clone()));
                            translation.rejections.push(Rejection {
                                object: describe_route(&rule.route),
                                origin: ORIGIN.into(),
                                reason: text,
                            });
                            continue;
                        }
                    };
                    for pool in new_pools {
                        pools.insert(pool.id.clone(), pool);
                    }
                    let host = entry
                        .hostname
                        .as_ref()
                        .map_or_else(|| "*".to_owned(), ToString::to_string);
                    let mut policy = Policy::new(
                        format!(
                            "gateway:{}/{}:{}/{}/{}/{host}",
                            gateway.gateway,
                            listener.name,
                            rule.route,
                            rule.rule,
                            entry.match_index
                        ),
                        action,
                        rules,
                    );
                    policy.filters = filters;
                    policy.origin = format!(
                        "HTTPRoute {} spec.rules[{}].matches[{}] host {host} (Gateway {} \
                         listener {})",
                        rule.route, rule.rule, entry.match_index, gateway.gateway, listener.name
                    );
                    placed.push(Placed {
                        key: precedence_key(entry, rule),
                        policy,
                        https,
                    });
                }
            }
            supports.push(ListenerSupport {
                gateway: gateway.gateway.clone(),
                listener: listener.name.clone(),
                rules,
            });
        }
    }
    placed.sort_by(|a, b| a.key.cmp(&b.key));
    for Placed { policy, https, .. } in placed {
        let listener = if https {
            &mut translation.config.https
        } else {
            &mut translation.config.http
        };
        if listener.policies().iter().any(|p| p.name == policy.name) {
            // The same entry reached through a second listener of the same kind.
            continue;
        }
        let name = policy.name.clone();
        if let Err(err) = listener.insert_policy(policy, None) {
            translation.rejections.push(Rejection {
                object: name,
                origin: ORIGIN.into(),
                reason: err.to_string(),
            });
        }
    }
    translation.config.pools.extend(pools);
    for route in &mut model.routes {
        for parent in &mut route.parents {
            if parent.parent_ref.group != GROUP || parent.parent_ref.kind != "Gateway" {
                continue;
            }
            let gateway = ObjectKey::new(
                parent
                    .parent_ref
                    .namespace
                    .as_deref()
                    .unwrap_or(&route.route.namespace),
                &parent.parent_ref.name,
            );
            parent.served = gaps
                .get(&(route.route.clone(), gateway))
                .and_then(|gaps| served_verdict(gaps));
        }
    }
    supports
}

#[cfg(test)]
mod tests;
