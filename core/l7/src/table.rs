//! The compiled route table: answers "which backend for (host, path, headers)" without scanning
//! every policy.
//!
//! Each policy is filed under the host it requires (a hash map of exact hosts, a hash map of
//! wildcard suffixes, or "any host") and, inside that, under the path it requires (a hash map of
//! exact paths, a trie of element-wise prefixes keyed by path segment, or "other"). A lookup
//! visits only the buckets a request can fall in — at most three host buckets and, in each, one
//! exact-path probe plus one trie walk as deep as the request path — and keeps the lowest
//! position whose remaining rules match. Every policy that matches a request sits in a visited
//! bucket, so the answer is the one the position-order evaluation gives (a property test checks
//! this on random rule sets and requests).
//!
//! The forms it indexes are the ones translation writes: `HOST_NAME EQUAL_TO h`,
//! `HOST_NAME REGEX (?s)^[^.]+\.<suffix>$` (a one-label wildcard), `PATH EQUAL_TO p` and
//! `PATH REGEX (?s)^<prefix>(?:/.*)?$` (an element-wise prefix). Any other rule is checked
//! per candidate; a policy with no indexable rule lands in the "other" lists.

use std::collections::{BTreeMap, HashMap};

use regex::Regex;

use crate::eval::{NO_FILTERS, Outcome, Request, apply_action, compile_regex, rule_matches};
use crate::model::{Action, CompareType, Filters, L7Config, Listener, Pool, Rule, RuleType};

#[cfg(test)]
mod tests;

/// A hash map with the table's key hash: a lookup hashes the host and each path segment, short
/// strings for which SipHash (std's default) would cost more than the rest of the lookup;
/// foldhash, seeded per map, keeps the bucket layout unpredictable to clients.
type KeyMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The regex translation writes for a one-label wildcard host `*.<suffix>`.
pub fn wildcard_host_regex(suffix: &str) -> String {
    format!("(?s)^[^.]+\\.{}$", regex::escape(suffix))
}

/// The regex translation writes for an element-wise path prefix (`/foo` matches `/foo`,
/// `/foo/` and `/foo/bar`, not `/foobar`). `prefix` has no trailing slash; `/` is `""`.
pub fn path_prefix_regex(prefix: &str) -> String {
    format!("(?s)^{}(?:/.*)?$", regex::escape(prefix))
}

fn unescape_literal(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next()?);
        } else {
            out.push(c);
        }
    }
    (regex::escape(&out) == escaped).then_some(out)
}

/// The suffix of a wildcard-host regex written by [`wildcard_host_regex`].
pub fn parse_wildcard_host_regex(value: &str) -> Option<String> {
    let inner = value.strip_prefix("(?s)^[^.]+\\.")?.strip_suffix('$')?;
    unescape_literal(inner).filter(|s| s.is_ascii())
}

/// The prefix of an element-wise prefix regex written by [`path_prefix_regex`].
pub fn parse_path_prefix_regex(value: &str) -> Option<String> {
    let inner = value.strip_prefix("(?s)^")?.strip_suffix("(?:/.*)?$")?;
    unescape_literal(inner).filter(|p| p.is_empty() || p.starts_with('/'))
}

#[derive(Debug)]
struct CompiledRule {
    rule: Rule,
    regex: Option<Regex>,
}

#[derive(Debug)]
struct CompiledPolicy {
    action: Action,
    filters: Filters,
    /// Rules the index does not already guarantee.
    residual: Vec<CompiledRule>,
    /// A policy without rules never matches.
    empty: bool,
}

#[derive(Debug, Default)]
struct TrieNode {
    here: Vec<u32>,
    children: KeyMap<Box<str>, TrieNode>,
}

#[derive(Debug, Default)]
struct PathIndex {
    exact: KeyMap<Box<str>, Vec<u32>>,
    prefixes: TrieNode,
    other: Vec<u32>,
}

enum HostKey {
    Exact(String),
    Wildcard(String),
    Any,
}

enum PathKey {
    Exact(String),
    Prefix(String),
    Other,
}

impl PathIndex {
    fn insert(&mut self, key: PathKey, index: u32) {
        match key {
            PathKey::Exact(path) => self.exact.entry(path.into()).or_default().push(index),
            PathKey::Prefix(prefix) => {
                let mut node = &mut self.prefixes;
                if !prefix.is_empty() {
                    for segment in prefix[1..].split('/') {
                        node = node.children.entry(segment.into()).or_default();
                    }
                }
                node.here.push(index);
            }
            PathKey::Other => self.other.push(index),
        }
    }

    /// Lowest matching index below `best`.
    fn lookup(&self, policies: &[CompiledPolicy], request: &Request<'_>, best: &mut u32) {
        if let Some(list) = self.exact.get(request.path) {
            first_match(list, policies, request, best);
        }
        let mut node = &self.prefixes;
        first_match(&node.here, policies, request, best);
        if let Some(rest) = request.path.strip_prefix('/') {
            for segment in rest.split('/') {
                match node.children.get(segment) {
                    Some(child) => {
                        node = child;
                        first_match(&node.here, policies, request, best);
                    }
                    None => break,
                }
            }
        }
        first_match(&self.other, policies, request, best);
    }
}

fn first_match(list: &[u32], policies: &[CompiledPolicy], request: &Request<'_>, best: &mut u32) {
    for &index in list {
        if index >= *best {
            return;
        }
        let policy = &policies[index as usize];
        if !policy.empty
            && policy
                .residual
                .iter()
                .all(|r| rule_matches(&r.rule, r.regex.as_ref(), request))
        {
            *best = index;
            return;
        }
    }
}

/// A listener compiled for fast lookup.
#[derive(Debug, Default)]
pub struct CompiledListener {
    policies: Vec<CompiledPolicy>,
    exact_hosts: KeyMap<Box<str>, PathIndex>,
    wildcard_hosts: KeyMap<Box<str>, PathIndex>,
    any_host: PathIndex,
    default_pool: Option<String>,
    no_match_status: u16,
}

fn host_key(rule: &Rule) -> Option<HostKey> {
    if rule.rule_type != RuleType::HostName || rule.invert {
        return None;
    }
    match rule.compare_type {
        CompareType::EqualTo => Some(HostKey::Exact(rule.value.to_ascii_lowercase())),
        CompareType::Regex => parse_wildcard_host_regex(&rule.value)
            .map(|suffix| HostKey::Wildcard(suffix.to_ascii_lowercase())),
        _ => None,
    }
}

fn path_key(rule: &Rule) -> Option<PathKey> {
    if rule.rule_type != RuleType::Path || rule.invert {
        return None;
    }
    match rule.compare_type {
        CompareType::EqualTo => Some(PathKey::Exact(rule.value.clone())),
        CompareType::Regex => parse_path_prefix_regex(&rule.value).map(PathKey::Prefix),
        _ => None,
    }
}

impl CompiledListener {
    /// Compiles `listener`'s policies into the index.
    pub fn compile(listener: &Listener) -> Self {
        let mut compiled = CompiledListener {
            default_pool: listener.default_pool.clone(),
            no_match_status: listener.no_match_status,
            ..CompiledListener::default()
        };
        for (index, policy) in listener.policies().iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            let mut host = HostKey::Any;
            let mut path = PathKey::Other;
            let mut host_rule = None;
            let mut path_rule = None;
            for (at, rule) in policy.rules.iter().enumerate() {
                if host_rule.is_none()
                    && let Some(key) = host_key(rule)
                {
                    host = key;
                    host_rule = Some(at);
                } else if path_rule.is_none()
                    && let Some(key) = path_key(rule)
                {
                    path = key;
                    path_rule = Some(at);
                }
            }
            let residual = policy
                .rules
                .iter()
                .enumerate()
                .filter(|(at, _)| Some(*at) != host_rule && Some(*at) != path_rule)
                .map(|(_, rule)| CompiledRule {
                    regex: compile_regex(rule),
                    rule: rule.clone(),
                })
                .collect();
            compiled.policies.push(CompiledPolicy {
                action: policy.action.clone(),
                filters: policy.filters.clone(),
                residual,
                empty: policy.rules.is_empty(),
            });
            let bucket = match host {
                HostKey::Exact(host) => compiled.exact_hosts.entry(host.into()).or_default(),
                HostKey::Wildcard(suffix) => {
                    compiled.wildcard_hosts.entry(suffix.into()).or_default()
                }
                HostKey::Any => &mut compiled.any_host,
            };
            bucket.insert(path, index);
        }
        compiled
    }

    /// The number of policies.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether there are no policies.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// What to do with `request`: the same answer as [`Listener::evaluate`].
    pub fn lookup(&self, request: &Request<'_>) -> Outcome<'_> {
        self.lookup_with_filters(request).0
    }

    /// [`lookup`](Self::lookup) with the deciding policy's filters (the same as
    /// [`Listener::evaluate_with_filters`]).
    pub fn lookup_with_filters(&self, request: &Request<'_>) -> (Outcome<'_>, &Filters) {
        let mut best = u32::MAX;
        if let Some(index) = self.exact_hosts.get(request.host) {
            index.lookup(&self.policies, request, &mut best);
        }
        if !self.wildcard_hosts.is_empty()
            && let Some((label, suffix)) = request.host.split_once('.')
            && !label.is_empty()
            && let Some(index) = self.wildcard_hosts.get(suffix)
        {
            index.lookup(&self.policies, request, &mut best);
        }
        self.any_host.lookup(&self.policies, request, &mut best);
        match self.policies.get(best as usize) {
            Some(policy) => (apply_action(&policy.action, request), &policy.filters),
            None => (
                match &self.default_pool {
                    Some(pool) => Outcome::Pool(pool),
                    None => Outcome::Status(self.no_match_status),
                },
                &NO_FILTERS,
            ),
        }
    }
}

/// The whole configuration compiled: both listeners, the pools, certificates and passthrough
/// hosts. This is what the router serves and swaps atomically.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// Plain HTTP.
    pub http: CompiledListener,
    /// TLS-terminated HTTPS.
    pub https: CompiledListener,
    /// Pools by id.
    pub pools: HashMap<String, Pool>,
    /// Certificates in precedence order.
    pub certificates: Vec<crate::model::Certificate>,
    /// SNI host → pool for TLS passthrough.
    pub passthrough: HashMap<String, String>,
}

impl RouteTable {
    /// Compiles `config`.
    pub fn compile(config: &L7Config) -> Self {
        RouteTable {
            http: CompiledListener::compile(&config.http),
            https: CompiledListener::compile(&config.https),
            pools: config
                .pools
                .iter()
                .map(|(id, pool)| (id.clone(), pool.clone()))
                .collect(),
            certificates: config.certificates.clone(),
            passthrough: config
                .passthrough
                .iter()
                .map(|(host, pool)| (host.clone(), pool.clone()))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        }
    }

    /// The pool `id`, if any.
    pub fn pool(&self, id: &str) -> Option<&Pool> {
        self.pools.get(id)
    }
}
