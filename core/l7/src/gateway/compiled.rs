//! The compiled, driver-neutral form of a Gateway: per listener its port, TLS certificates and
//! the route entries in precedence order, each with its match, filters and weighted backends
//! resolved to endpoints.
//!
//! One entry per (rule, match, served hostname): a rule with two matches and two hostnames is
//! four entries, each placed by its own precedence. The order is the spec's, made total:
//!
//! 1. hostname: an exact name before a wildcard, more characters first, "any host" last;
//! 2. path: `Exact`, then `RegularExpression`, then `PathPrefix`, each longer value first
//!    (where a regular expression sits is ours to choose: the spec leaves it to the
//!    implementation);
//! 3. a match with a method before one without;
//! 4. more header matches first, then more query parameter matches first;
//! 5. the oldest route (`creationTimestamp`, a missing one last), then `namespace/name`;
//! 6. within a route, rule order, then match order, then the hostname's text.
//!
//! The first entry whose hostname covers the request's host and whose match holds decides, so a
//! request never goes to a less specific entry when a more specific one matches.

use std::cmp::Reverse;
use std::fmt;
use std::net::SocketAddr;

use regex::Regex;
use serde::Serialize;

use super::ObjectKey;
use super::hostname::Hostname;

/// A regular expression with its source (compared by source), matching whole values.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    regex: Regex,
}

impl Pattern {
    /// Compiles `source` to match whole values (`^(?:source)$`).
    pub fn new(source: &str) -> Result<Pattern, regex::Error> {
        Ok(Pattern {
            source: source.to_owned(),
            regex: Regex::new(&format!("^(?:{source})$"))?,
        })
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `value` matches.
    pub fn is_match(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

/// How a path is matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMatcher {
    /// The whole path, case-sensitively.
    Exact(String),
    /// Element-wise prefix, without trailing slash (`""` is `/`): `/foo` matches `/foo`,
    /// `/foo/` and `/foo/bar`, not `/foobar`.
    Prefix(String),
    /// The whole path matches the expression.
    Regex(Pattern),
}

impl PathMatcher {
    /// Whether `path` (normalized, without query) matches.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatcher::Exact(exact) => path == exact,
            PathMatcher::Prefix(prefix) => path
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/')),
            PathMatcher::Regex(pattern) => pattern.is_match(path),
        }
    }

    fn rank(&self) -> (u8, Reverse<usize>) {
        match self {
            PathMatcher::Exact(path) => (0, Reverse(path.len())),
            PathMatcher::Regex(pattern) => (1, Reverse(pattern.source().len())),
            PathMatcher::Prefix(prefix) => (2, Reverse(prefix.len().max(1))),
        }
    }
}

impl fmt::Display for PathMatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathMatcher::Exact(path) => write!(f, "Exact {path}"),
            PathMatcher::Prefix(prefix) if prefix.is_empty() => f.write_str("PathPrefix /"),
            PathMatcher::Prefix(prefix) => write!(f, "PathPrefix {prefix}"),
            PathMatcher::Regex(pattern) => write!(f, "RegularExpression {}", pattern.source()),
        }
    }
}

/// A value (header or query parameter) is equal to, or matches, this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueMatcher {
    /// Equal, case-sensitively.
    Exact(String),
    /// The whole value matches.
    Regex(Pattern),
}

impl ValueMatcher {
    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            ValueMatcher::Exact(exact) => value == exact,
            ValueMatcher::Regex(pattern) => pattern.is_match(value),
        }
    }
}

/// One match of a rule: every part must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// The path.
    pub path: PathMatcher,
    /// The method (upper case), if any.
    pub method: Option<String>,
    /// Headers by lower-case name (the first entry of a name only, as the spec says).
    pub headers: Vec<(String, ValueMatcher)>,
    /// Query parameters by exact name (the first entry of a name only).
    pub query: Vec<(String, ValueMatcher)>,
}

/// Header changes of a RequestHeaderModifier or ResponseHeaderModifier filter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct HeaderModifier {
    /// Overwritten (or added).
    pub set: Vec<(String, String)>,
    /// Appended to an existing value with `,`, or added.
    pub add: Vec<(String, String)>,
    /// Removed (lower-case names).
    pub remove: Vec<String>,
}

impl HeaderModifier {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }

    /// Applies the changes to `headers`: remove, then set, then add.
    pub fn apply(&self, headers: &mut Vec<(String, String)>) {
        crate::model::change_headers(headers, &self.set, &self.add, &self.remove);
    }

    /// Appends another modifier's changes (applied after this one's).
    pub fn extend(&mut self, other: &HeaderModifier) {
        self.set.extend(other.set.iter().cloned());
        self.add.extend(other.add.iter().cloned());
        self.remove.extend(other.remove.iter().cloned());
    }
}

/// A path change of a redirect or rewrite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PathModifier {
    /// The whole path becomes this.
    ReplaceFullPath(String),
    /// The matched prefix becomes this.
    ReplacePrefixMatch(String),
}

/// A RequestRedirect filter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Redirect {
    /// `http` or `https`; the request's when unset.
    pub scheme: Option<String>,
    /// The Location's host; the request's when unset.
    pub hostname: Option<String>,
    /// The Location's port; derived from the scheme or listener when unset.
    pub port: Option<u16>,
    /// The Location's path; the request's when unset.
    pub path: Option<PathModifier>,
    /// 301, 302, 303, 307 or 308.
    pub status_code: u16,
}

/// A URLRewrite filter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Rewrite {
    /// The Host the backend sees.
    pub hostname: Option<String>,
    /// The path the backend sees.
    pub path: Option<PathModifier>,
}

/// A Service port a rule forwards or mirrors to, with its ready endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceBackend {
    /// The Service's namespace and name.
    pub service: ObjectKey,
    /// The Service port.
    pub port: u16,
    /// Ready endpoint addresses (empty = 503).
    pub endpoints: Vec<SocketAddr>,
}

/// Where a share of a rule's traffic goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum BackendTarget {
    /// A resolved Service.
    Service(ServiceBackend),
    /// A reference that does not resolve: its share answers 500. The text names why.
    Invalid(String),
}

/// A backend and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WeightedBackend {
    /// Relative weight (0 = no traffic).
    pub weight: u32,
    /// The target.
    pub target: BackendTarget,
}

/// A RequestMirror filter: a copy of the request goes to `backend`, the answer is dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mirror {
    /// The mirror's Service.
    pub backend: ServiceBackend,
    /// The share of requests mirrored, `numerator / denominator` (1/1 = all).
    pub fraction: (u32, u32),
}

/// A filter, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Filter {
    /// RequestHeaderModifier.
    RequestHeaders(HeaderModifier),
    /// ResponseHeaderModifier.
    ResponseHeaders(HeaderModifier),
    /// RequestRedirect.
    Redirect(Redirect),
    /// URLRewrite.
    Rewrite(Rewrite),
    /// RequestMirror.
    Mirror(Mirror),
}

/// What a rule does once matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleAction {
    /// The HTTPRoute.
    pub route: ObjectKey,
    /// The rule's index in `spec.rules`.
    pub rule: usize,
    /// The route's `creationTimestamp`.
    pub created: Option<String>,
    /// Filters in order.
    pub filters: Vec<Filter>,
    /// Weighted backends, in `backendRefs` order.
    pub backends: Vec<WeightedBackend>,
}

/// A (rule, match, hostname) of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    /// The host the entry serves (`None` = any).
    pub hostname: Option<Hostname>,
    /// The match.
    pub matcher: Matcher,
    /// The match's index in the rule's `matches` (0 for the implicit `/` match).
    pub match_index: usize,
    /// Index of the rule's action in [`CompiledListener::actions`].
    pub action: usize,
}

/// The protocol a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Protocol {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS terminated at the listener.
    Https,
}

impl Protocol {
    /// `http` or `https`.
    pub fn scheme(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Https => "https",
        }
    }
}

/// A listener ready to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledListener {
    /// Listener name.
    pub name: String,
    /// Port.
    pub port: u16,
    /// HTTP or HTTPS.
    pub protocol: Protocol,
    /// The listener's hostname (`None` = any).
    pub hostname: Option<Hostname>,
    /// The TLS certificate Secrets (HTTPS).
    pub certificates: Vec<ObjectKey>,
    /// Entries in precedence order.
    pub entries: Vec<RouteEntry>,
    /// The rules' actions, which entries point into.
    pub actions: Vec<RuleAction>,
}

/// A Gateway's programmed listeners (valid, not conflicted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledGateway {
    /// The Gateway.
    pub gateway: ObjectKey,
    /// Listeners in `spec.listeners` order.
    pub listeners: Vec<CompiledListener>,
}

/// The total order key of an entry (smaller = more specific = tried first).
pub type PrecedenceKey<'a> = (
    (u8, Reverse<usize>),
    (u8, Reverse<usize>),
    bool,
    Reverse<usize>,
    Reverse<usize>,
    (bool, &'a str),
    &'a ObjectKey,
    usize,
    usize,
    String,
);

/// The precedence key of `entry` whose action is `action`.
pub fn precedence_key<'a>(entry: &'a RouteEntry, action: &'a RuleAction) -> PrecedenceKey<'a> {
    (
        Hostname::specificity(entry.hostname.as_ref()),
        entry.matcher.path.rank(),
        entry.matcher.method.is_none(),
        Reverse(entry.matcher.headers.len()),
        Reverse(entry.matcher.query.len()),
        (
            action.created.is_none(),
            action.created.as_deref().unwrap_or_default(),
        ),
        &action.route,
        action.rule,
        entry.match_index,
        entry
            .hostname
            .as_ref()
            .map_or_else(String::new, ToString::to_string),
    )
}

impl CompiledListener {
    /// Puts the entries in precedence order.
    pub fn sort_entries(&mut self) {
        let actions = &self.actions;
        self.entries.sort_by(|a, b| {
            precedence_key(a, &actions[a.action]).cmp(&precedence_key(b, &actions[b.action]))
        });
    }
}
