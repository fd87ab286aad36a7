//! The L7 model in OpenStack Octavia's shape: a [`Listener`] holds ordered [`Policy`]s, each
//! with an [`Action`] and ANDed [`Rule`]s; policies send traffic to [`Pool`]s of [`Member`]s.
//!
//! Validation follows Octavia's API: a rule's `value` is always required, `key` is required for
//! `HEADER`, `COOKIE` and `SSL_DN_FIELD`, `FILE_TYPE` allows only `EQUAL_TO` and `REGEX`, a regex
//! must compile, redirect codes are 301/302/303/307/308. Positions follow Octavia too: inserting
//! at a taken position shifts the rest down, a missing or too-large position appends, and
//! positions are renumbered 1..n after every change.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

mod filters;
#[cfg(test)]
mod tests;

pub(crate) use filters::change_headers;
pub use filters::{Filters, HeaderChanges, Mirror, PathChange};

/// What a matching policy does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Action {
    /// Refuse the request (HTTP 403).
    Reject,
    /// Redirect to a fixed URL.
    RedirectToUrl {
        /// The target URL (`http://` or `https://`).
        url: String,
        /// 301, 302, 303, 307 or 308.
        code: u16,
    },
    /// Redirect to a prefix followed by the original request target (path and query).
    RedirectPrefix {
        /// The prefix (`https://example.com`).
        prefix: String,
        /// 301, 302, 303, 307 or 308.
        code: u16,
    },
    /// Forward to a pool.
    RedirectToPool {
        /// The pool's id.
        pool: String,
    },
    /// Redirect relative to the request (not an Octavia action; Gateway API's RequestRedirect):
    /// `scheme://host[:port]` then the request's path, changed by `path` when set, and its
    /// query.
    Redirect {
        /// `http` or `https`.
        scheme: String,
        /// The Location's host; the request's (without port) when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
        /// The Location's port; none written when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
        /// The path change; the request's path when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<PathChange>,
        /// 301, 302, 303, 307 or 308.
        code: u16,
    },
}

/// The default redirect code, as in Octavia.
pub const DEFAULT_REDIRECT_CODE: u16 = 302;

/// A rule's type: which part of the request it looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RuleType {
    /// The host, without port, compared case-insensitively.
    HostName,
    /// The path, dot-segments removed, query left out.
    Path,
    /// The extension of the path's last segment (after its last `.`).
    FileType,
    /// A request header named by `key`.
    Header,
    /// A cookie named by `key`.
    Cookie,
    /// Whether the client presented a certificate (`value` must be `True`).
    SslConnHasCert,
    /// The client certificate's verification result (`value` is a number, 0 = valid).
    SslVerifyResult,
    /// A field (`key`, e.g. `CN`) of the client certificate's subject DN.
    SslDnField,
    /// The request method (not an Octavia type; Gateway API's `method` match): `EQUAL_TO`,
    /// upper case.
    Method,
    /// A query parameter named by `key` (not an Octavia type; Gateway API's `queryParams`),
    /// its first value, undecoded: `EQUAL_TO` or `REGEX`.
    QueryParam,
}

/// How a rule compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompareType {
    /// Equal (case-insensitive for HOST_NAME).
    EqualTo,
    /// Starts with (a plain string prefix, not element-wise).
    StartsWith,
    /// Ends with.
    EndsWith,
    /// Contains.
    Contains,
    /// Matches the regular expression (Rust `regex` syntax, unanchored unless anchored).
    Regex,
}

macro_rules! names {
    ($ty:ident, $what:literal, $($variant:ident = $name:literal),+ $(,)?) => {
        impl $ty {
            /// The Octavia spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $name),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = ModelError;
            fn from_str(s: &str) -> Result<Self, ModelError> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    other => Err(ModelError::Unknown { what: $what, value: other.to_owned() }),
                }
            }
        }
    };
}

names!(
    RuleType,
    "rule type",
    HostName = "HOST_NAME",
    Path = "PATH",
    FileType = "FILE_TYPE",
    Header = "HEADER",
    Cookie = "COOKIE",
    SslConnHasCert = "SSL_CONN_HAS_CERT",
    SslVerifyResult = "SSL_VERIFY_RESULT",
    SslDnField = "SSL_DN_FIELD",
    Method = "METHOD",
    QueryParam = "QUERY_PARAM"
);
names!(
    CompareType,
    "compare type",
    EqualTo = "EQUAL_TO",
    StartsWith = "STARTS_WITH",
    EndsWith = "ENDS_WITH",
    Contains = "CONTAINS",
    Regex = "REGEX"
);

/// The subject DN fields an `SSL_DN_FIELD` rule may name (Octavia's list).
pub const DN_FIELDS: &[&str] = &[
    "C",
    "ST",
    "L",
    "O",
    "OU",
    "CN",
    "emailAddress",
    "serialNumber",
    "UID",
    "DC",
];

/// One L7 rule. A policy's rules are ANDed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rule {
    /// What part of the request.
    #[serde(rename = "type")]
    pub rule_type: RuleType,
    /// How to compare.
    pub compare_type: CompareType,
    /// The header, cookie or DN field name (HEADER, COOKIE, SSL_DN_FIELD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The value compared against.
    pub value: String,
    /// Negate the comparison.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invert: bool,
}

impl Rule {
    /// A rule without key, not inverted.
    pub fn new(rule_type: RuleType, compare_type: CompareType, value: impl Into<String>) -> Self {
        Rule {
            rule_type,
            compare_type,
            key: None,
            value: value.into(),
            invert: false,
        }
    }

    /// The same rule with `key`.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The same rule, inverted.
    pub fn inverted(mut self) -> Self {
        self.invert = !self.invert;
        self
    }

    /// Checks the rule as Octavia's API does.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |reason: String| {
            Err(ModelError::BadRule {
                rule: self.to_string(),
                reason,
            })
        };
        if self.value.is_empty() {
            return bad("value is required".into());
        }
        if self.value.chars().any(|c| c.is_control()) {
            return bad("value holds a control character".into());
        }
        let needs_key = matches!(
            self.rule_type,
            RuleType::Header | RuleType::Cookie | RuleType::SslDnField | RuleType::QueryParam
        );
        match (&self.key, needs_key) {
            (None, true) => return bad(format!("{} rule requires a key", self.rule_type)),
            (Some(key), true) if key.is_empty() => {
                return bad(format!("{} rule requires a key", self.rule_type));
            }
            (Some(key), true)
                if self.rule_type == RuleType::QueryParam
                    && key.chars().any(|c| c.is_control() || "&=#? ".contains(c)) =>
            {
                return bad(format!("key {key:?} is not a query parameter name"));
            }
            (Some(key), true)
                if !matches!(self.rule_type, RuleType::SslDnField | RuleType::QueryParam)
                    && !is_token(key) =>
            {
                return bad(format!("key {key:?} is not a valid header or cookie name"));
            }
            (Some(key), true)
                if self.rule_type == RuleType::SslDnField && !DN_FIELDS.contains(&key.as_str()) =>
            {
                return bad(format!(
                    "key {key:?} is not a DN field ({})",
                    DN_FIELDS.join(", ")
                ));
            }
            (Some(_), false) => {
                return bad(format!("{} rule takes no key", self.rule_type));
            }
            _ => {}
        }
        match self.rule_type {
            RuleType::FileType
                if !matches!(self.compare_type, CompareType::EqualTo | CompareType::Regex) =>
            {
                return bad("FILE_TYPE allows only EQUAL_TO and REGEX".into());
            }
            RuleType::SslConnHasCert => {
                if self.compare_type != CompareType::EqualTo {
                    return bad("SSL_CONN_HAS_CERT allows only EQUAL_TO".into());
                }
                if !self.value.eq_ignore_ascii_case("true") {
                    return bad("SSL_CONN_HAS_CERT value must be True".into());
                }
            }
            RuleType::Method => {
                if self.compare_type != CompareType::EqualTo {
                    return bad("METHOD allows only EQUAL_TO".into());
                }
                if !is_token(&self.value) || self.value.bytes().any(|b| b.is_ascii_lowercase()) {
                    return bad("METHOD value must be an upper-case method name".into());
                }
            }
            RuleType::QueryParam
                if !matches!(self.compare_type, CompareType::EqualTo | CompareType::Regex) =>
            {
                return bad("QUERY_PARAM allows only EQUAL_TO and REGEX".into());
            }
            RuleType::SslVerifyResult => {
                if self.compare_type != CompareType::EqualTo {
                    return bad("SSL_VERIFY_RESULT allows only EQUAL_TO".into());
                }
                if self.value.parse::<u32>().is_err() {
                    return bad("SSL_VERIFY_RESULT value must be a non-negative number".into());
                }
            }
            _ => {}
        }
        // The forms translation writes are escaped literals, valid by construction.
        let generated = crate::table::parse_path_prefix_regex(&self.value).is_some()
            || crate::table::parse_wildcard_host_regex(&self.value).is_some();
        if self.compare_type == CompareType::Regex
            && !generated
            && let Err(err) = regex::Regex::new(&self.value)
        {
            return bad(format!("invalid regex: {err}"));
        }
        Ok(())
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.invert {
            f.write_str("NOT ")?;
        }
        write!(f, "{}", self.rule_type)?;
        if let Some(key) = &self.key {
            write!(f, "[{key}]")?;
        }
        write!(f, " {} {:?}", self.compare_type, self.value)
    }
}

/// An L7 policy: if all its rules match, do its action. A policy without rules never matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Unique within the listener.
    pub name: String,
    /// 1-based, kept 1..n by the [`Listener`].
    pub position: usize,
    /// What to do on a match.
    #[serde(flatten)]
    pub action: Action,
    /// ANDed rules.
    pub rules: Vec<Rule>,
    /// Where the policy came from (`Ingress default/web`), for reports.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
    /// Request and response changes and mirrors (none in Octavia's model).
    #[serde(default, skip_serializing_if = "Filters::is_empty")]
    pub filters: Filters,
}

impl Policy {
    /// A policy with no position yet (the listener assigns one).
    pub fn new(name: impl Into<String>, action: Action, rules: Vec<Rule>) -> Self {
        Policy {
            name: name.into(),
            position: 0,
            action,
            rules,
            origin: String::new(),
            filters: Filters::default(),
        }
    }

    /// Checks the action, the filters and every rule.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |reason: String| {
            Err(ModelError::BadPolicy {
                policy: self.name.clone(),
                reason,
            })
        };
        if let Err(reason) = self.filters.check() {
            return bad(reason);
        }
        match &self.action {
            Action::Redirect {
                scheme,
                host,
                path,
                code,
                ..
            } => {
                if !matches!(code, 301 | 302 | 303 | 307 | 308) {
                    return bad(format!(
                        "redirect code {code} is not 301, 302, 303, 307 or 308"
                    ));
                }
                if !matches!(scheme.as_str(), "http" | "https") {
                    return bad(format!("redirect scheme {scheme:?} is not http or https"));
                }
                if let Some(host) = host
                    && (host.is_empty()
                        || !host
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b)))
                {
                    return bad(format!("redirect host {host:?} is not a host name"));
                }
                if let Some(path) = path
                    && let Err(reason) = Filters::check_redirect_path(path)
                {
                    return bad(reason);
                }
            }
            Action::Reject => {}
            Action::RedirectToUrl { url: target, code }
            | Action::RedirectPrefix {
                prefix: target,
                code,
            } => {
                if !matches!(code, 301 | 302 | 303 | 307 | 308) {
                    return Err(ModelError::BadPolicy {
                        policy: self.name.clone(),
                        reason: format!("redirect code {code} is not 301, 302, 303, 307 or 308"),
                    });
                }
                let rest = target
                    .strip_prefix("http://")
                    .or_else(|| target.strip_prefix("https://"));
                if rest.is_none_or(|r| {
                    r.is_empty() || r.chars().any(|c| c.is_whitespace() || c.is_control())
                }) {
                    return Err(ModelError::BadPolicy {
                        policy: self.name.clone(),
                        reason: format!("redirect target {target:?} is not an http(s) URL"),
                    });
                }
            }
            Action::RedirectToPool { pool } => {
                if pool.is_empty() {
                    return Err(ModelError::BadPolicy {
                        policy: self.name.clone(),
                        reason: "REDIRECT_TO_POOL needs a pool".into(),
                    });
                }
            }
        }
        self.rules.iter().try_for_each(Rule::validate)
    }
}

/// A member of a pool: one backend address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Member {
    /// IP address and port.
    pub address: SocketAddr,
    /// Relative weight (0 = no traffic).
    pub weight: u32,
}

/// How the router talks to a pool's members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolProtocol {
    /// Plain HTTP.
    #[default]
    Http,
    /// HTTPS (OpenShift reencrypt): verified against `ca_pem` when given.
    Https {
        /// PEM CA bundle for the members' certificates (`destinationCACertificate`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_pem: Option<String>,
    },
}

/// A pool of members, balanced by weighted round robin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// `<namespace>/<service>:<port>`, or `route:<namespace>/<name>` for a Route's own pool.
    pub id: String,
    /// The members; an empty pool answers 503.
    pub members: Vec<Member>,
    /// How to talk to the members.
    #[serde(default)]
    pub protocol: PoolProtocol,
    /// A share answered 500 instead of forwarded, weighed against the members' weights (a
    /// Gateway API backendRef that does not resolve); 0 = none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unavailable_weight: u32,
}

fn is_zero(weight: &u32) -> bool {
    *weight == 0
}

impl Pool {
    /// Whether any member would receive traffic.
    pub fn has_weight(&self) -> bool {
        self.members.iter().any(|m| m.weight > 0)
    }
}

/// A listener: ordered policies, a default pool, and the status when nothing matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    /// Policies in position order (positions 1..n).
    policies: Vec<Policy>,
    /// Where requests go when no policy matches.
    pub default_pool: Option<String>,
    /// The answer when no policy matches and there is no default pool: Octavia answers 503,
    /// Kubernetes Ingress 404.
    pub no_match_status: u16,
}

impl Default for Listener {
    fn default() -> Self {
        Listener {
            policies: Vec::new(),
            default_pool: None,
            no_match_status: 503,
        }
    }
}

impl Listener {
    /// An empty listener answering `no_match_status` when nothing matches.
    pub fn new(no_match_status: u16) -> Self {
        Listener {
            no_match_status,
            ..Listener::default()
        }
    }

    /// The policies in position order.
    pub fn policies(&self) -> &[Policy] {
        &self.policies
    }

    /// Validates and inserts `policy` at `position` (1-based): a taken position shifts the rest
    /// down; `None`, 0 or a position past the end appends. Returns the position it got.
    pub fn insert_policy(
        &mut self,
        mut policy: Policy,
        position: Option<usize>,
    ) -> Result<usize, ModelError> {
        policy.validate()?;
        if self.policies.iter().any(|p| p.name == policy.name) {
            return Err(ModelError::DuplicatePolicy {
                policy: policy.name,
            });
        }
        let index = match position {
            Some(p) if p >= 1 && p <= self.policies.len() => p - 1,
            _ => self.policies.len(),
        };
        policy.position = index + 1;
        self.policies.insert(index, policy);
        self.renumber();
        Ok(index + 1)
    }

    /// Removes the policy named `name`; the others are renumbered.
    pub fn remove_policy(&mut self, name: &str) -> Option<Policy> {
        let index = self.policies.iter().position(|p| p.name == name)?;
        let removed = self.policies.remove(index);
        self.renumber();
        Some(removed)
    }

    /// Moves the policy named `name` to `position` (same rules as [`insert_policy`](Self::insert_policy)).
    pub fn move_policy(
        &mut self,
        name: &str,
        position: Option<usize>,
    ) -> Result<usize, ModelError> {
        let policy = self
            .remove_policy(name)
            .ok_or_else(|| ModelError::NoSuchPolicy {
                policy: name.to_owned(),
            })?;
        self.insert_policy(policy, position)
    }

    fn renumber(&mut self) {
        for (index, policy) in self.policies.iter_mut().enumerate() {
            policy.position = index + 1;
        }
    }
}

/// A TLS certificate the router presents for some hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// Hosts it serves (exact or `*.` wildcards); empty = the default certificate.
    pub hosts: Vec<String>,
    /// PEM certificate chain.
    pub cert_pem: String,
    /// PEM private key.
    #[serde(skip_serializing)]
    pub key_pem: String,
    /// Where it came from (`Secret default/web-tls`).
    pub origin: String,
}

/// The whole L7 configuration: what translation produces and the router serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct L7Config {
    /// Plain HTTP.
    pub http: Listener,
    /// TLS-terminated HTTPS.
    pub https: Listener,
    /// Pools by id.
    pub pools: BTreeMap<String, Pool>,
    /// Certificates for TLS termination, in precedence order.
    pub certificates: Vec<Certificate>,
    /// TLS passthrough: SNI host → pool (the router forwards the TLS stream untouched).
    pub passthrough: BTreeMap<String, String>,
}

impl Default for L7Config {
    fn default() -> Self {
        L7Config {
            http: Listener::new(404),
            https: Listener::new(404),
            pools: BTreeMap::new(),
            certificates: Vec::new(),
            passthrough: BTreeMap::new(),
        }
    }
}

/// What is wrong with a model value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// A name that is not one of the enum's spellings.
    #[error("unknown {what} {value:?}")]
    Unknown {
        /// `rule type` or `compare type`.
        what: &'static str,
        /// The value given.
        value: String,
    },
    /// A rule Octavia would refuse.
    #[error("rule {rule}: {reason}")]
    BadRule {
        /// The rule, displayed.
        rule: String,
        /// Why.
        reason: String,
    },
    /// A policy Octavia would refuse.
    #[error("policy {policy}: {reason}")]
    BadPolicy {
        /// The policy name.
        policy: String,
        /// Why.
        reason: String,
    },
    /// Two policies with one name.
    #[error("policy {policy} already exists")]
    DuplicatePolicy {
        /// The name.
        policy: String,
    },
    /// No policy by that name.
    #[error("no policy {policy}")]
    NoSuchPolicy {
        /// The name.
        policy: String,
    },
}
