//! One HTTPRoute rule checked and compiled: its matches into [`Matcher`]s, its filters into
//! [`Filter`]s and its backendRefs resolved. A rule the implementation cannot serve as written
//! (an unknown match or filter type, a regex that does not compile, a redirect together with a
//! rewrite, `ReplacePrefixMatch` without a `PathPrefix` match, per-backend filters) is refused
//! with a message naming the field; the route's other rules are still served, as the spec asks.
//! A backendRef that does not resolve keeps its weight as an invalid share (500) and is reported
//! for the route's `ResolvedRefs` condition.

use super::api::{
    HeaderModifierSpec, PathModifierSpec, RouteFilter, RouteMatch, RouteRule, ValueMatch,
};
use super::compiled::{
    BackendTarget, Filter, HeaderModifier, Matcher, Mirror, PathMatcher, PathModifier, Pattern,
    Redirect, Rewrite, ValueMatcher, WeightedBackend,
};
use super::hostname::Hostname;
use super::refs::{RefFailure, RefIndex};

/// The HTTP methods a match may name.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// A rule ready to be placed on listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledRule {
    /// Its matches (one `PathPrefix /` when the rule has none).
    pub matchers: Vec<Matcher>,
    /// Its filters, in order.
    pub filters: Vec<Filter>,
    /// Its weighted backends.
    pub backends: Vec<WeightedBackend>,
    /// References that did not resolve (backends and mirrors).
    pub ref_failures: Vec<RefFailure>,
}

fn value_matchers(
    list: &[ValueMatch],
    field: &str,
    fold_case: bool,
) -> Result<Vec<(String, ValueMatcher)>, String> {
    let mut out: Vec<(String, ValueMatcher)> = Vec::new();
    for (index, entry) in list.iter().enumerate() {
        let at = format!("{field}[{index}]");
        if entry.name.is_empty() {
            return Err(format!("{at}.name is empty"));
        }
        let name = if fold_case {
            entry.name.to_ascii_lowercase()
        } else {
            entry.name.clone()
        };
        let matcher = match entry.match_type.as_str() {
            "Exact" => ValueMatcher::Exact(entry.value.clone()),
            "RegularExpression" => ValueMatcher::Regex(
                Pattern::new(&entry.value).map_err(|err| format!("{at}.value: {err}"))?,
            ),
            other => {
                return Err(format!(
                    "{at}.type {other:?} is not Exact or RegularExpression"
                ));
            }
        };
        // Only the first entry of a name counts.
        if !out.iter().any(|(existing, _)| *existing == name) {
            out.push((name, matcher));
        }
    }
    Ok(out)
}

fn matcher(spec: &RouteMatch, field: &str) -> Result<Matcher, String> {
    let path = match &spec.path {
        None => PathMatcher::Prefix(String::new()),
        Some(path) => {
            let at = format!("{field}.path");
            let needs_slash = |value: &str| {
                if value.starts_with('/') {
                    Ok(())
                } else {
                    Err(format!("{at}.value {value:?} does not start with /"))
                }
            };
            match path.match_type.as_str() {
                "Exact" => {
                    needs_slash(&path.value)?;
                    PathMatcher::Exact(path.value.clone())
                }
                "PathPrefix" => {
                    needs_slash(&path.value)?;
                    PathMatcher::Prefix(path.value.trim_end_matches('/').to_owned())
                }
                "RegularExpression" => PathMatcher::Regex(
                    Pattern::new(&path.value).map_err(|err| format!("{at}.value: {err}"))?,
                ),
                other => {
                    return Err(format!(
                        "{at}.type {other:?} is not Exact, PathPrefix or RegularExpression"
                    ));
                }
            }
        }
    };
    let method = match &spec.method {
        None => None,
        Some(method) if METHODS.contains(&method.as_str()) => Some(method.clone()),
        Some(method) => return Err(format!("{field}.method {method:?} is not an HTTP method")),
    };
    Ok(Matcher {
        path,
        method,
        headers: value_matchers(&spec.headers, &format!("{field}.headers"), true)?,
        query: value_matchers(&spec.query_params, &format!("{field}.queryParams"), false)?,
    })
}

fn header_modifier(
    spec: Option<&HeaderModifierSpec>,
    field: &str,
) -> Result<HeaderModifier, String> {
    let spec = spec.ok_or_else(|| format!("{field} is missing"))?;
    let pairs = |list: &[super::api::HeaderValue], part: &str| {
        list.iter()
            .enumerate()
            .map(|(index, h)| {
                if h.name.is_empty() {
                    Err(format!("{field}.{part}[{index}].name is empty"))
                } else {
                    Ok((h.name.clone(), h.value.clone()))
                }
            })
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(HeaderModifier {
        set: pairs(&spec.set, "set")?,
        add: pairs(&spec.add, "add")?,
        remove: spec.remove.iter().map(|n| n.to_ascii_lowercase()).collect(),
    })
}

fn path_modifier(
    spec: Option<&PathModifierSpec>,
    field: &str,
    prefix_matches: bool,
) -> Result<Option<PathModifier>, String> {
    let Some(spec) = spec else { return Ok(None) };
    let at = format!("{field}.path");
    match spec.modifier_type.as_str() {
        "ReplaceFullPath" => spec
            .replace_full_path
            .clone()
            .map(|p| Some(PathModifier::ReplaceFullPath(p)))
            .ok_or_else(|| format!("{at}.replaceFullPath is missing")),
        "ReplacePrefixMatch" if !prefix_matches => Err(format!(
            "{at}: ReplacePrefixMatch needs every match of the rule to be a PathPrefix match"
        )),
        "ReplacePrefixMatch" => spec
            .replace_prefix_match
            .clone()
            .map(|p| Some(PathModifier::ReplacePrefixMatch(p)))
            .ok_or_else(|| format!("{at}.replacePrefixMatch is missing")),
        other => Err(format!(
            "{at}.type {other:?} is not ReplaceFullPath or ReplacePrefixMatch"
        )),
    }
}

fn exact_hostname(name: Option<&String>, field: &str) -> Result<Option<String>, String> {
    match name.map(|n| Hostname::parse(n)) {
        None => Ok(None),
        Some(Ok(Hostname::Exact(host))) => Ok(Some(host)),
        Some(Ok(Hostname::Wildcard(_))) => Err(format!("{field}.hostname may not be a wildcard")),
        Some(Err(err)) => Err(format!("{field}.hostname: {err}")),
    }
}

fn fraction(
    percent: Option<u32>,
    fraction: Option<super::api::Fraction>,
    field: &str,
) -> Result<(u32, u32), String> {
    match (percent, fraction) {
        (Some(_), Some(_)) => Err(format!("{field}: percent and fraction are exclusive")),
        (Some(p), None) if p <= 100 => Ok((p, 100)),
        (Some(p), None) => Err(format!("{field}.percent {p} is over 100")),
        (None, Some(f)) if f.denominator > 0 && f.numerator <= f.denominator => {
            Ok((f.numerator, f.denominator))
        }
        (None, Some(f)) => Err(format!(
            "{field}.fraction {}/{} is not a fraction of at most 1",
            f.numerator, f.denominator
        )),
        (None, None) => Ok((1, 1)),
    }
}

/// What one filter becomes; `Ok(None)` for a mirror whose backend did not resolve.
fn filter(
    spec: &RouteFilter,
    field: &str,
    prefix_matches: bool,
    route_namespace: &str,
    refs: &RefIndex,
    failures: &mut Vec<RefFailure>,
) -> Result<Option<Filter>, String> {
    Ok(Some(match spec.filter_type.as_str() {
        "RequestHeaderModifier" => Filter::RequestHeaders(header_modifier(
            spec.request_header_modifier.as_ref(),
            &format!("{field}.requestHeaderModifier"),
        )?),
        "ResponseHeaderModifier" => Filter::ResponseHeaders(header_modifier(
            spec.response_header_modifier.as_ref(),
            &format!("{field}.responseHeaderModifier"),
        )?),
        "RequestRedirect" => {
            let at = format!("{field}.requestRedirect");
            let redirect = spec
                .request_redirect
                .as_ref()
                .ok_or_else(|| format!("{at} is missing"))?;
            if let Some(scheme) = redirect
                .scheme
                .as_deref()
                .filter(|s| !matches!(*s, "http" | "https"))
            {
                return Err(format!("{at}.scheme {scheme:?} is not http or https"));
            }
            let status_code = redirect.status_code.unwrap_or(302);
            if ![301, 302, 303, 307, 308].contains(&status_code) {
                return Err(format!(
                    "{at}.statusCode {status_code} is not 301, 302, 303, 307 or 308"
                ));
            }
            Filter::Redirect(Redirect {
                scheme: redirect.scheme.clone(),
                hostname: exact_hostname(redirect.hostname.as_ref(), &at)?,
                port: redirect.port,
                path: path_modifier(redirect.path.as_ref(), &at, prefix_matches)?,
                status_code,
            })
        }
        "URLRewrite" => {
            let at = format!("{field}.urlRewrite");
            let rewrite = spec
                .url_rewrite
                .as_ref()
                .ok_or_else(|| format!("{at} is missing"))?;
            Filter::Rewrite(Rewrite {
                hostname: exact_hostname(rewrite.hostname.as_ref(), &at)?,
                path: path_modifier(rewrite.path.as_ref(), &at, prefix_matches)?,
            })
        }
        "RequestMirror" => {
            let at = format!("{field}.requestMirror");
            let mirror = spec
                .request_mirror
                .as_ref()
                .ok_or_else(|| format!("{at} is missing"))?;
            let fraction = fraction(mirror.percent, mirror.fraction, &at)?;
            match refs.resolve_backend(
                route_namespace,
                &mirror.backend_ref,
                &format!("{at}.backendRef"),
            ) {
                Ok(backend) => Filter::Mirror(Mirror { backend, fraction }),
                Err(failure) => {
                    failures.push(failure);
                    return Ok(None);
                }
            }
        }
        other => return Err(format!("{field}.type {other:?} is not supported")),
    }))
}

/// Checks and compiles `spec.rules[index]` of the HTTPRoute in `route_namespace`.
pub fn compile_rule(
    rule: &RouteRule,
    index: usize,
    route_namespace: &str,
    refs: &RefIndex,
) -> Result<CompiledRule, String> {
    let field = format!("spec.rules[{index}]");
    let matchers = if rule.matches.is_empty() {
        vec![matcher(
            &RouteMatch::default(),
            &format!("{field}.matches[0]"),
        )?]
    } else {
        rule.matches
            .iter()
            .enumerate()
            .map(|(i, m)| matcher(m, &format!("{field}.matches[{i}]")))
            .collect::<Result<Vec<_>, _>>()?
    };
    let prefix_matches = matchers
        .iter()
        .all(|m| matches!(m.path, PathMatcher::Prefix(_)));
    let mut ref_failures = Vec::new();
    let mut filters = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, spec) in rule.filters.iter().enumerate() {
        let at = format!("{field}.filters[{i}]");
        let kind = spec.filter_type.as_str();
        if kind != "RequestMirror" && seen.contains(&kind) {
            return Err(format!("{at}: a second {kind} filter in one rule"));
        }
        seen.push(kind);
        if let Some(compiled) = filter(
            spec,
            &at,
            prefix_matches,
            route_namespace,
            refs,
            &mut ref_failures,
        )? {
            filters.push(compiled);
        }
    }
    if seen.contains(&"RequestRedirect") && seen.contains(&"URLRewrite") {
        return Err(format!(
            "{field}.filters: RequestRedirect and URLRewrite may not be combined"
        ));
    }
    let mut backends = Vec::new();
    for (i, backend) in rule.backend_refs.iter().enumerate() {
        let at = format!("{field}.backendRefs[{i}]");
        if !backend.filters.is_empty() {
            return Err(format!(
                "{at}.filters: per-backend filters are not supported"
            ));
        }
        let target = match refs.resolve_backend(route_namespace, backend, &at) {
            Ok(service) => BackendTarget::Service(service),
            Err(failure) => {
                let target = BackendTarget::Invalid(failure.message.clone());
                ref_failures.push(failure);
                target
            }
        };
        backends.push(WeightedBackend {
            weight: backend.weight,
            target,
        });
    }
    Ok(CompiledRule {
        matchers,
        filters,
        backends,
        ref_failures,
    })
}
