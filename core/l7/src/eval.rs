//! Evaluating requests against the model: the request as the rules see it, one rule, and the
//! reference evaluation of a listener (policies in position order, first match wins, rules
//! ANDed, a policy without rules never matches).
//!
//! The router does not use [`Listener::evaluate`] on its hot path (it scans every policy); it
//! uses the compiled [`RouteTable`](crate::RouteTable), which is property-tested to agree with it.

use std::borrow::Cow;

use regex::{Regex, RegexBuilder};

use crate::model::{Action, CompareType, Filters, Listener, Policy, Rule, RuleType};

#[cfg(test)]
mod tests;

/// Header lookup by case-insensitive name (the first value), and the request method.
pub trait Headers {
    /// The first value of header `name` (any case), if present and valid text.
    fn header(&self, name: &str) -> Option<&str>;

    /// The request method, when the view knows it; a `METHOD` rule matches no request whose
    /// view does not (header lists alone carry no method).
    fn method(&self) -> Option<&str> {
        None
    }
}

/// A header list with the request's method.
pub struct WithMethod<'a> {
    /// The method.
    pub method: &'a str,
    /// The headers.
    pub headers: &'a [(String, String)],
}

impl Headers for WithMethod<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.header(name)
    }

    fn method(&self) -> Option<&str> {
        Some(self.method)
    }
}

impl Headers for [(String, String)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

impl Headers for Vec<(String, String)> {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

/// What the client's TLS certificate said (for the SSL_* rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCert {
    /// The verification result (0 = verified).
    pub verify_result: u32,
    /// Subject DN fields (`CN`, `O`, …).
    pub subject: Vec<(String, String)>,
}

/// A request as the rules see it.
pub struct Request<'a> {
    /// Host without port, lower case (see [`normalize_host`]).
    pub host: &'a str,
    /// Path with dot-segments removed, no query (see [`normalize_path`]).
    pub path: &'a str,
    /// The original request target (path and query), used by REDIRECT_PREFIX.
    pub target: &'a str,
    /// The headers.
    pub headers: &'a dyn Headers,
    /// The client certificate, on TLS connections that presented one.
    pub client_cert: Option<&'a ClientCert>,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// Forward to this pool.
    Pool(&'a str),
    /// Refuse (403).
    Reject,
    /// Redirect with this code to this location.
    Redirect {
        /// 301, 302, 303, 307 or 308.
        code: u16,
        /// The `Location`.
        location: String,
    },
    /// Answer with this status and no backend (404 or 503 when nothing matches).
    Status(u16),
}

/// The host as matching sees it: port removed (`[::1]:8080` → `::1`), trailing dot removed,
/// lower case. `None` for an empty host.
pub fn normalize_host(raw: &str) -> Option<Cow<'_, str>> {
    let raw = raw.trim();
    let without_port = if let Some(rest) = raw.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(ip, _)| ip)
    } else {
        match raw.rsplit_once(':') {
            Some((host, port))
                if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) =>
            {
                host
            }
            _ => raw,
        }
    };
    let host = without_port.strip_suffix('.').unwrap_or(without_port);
    if host.is_empty() {
        return None;
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Some(Cow::Owned(host.to_ascii_lowercase()))
    } else {
        Some(Cow::Borrowed(host))
    }
}

/// The path as matching sees it: query and fragment dropped, dot-segments removed (RFC 3986
/// §5.2.4), nothing percent-decoded (`%2F` stays three characters), always starting with `/`.
pub fn normalize_path(target: &str) -> Cow<'_, str> {
    let path = target
        .split_once(['?', '#'])
        .map_or(target, |(path, _)| path);
    let has_dots = path
        .split('/')
        .any(|segment| segment == "." || segment == "..");
    if path.starts_with('/') && !has_dots {
        return Cow::Borrowed(path);
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing = false;
    for (index, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing = index == last,
            ".." => {
                out.pop();
                trailing = index == last;
            }
            other => {
                out.push(other);
                trailing = false;
            }
        }
    }
    let mut normalized = String::with_capacity(path.len() + 1);
    for segment in &out {
        normalized.push('/');
        normalized.push_str(segment);
    }
    if trailing || normalized.is_empty() {
        normalized.push('/');
    }
    Cow::Owned(normalized)
}

/// The first value of query parameter `name` in `target` (undecoded, `""` for a name without
/// `=`).
pub fn query_param<'t>(target: &'t str, name: &str) -> Option<&'t str> {
    let (_, query) = target.split_once('?')?;
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Compiles a REGEX rule's value the way matching uses it (HOST_NAME case-insensitive).
pub fn compile_regex(rule: &Rule) -> Option<Regex> {
    if rule.compare_type != CompareType::Regex {
        return None;
    }
    RegexBuilder::new(&rule.value)
        .case_insensitive(rule.rule_type == RuleType::HostName)
        .build()
        .ok()
}

fn cookie<'a>(headers: &'a dyn Headers, name: &str) -> Option<&'a str> {
    headers.header("cookie")?.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

fn file_type(path: &str) -> Option<&str> {
    let last = path.rsplit('/').next()?;
    last.rsplit_once('.')
        .map(|(_, ext)| ext)
        .filter(|e| !e.is_empty())
}

fn compare(rule: &Rule, regex: Option<&Regex>, subject: &str) -> bool {
    let insensitive = rule.rule_type == RuleType::HostName;
    let value = rule.value.as_str();
    match rule.compare_type {
        CompareType::EqualTo if insensitive => subject.eq_ignore_ascii_case(value),
        CompareType::EqualTo => subject == value,
        CompareType::Regex => regex.is_some_and(|r| r.is_match(subject)),
        _ if insensitive => {
            let (subject, value) = (subject.to_ascii_lowercase(), value.to_ascii_lowercase());
            plain_compare(rule.compare_type, &subject, &value)
        }
        other => plain_compare(other, subject, value),
    }
}

fn plain_compare(compare_type: CompareType, subject: &str, value: &str) -> bool {
    match compare_type {
        CompareType::EqualTo => subject == value,
        CompareType::StartsWith => subject.starts_with(value),
        CompareType::EndsWith => subject.ends_with(value),
        CompareType::Contains => subject.contains(value),
        CompareType::Regex => false,
    }
}

/// Whether `rule` matches `request`. `regex` is the rule's compiled regex (from
/// [`compile_regex`]) for REGEX rules. A missing header, cookie, file type or certificate
/// compares as no match, which `invert` then turns into a match.
pub fn rule_matches(rule: &Rule, regex: Option<&Regex>, request: &Request<'_>) -> bool {
    let key = rule.key.as_deref().unwrap_or_default();
    let matched = match rule.rule_type {
        RuleType::HostName => compare(rule, regex, request.host),
        RuleType::Path => compare(rule, regex, request.path),
        RuleType::FileType => file_type(request.path).is_some_and(|ext| compare(rule, regex, ext)),
        RuleType::Header => request
            .headers
            .header(key)
            .is_some_and(|value| compare(rule, regex, value)),
        RuleType::Cookie => cookie(request.headers, key).is_some_and(|v| compare(rule, regex, v)),
        RuleType::SslConnHasCert => request.client_cert.is_some(),
        RuleType::SslVerifyResult => request
            .client_cert
            .is_some_and(|cert| rule.value.parse() == Ok(cert.verify_result)),
        RuleType::SslDnField => request.client_cert.is_some_and(|cert| {
            cert.subject
                .iter()
                .find(|(field, _)| field == key)
                .is_some_and(|(_, value)| compare(rule, regex, value))
        }),
        RuleType::Method => request
            .headers
            .method()
            .is_some_and(|method| method.eq_ignore_ascii_case(&rule.value)),
        RuleType::QueryParam => {
            query_param(request.target, key).is_some_and(|value| compare(rule, regex, value))
        }
    };
    matched != rule.invert
}

/// Whether every rule of `policy` matches (false for a policy without rules).
pub fn policy_matches(policy: &Policy, request: &Request<'_>) -> bool {
    !policy.rules.is_empty()
        && policy
            .rules
            .iter()
            .all(|rule| rule_matches(rule, compile_regex(rule).as_ref(), request))
}

/// The outcome of a policy's action for `request`.
pub fn apply_action<'a>(action: &'a Action, request: &Request<'_>) -> Outcome<'a> {
    match action {
        Action::Reject => Outcome::Reject,
        Action::RedirectToUrl { url, code } => Outcome::Redirect {
            code: *code,
            location: url.clone(),
        },
        Action::RedirectPrefix { prefix, code } => {
            let target = if request.target.starts_with('/') {
                request.target
            } else {
                request.path
            };
            Outcome::Redirect {
                code: *code,
                location: format!("{}{}", prefix.trim_end_matches('/'), target),
            }
        }
        Action::RedirectToPool { pool } => Outcome::Pool(pool),
        Action::Redirect {
            scheme,
            host,
            port,
            path,
            code,
        } => {
            let host = host.as_deref().unwrap_or(request.host);
            let target = match path {
                Some(change) => change.apply_to_target(request.path, request.target),
                None if request.target.starts_with('/') => request.target.to_owned(),
                None => request.path.to_owned(),
            };
            let location = match port {
                Some(port) if host.contains(':') => format!("{scheme}://[{host}]:{port}{target}"),
                Some(port) => format!("{scheme}://{host}:{port}{target}"),
                None if host.contains(':') => format!("{scheme}://[{host}]{target}"),
                None => format!("{scheme}://{host}{target}"),
            };
            Outcome::Redirect {
                code: *code,
                location,
            }
        }
    }
}

/// No filters (what a request no policy matched gets).
pub static NO_FILTERS: std::sync::LazyLock<Filters> = std::sync::LazyLock::new(Filters::default);

impl Listener {
    /// The reference evaluation: policies in position order, the first whose rules all match
    /// decides; otherwise the default pool, otherwise `no_match_status`.
    pub fn evaluate(&self, request: &Request<'_>) -> Outcome<'_> {
        self.evaluate_with_filters(request).0
    }

    /// [`evaluate`](Self::evaluate) with the deciding policy's filters.
    pub fn evaluate_with_filters(&self, request: &Request<'_>) -> (Outcome<'_>, &Filters) {
        match self.policies().iter().find(|p| policy_matches(p, request)) {
            Some(policy) => (apply_action(&policy.action, request), &policy.filters),
            None => (self.no_match_outcome(), &NO_FILTERS),
        }
    }

    /// What a request that no policy matches gets.
    pub fn no_match_outcome(&self) -> Outcome<'_> {
        match &self.default_pool {
            Some(pool) => Outcome::Pool(pool),
            None => Outcome::Status(self.no_match_status),
        }
    }
}
