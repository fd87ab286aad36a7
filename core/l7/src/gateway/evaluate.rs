//! The reference evaluation of a compiled Gateway: which listener takes a request, which entry
//! matches, what the filters do and which backend gets it. Drivers are checked against it (the
//! conformance cases run here first).
//!
//! What the spec leaves to us, and what we chose: the path is matched after dot-segment removal
//! and without the query (as [`normalize_path`] does), the host without port and in lower case;
//! the backend is chosen by a `pick` the caller draws (uniform over `0..Σweights`, so a test can
//! walk every value and see the exact split); an invalid backend's share answers 500, a Service
//! without ready endpoints 503, no matching entry 404.

use serde::Serialize;

use super::ObjectKey;
use super::compiled::{
    BackendTarget, CompiledGateway, CompiledListener, Filter, HeaderModifier, Mirror, PathMatcher,
    PathModifier, RouteEntry, ServiceBackend,
};
use super::hostname::Hostname;
use crate::eval::{normalize_host, normalize_path};

/// A request as it reaches a Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpRequest {
    /// The listener port it arrived on.
    pub port: u16,
    /// The method (any case).
    pub method: String,
    /// The Host header (a port in it is ignored).
    pub host: String,
    /// The request target: path and query.
    pub target: String,
    /// The headers.
    pub headers: Vec<(String, String)>,
}

/// A request forwarded to a backend, as the backend sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Forward {
    /// The route that took it.
    pub route: ObjectKey,
    /// The rule's index in the route.
    pub rule: usize,
    /// Where it goes.
    pub backend: ServiceBackend,
    /// The Host header the backend sees: the request's as sent, or the URLRewrite hostname.
    pub host: String,
    /// The target (path and query) the backend sees.
    pub target: String,
    /// The request headers after the RequestHeaderModifier filters.
    pub headers: Vec<(String, String)>,
    /// What to change in the backend's response headers.
    pub response_headers: HeaderModifier,
    /// Every mirror of the rule; drawing which requests a mirror of `fraction` below 1/1
    /// gets is the driver's.
    pub mirrors: Vec<Mirror>,
}

/// What happens to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Decision {
    /// Forwarded (boxed: the other outcomes are small).
    Forward(Box<Forward>),
    /// Redirected.
    Redirect {
        /// The status code.
        status: u16,
        /// The `Location`.
        location: String,
        /// Response header changes.
        response_headers: HeaderModifier,
    },
    /// Answered by the Gateway itself (404: no match; 500: invalid backend; 503: no endpoint).
    Respond {
        /// The status code.
        status: u16,
        /// Why.
        reason: String,
    },
}

impl Decision {
    /// The status code the client sees (200 stands for whatever the backend answers).
    pub fn status(&self) -> u16 {
        match self {
            Decision::Forward(_) => 200,
            Decision::Redirect { status, .. } | Decision::Respond { status, .. } => *status,
        }
    }
}

fn respond(status: u16, reason: impl Into<String>) -> Decision {
    Decision::Respond {
        status,
        reason: reason.into(),
    }
}

/// Query parameters of a target, in order, undecoded.
fn query_params(target: &str) -> Vec<(&str, &str)> {
    let Some((_, query)) = target.split_once('?') else {
        return Vec::new();
    };
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .collect()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

fn entry_matches(
    entry: &RouteEntry,
    host: &str,
    path: &str,
    request: &HttpRequest,
    query: &[(&str, &str)],
) -> bool {
    let matcher = &entry.matcher;
    entry.hostname.as_ref().is_none_or(|h| h.matches(host))
        && matcher.path.matches(path)
        && matcher
            .method
            .as_ref()
            .is_none_or(|m| m.eq_ignore_ascii_case(&request.method))
        && matcher
            .headers
            .iter()
            .all(|(name, value)| header(&request.headers, name).is_some_and(|v| value.matches(v)))
        && matcher.query.iter().all(|(name, value)| {
            query
                .iter()
                .find(|(key, _)| key == name)
                .is_some_and(|(_, v)| value.matches(v))
        })
}

/// `path` with `modifier` applied; `matched` is the entry's path match.
fn modify_path(path: &str, modifier: &PathModifier, matched: &PathMatcher) -> String {
    match (modifier, matched) {
        (PathModifier::ReplaceFullPath(full), _) => full.clone(),
        (PathModifier::ReplacePrefixMatch(replacement), PathMatcher::Prefix(prefix)) => {
            let rest = &path[prefix.len().min(path.len())..];
            let joined = format!("{}{rest}", replacement.trim_end_matches('/'));
            if joined.is_empty() {
                "/".to_owned()
            } else {
                joined
            }
        }
        // Refused when compiling: ReplacePrefixMatch needs a PathPrefix match.
        (PathModifier::ReplacePrefixMatch(_), _) => path.to_owned(),
    }
}

fn with_query(path: String, target: &str) -> String {
    match target.split_once('?') {
        Some((_, query)) => format!("{path}?{query}"),
        None => path,
    }
}

impl CompiledGateway {
    /// The listener on `port` whose hostname covers `host` most specifically.
    pub fn listener(&self, port: u16, host: &str) -> Option<&CompiledListener> {
        self.listeners
            .iter()
            .filter(|l| l.port == port && l.hostname.as_ref().is_none_or(|h| h.matches(host)))
            .min_by_key(|l| Hostname::specificity(l.hostname.as_ref()))
    }

    /// The decision for `request`; `pick` chooses among weighted backends (taken modulo the
    /// rule's total weight).
    pub fn route(&self, request: &HttpRequest, pick: u64) -> Decision {
        let Some(host) = normalize_host(&request.host) else {
            return respond(400, "the request has no Host");
        };
        let Some(listener) = self.listener(request.port, &host) else {
            return respond(
                404,
                format!("no listener on port {} serves host {host}", request.port),
            );
        };
        listener.route(&host, request, pick)
    }
}

impl CompiledListener {
    /// The entry that decides `request` (its host already normalized as `host`): the first in
    /// precedence order that matches.
    pub fn decisive_entry(&self, host: &str, request: &HttpRequest) -> Option<&RouteEntry> {
        let path = normalize_path(&request.target);
        let query = query_params(&request.target);
        self.entries
            .iter()
            .find(|entry| entry_matches(entry, host, &path, request, &query))
    }

    /// The decision for `request` (its host already normalized as `host`).
    pub fn route(&self, host: &str, request: &HttpRequest, pick: u64) -> Decision {
        let path = normalize_path(&request.target);
        let Some(entry) = self.decisive_entry(host, request) else {
            return respond(404, format!("no route of listener {} matches", self.name));
        };
        let action = &self.actions[entry.action];
        let mut headers = request.headers.clone();
        let mut response_headers = HeaderModifier::default();
        let mut mirrors = Vec::new();
        let mut forward_host = request.host.clone();
        let mut forward_path = path.to_string();
        for filter in &action.filters {
            match filter {
                Filter::RequestHeaders(modifier) => modifier.apply(&mut headers),
                Filter::ResponseHeaders(modifier) => response_headers.extend(modifier),
                Filter::Mirror(mirror) => mirrors.push(mirror.clone()),
                Filter::Rewrite(rewrite) => {
                    if let Some(hostname) = &rewrite.hostname {
                        forward_host.clone_from(hostname);
                    }
                    if let Some(modifier) = &rewrite.path {
                        forward_path = modify_path(&path, modifier, &entry.matcher.path);
                    }
                }
                Filter::Redirect(redirect) => {
                    let scheme = redirect.scheme.as_deref().unwrap_or(self.protocol.scheme());
                    let port = redirect.port.unwrap_or(match redirect.scheme.as_deref() {
                        Some("http") => 80,
                        Some("https") => 443,
                        _ => self.port,
                    });
                    let location_host = redirect.hostname.as_deref().unwrap_or(host);
                    let default_port = matches!((scheme, port), ("http", 80) | ("https", 443));
                    let authority = if default_port {
                        location_host.to_owned()
                    } else {
                        format!("{location_host}:{port}")
                    };
                    let new_path = match &redirect.path {
                        Some(modifier) => modify_path(&path, modifier, &entry.matcher.path),
                        None => path.to_string(),
                    };
                    return Decision::Redirect {
                        status: redirect.status_code,
                        location: format!(
                            "{scheme}://{authority}{}",
                            with_query(new_path, &request.target)
                        ),
                        response_headers,
                    };
                }
            }
        }
        let total: u64 = action.backends.iter().map(|b| u64::from(b.weight)).sum();
        if total == 0 {
            return respond(
                500,
                format!(
                    "rule {} of HTTPRoute {} has no backend with a weight",
                    action.rule, action.route
                ),
            );
        }
        let mut left = pick % total;
        let chosen = action
            .backends
            .iter()
            .find(|b| {
                let weight = u64::from(b.weight);
                if left < weight {
                    true
                } else {
                    left -= weight;
                    false
                }
            })
            .map(|b| &b.target);
        match chosen {
            Some(BackendTarget::Service(backend)) if backend.endpoints.is_empty() => respond(
                503,
                format!(
                    "Service {} port {} has no ready endpoint",
                    backend.service, backend.port
                ),
            ),
            Some(BackendTarget::Service(backend)) => Decision::Forward(Box::new(Forward {
                route: action.route.clone(),
                rule: action.rule,
                backend: backend.clone(),
                host: forward_host,
                target: with_query(forward_path, &request.target),
                headers,
                response_headers,
                mirrors,
            })),
            Some(BackendTarget::Invalid(reason)) => respond(500, reason.clone()),
            None => respond(500, "no backend chosen"),
        }
    }
}
