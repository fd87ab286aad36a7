//! What each driver can express of a compiled HTTPRoute rule, and for a listener which rules a
//! driver serves fully, partly (served, without something the route asked for) or not at all,
//! each gap naming the route field. It is what `rules --explain` prints and what
//! [`lower`](super::lower) turns into reports and a route's status instead of silently serving
//! a rule differently.
//!
//! [`DriverCapabilities::of`] is what a driver can express; [`DriverCapabilities::through_rules`]
//! (the same, now that the rules service's model carries every feature) is what `--explain`
//! and status use.
//!
//! The drivers:
//! - the embedded router serves the model's policies, filters and 500 shares: everything;
//! - HAProxy: ACLs on path, headers, `urlp` and method; `http-request`/`http-response` header
//!   rules; redirects and `set-path`/`set-header host` rewrites; a pool's 500 share as a
//!   server on a local frontend that answers 500; server weights (0–256, so weights are
//!   scaled); no request mirroring (HAProxy 2.6 mirrors only through an SPOE agent, which
//!   kuryr-l7 does not run): a mirror is reported, the rule served without it;
//! - Octavia: L7 rules on host, path and header (EQUAL_TO, and REGEX in the amphora's PCRE
//!   dialect), policies that redirect to a pool, to a fixed URL or to a prefix followed by the
//!   request path. No query-parameter or method rules, no header changes, no rewrites, no
//!   mirrors; weights only as member weights (0–256) of one pool mixing the Services, and no
//!   way to answer 500 for an invalid backend's share.
//!
//! A missing match feature, redirect or rewrite leaves the rule unserved (serving it without
//! would send requests elsewhere than the route says); a missing header change, mirror or
//! invalid-share answer leaves it partly served.

use serde::Serialize;

use super::ObjectKey;
use super::compiled::{
    BackendTarget, CompiledListener, Filter, PathMatcher, PathModifier, ValueMatcher,
};

/// A driver of kuryr-l7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Driver {
    /// The embedded router (`kuryr-l7 router`).
    Router,
    /// The rendered HAProxy configuration.
    Haproxy,
    /// An Octavia load balancer's L7 policies.
    Octavia,
}

/// A feature a rule may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Feature {
    /// Path `Exact`.
    PathExact,
    /// Path `PathPrefix`.
    PathPrefix,
    /// Path `RegularExpression`.
    PathRegex,
    /// Header `Exact`.
    HeaderExact,
    /// Header `RegularExpression`.
    HeaderRegex,
    /// Query parameter `Exact`.
    QueryParamExact,
    /// Query parameter `RegularExpression`.
    QueryParamRegex,
    /// `method`.
    Method,
    /// RequestHeaderModifier.
    RequestHeaderModifier,
    /// ResponseHeaderModifier.
    ResponseHeaderModifier,
    /// RequestRedirect keeping the request path (scheme, host, port, status code).
    Redirect,
    /// RequestRedirect with `ReplaceFullPath`.
    RedirectFullPath,
    /// RequestRedirect with `ReplacePrefixMatch`.
    RedirectPrefixPath,
    /// RequestRedirect whose Location keeps the request's host on a wildcard or any-host rule.
    RedirectRequestHost,
    /// URLRewrite of the hostname.
    RewriteHost,
    /// URLRewrite with `ReplaceFullPath`.
    RewriteFullPath,
    /// URLRewrite with `ReplacePrefixMatch`.
    RewritePrefixPath,
    /// RequestMirror.
    Mirror,
    /// Traffic split over several weighted backends.
    Weights,
    /// 500 for the share of an invalid backend while valid ones serve the rest, or for a rule
    /// without a valid backend.
    InvalidBackendShare,
}

impl Feature {
    /// Whether serving a rule without this feature would send its requests elsewhere.
    fn essential(self) -> bool {
        !matches!(
            self,
            Feature::RequestHeaderModifier
                | Feature::ResponseHeaderModifier
                | Feature::Mirror
                | Feature::InvalidBackendShare
        )
    }
}

/// How far a driver supports a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Support {
    /// As the spec says.
    Full,
    /// Close to the spec, with the stated difference.
    Approximate(&'static str),
    /// Not at all.
    Unsupported,
}

/// What one driver can express.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverCapabilities {
    /// The driver.
    pub driver: Driver,
    exceptions: &'static [(Feature, Support)],
}

const HAPROXY: &[(Feature, Support)] = &[
    (Feature::Mirror, Support::Unsupported),
    (
        Feature::Weights,
        Support::Approximate("server weights are integers 0–256: weights are scaled"),
    ),
];

const OCTAVIA: &[(Feature, Support)] = &[
    (
        Feature::PathRegex,
        Support::Approximate("REGEX rules use the amphora's PCRE dialect"),
    ),
    (
        Feature::HeaderRegex,
        Support::Approximate("REGEX rules use the amphora's PCRE dialect"),
    ),
    (Feature::QueryParamExact, Support::Unsupported),
    (Feature::QueryParamRegex, Support::Unsupported),
    (Feature::Method, Support::Unsupported),
    (Feature::RequestHeaderModifier, Support::Unsupported),
    (Feature::ResponseHeaderModifier, Support::Unsupported),
    (
        Feature::RedirectFullPath,
        Support::Approximate("REDIRECT_TO_URL drops the request's query"),
    ),
    (Feature::RedirectPrefixPath, Support::Unsupported),
    (Feature::RedirectRequestHost, Support::Unsupported),
    (Feature::RewriteHost, Support::Unsupported),
    (Feature::RewriteFullPath, Support::Unsupported),
    (Feature::RewritePrefixPath, Support::Unsupported),
    (Feature::Mirror, Support::Unsupported),
    (
        Feature::Weights,
        Support::Approximate("member weights 0–256 of one pool mixing the Services"),
    ),
    (Feature::InvalidBackendShare, Support::Unsupported),
];

impl DriverCapabilities {
    /// What `driver` serves of a route as kuryr-l7 runs it, fed the rules service's model
    /// ([`lower`](super::lower)). That model carries every feature of the compiled form
    /// (method and query rules, request-relative redirects, [`Filters`](crate::Filters),
    /// a pool's 500 share), so this is [`of`](Self::of): what the driver itself can express.
    pub fn through_rules(driver: Driver) -> Self {
        Self::of(driver)
    }

    /// The capabilities of `driver`.
    pub fn of(driver: Driver) -> Self {
        let exceptions = match driver {
            Driver::Router => &[][..],
            Driver::Haproxy => HAPROXY,
            Driver::Octavia => OCTAVIA,
        };
        DriverCapabilities { driver, exceptions }
    }

    /// How far `feature` is supported.
    pub fn support(&self, feature: Feature) -> Support {
        self.exceptions
            .iter()
            .find(|(f, _)| *f == feature)
            .map_or(Support::Full, |(_, support)| *support)
    }
}

/// How much of a rule a driver serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Served {
    /// As written.
    Fully,
    /// Served, with the gaps listed.
    Partly,
    /// Not served.
    Not,
}

/// Something of a rule a driver cannot express exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// The route field, e.g. `spec.rules[0].matches[1].queryParams`.
    pub field: String,
    /// The feature.
    pub feature: Feature,
    /// What the driver does instead.
    pub note: String,
}

/// What a driver makes of one rule on one listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleSupport {
    /// The HTTPRoute.
    pub route: ObjectKey,
    /// The rule index.
    pub rule: usize,
    /// Fully, partly or not.
    pub served: Served,
    /// Why not fully.
    pub gaps: Vec<Gap>,
}

/// The features each rule of `listener` uses, with the field using it.
fn features(listener: &CompiledListener, action: usize) -> Vec<(String, Feature)> {
    let rule = &listener.actions[action];
    let at = format!("spec.rules[{}]", rule.rule);
    let mut out = Vec::new();
    let mut seen_matches = Vec::new();
    for entry in listener.entries.iter().filter(|e| e.action == action) {
        if entry.hostname.is_none()
            || matches!(entry.hostname, Some(super::hostname::Hostname::Wildcard(_)))
        {
            for filter in &rule.filters {
                if let Filter::Redirect(redirect) = filter
                    && redirect.hostname.is_none()
                {
                    out.push((
                        format!("{at}.filters (RequestRedirect.hostname)"),
                        Feature::RedirectRequestHost,
                    ));
                }
            }
        }
        if seen_matches.contains(&entry.match_index) {
            continue;
        }
        seen_matches.push(entry.match_index);
        let m = format!("{at}.matches[{}]", entry.match_index);
        let matcher = &entry.matcher;
        out.push((
            format!("{m}.path"),
            match matcher.path {
                PathMatcher::Exact(_) => Feature::PathExact,
                PathMatcher::Prefix(_) => Feature::PathPrefix,
                PathMatcher::Regex(_) => Feature::PathRegex,
            },
        ));
        for (list, exact, regex, name) in [
            (
                &matcher.headers,
                Feature::HeaderExact,
                Feature::HeaderRegex,
                "headers",
            ),
            (
                &matcher.query,
                Feature::QueryParamExact,
                Feature::QueryParamRegex,
                "queryParams",
            ),
        ] {
            for (header, value) in list {
                let feature = if matches!(value, ValueMatcher::Exact(_)) {
                    exact
                } else {
                    regex
                };
                out.push((format!("{m}.{name} ({header})"), feature));
            }
        }
        if matcher.method.is_some() {
            out.push((format!("{m}.method"), Feature::Method));
        }
    }
    for filter in &rule.filters {
        let field = |name: &str| format!("{at}.filters ({name})");
        match filter {
            Filter::RequestHeaders(_) => out.push((
                field("RequestHeaderModifier"),
                Feature::RequestHeaderModifier,
            )),
            Filter::ResponseHeaders(_) => out.push((
                field("ResponseHeaderModifier"),
                Feature::ResponseHeaderModifier,
            )),
            Filter::Mirror(_) => out.push((field("RequestMirror"), Feature::Mirror)),
            Filter::Redirect(redirect) => out.push((
                field("RequestRedirect"),
                match redirect.path {
                    None => Feature::Redirect,
                    Some(PathModifier::ReplaceFullPath(_)) => Feature::RedirectFullPath,
                    Some(PathModifier::ReplacePrefixMatch(_)) => Feature::RedirectPrefixPath,
                },
            )),
            Filter::Rewrite(rewrite) => {
                if rewrite.hostname.is_some() {
                    out.push((field("URLRewrite.hostname"), Feature::RewriteHost));
                }
                match rewrite.path {
                    Some(PathModifier::ReplaceFullPath(_)) => {
                        out.push((field("URLRewrite.path"), Feature::RewriteFullPath))
                    }
                    Some(PathModifier::ReplacePrefixMatch(_)) => {
                        out.push((field("URLRewrite.path"), Feature::RewritePrefixPath))
                    }
                    None => {}
                }
            }
        }
    }
    let redirects = rule
        .filters
        .iter()
        .any(|f| matches!(f, Filter::Redirect(_)));
    let weighted = rule.backends.iter().filter(|b| b.weight > 0).count();
    if !redirects && weighted > 1 {
        out.push((format!("{at}.backendRefs"), Feature::Weights));
    }
    let invalid = rule
        .backends
        .iter()
        .any(|b| b.weight > 0 && matches!(b.target, BackendTarget::Invalid(_)));
    let valid = rule
        .backends
        .iter()
        .any(|b| b.weight > 0 && matches!(b.target, BackendTarget::Service(_)));
    if !redirects && invalid && valid {
        out.push((format!("{at}.backendRefs"), Feature::InvalidBackendShare));
    }
    if !redirects && !valid && (invalid || rule.backends.is_empty()) {
        // Every share answers 500: a driver without that answer serves 503 instead.
        out.push((format!("{at}.backendRefs"), Feature::InvalidBackendShare));
    }
    out.sort();
    out.dedup();
    out
}

/// For each rule on `listener`, how much of it `capabilities`' driver serves, and why not all.
pub fn explain(listener: &CompiledListener, capabilities: &DriverCapabilities) -> Vec<RuleSupport> {
    (0..listener.actions.len())
        .map(|action| {
            let rule = &listener.actions[action];
            let mut served = Served::Fully;
            let mut gaps = Vec::new();
            for (field, feature) in features(listener, action) {
                let note = match capabilities.support(feature) {
                    Support::Full => continue,
                    Support::Approximate(note) => {
                        served = served.max(Served::Partly);
                        note.to_owned()
                    }
                    Support::Unsupported if feature.essential() => {
                        served = Served::Not;
                        format!("{feature:?} cannot be expressed: the rule is not served")
                    }
                    Support::Unsupported => {
                        served = served.max(Served::Partly);
                        format!("{feature:?} cannot be expressed: served without it")
                    }
                };
                gaps.push(Gap {
                    field,
                    feature,
                    note,
                });
            }
            RuleSupport {
                route: rule.route.clone(),
                rule: rule.rule,
                served,
                gaps,
            }
        })
        .collect()
}
