//! What a policy does besides choosing a backend, rendered as HAProxy rules conditioned on the
//! policy that decided the request (`txn.l7_policy` holds its position): request header
//! changes and rewrites (`http-request del-header`/`set-header`/`add-header`, `set-path`,
//! `replace-path`, `set-header host`), response header changes (`http-response …` for a
//! forwarded request, `http-after-response …` for a redirect), and the request-relative
//! redirect (`http-request redirect location`). Mirrors are not rendered: HAProxy 2.6 mirrors
//! only through an SPOE agent, which kuryr-l7 does not run (reported per driver by
//! [`capabilities`](crate::gateway::capabilities)).
//!
//! Rewrites apply to the request target as forwarded (the original one, not the
//! dot-segment-free path the rules matched), after every decision was made.

use std::fmt::Write as _;

use super::quote;
use crate::model::{Action, HeaderChanges, PathChange, Policy};

/// A log-format string holding `text` literally (`%` doubled), quoted.
pub(super) fn literal(text: &str) -> String {
    quote(&text.replace('%', "%%"))
}

fn header_changes(out: &mut String, verb: &str, fetch: &str, changes: &HeaderChanges, cond: &str) {
    for name in &changes.remove {
        let _ = writeln!(out, "    {verb} del-header {} if {cond}", quote(name));
    }
    for (name, value) in &changes.set {
        let _ = writeln!(
            out,
            "    {verb} set-header {} {} if {cond}",
            quote(name),
            literal(value)
        );
    }
    for (name, value) in &changes.add {
        let found = format!("{{ {fetch}({name}) -m found }}");
        // Appended to an existing value, else added; the second line sees the first's header.
        let _ = writeln!(
            out,
            "    {verb} set-header {} {} if {cond} {found}",
            quote(name),
            quote(&format!("%[{fetch}({name})],{}", value.replace('%', "%%")))
        );
        let _ = writeln!(
            out,
            "    {verb} add-header {} {} if {cond} !{found}",
            quote(name),
            literal(value)
        );
    }
}

/// The lines changing the path by `change` when `cond` holds (the query is kept).
fn path_change(out: &mut String, change: &PathChange, cond: &str, position: usize) {
    match change {
        PathChange::Full(full) => {
            let _ = writeln!(out, "    http-request set-path {} if {cond}", literal(full));
        }
        PathChange::Prefix {
            matched,
            replacement,
        } => {
            let kept = replacement.trim_end_matches('/');
            let exact = if kept.is_empty() { "/" } else { kept };
            let escaped = regex::escape(matched);
            // Which form applies is decided before either changes the path.
            let var = format!("txn.l7_exact_{position}");
            let _ = writeln!(
                out,
                "    http-request set-var({var}) bool(true) if {cond} {{ path -m str {} }}",
                quote(if matched.is_empty() { "/" } else { matched })
            );
            let _ = writeln!(
                out,
                "    http-request replace-path {} {} if {cond} !{{ var({var}) -m found }}",
                quote(&format!("^{escaped}(/.*)$")),
                quote(&format!("{}\\1", kept.replace('%', "%%")))
            );
            let _ = writeln!(
                out,
                "    http-request set-path {} if {cond} {{ var({var}) -m found }}",
                literal(exact)
            );
        }
    }
}

/// The `Location` of a request-relative redirect as a log-format string (the path already
/// changed by [`path_change`]).
fn location(scheme: &str, host: Option<&str>, port: Option<u16>) -> String {
    let host = match host {
        Some(host) => host.replace('%', "%%"),
        None => "%[req.hdr(host),field(1,:),lower]".to_owned(),
    };
    let port = port.map_or_else(String::new, |p| format!(":{p}"));
    quote(&format!("{scheme}://{host}{port}%[pathq]"))
}

/// Whether `policy` needs lines here.
pub(super) fn needed(policy: &Policy) -> bool {
    !policy.filters.is_empty() || matches!(policy.action, Action::Redirect { .. })
}

/// The lines of `policy` (position `position`), to follow the decisions and the restored
/// target. `request` gets request-side lines, `response` response-side ones.
pub(super) fn render(request: &mut String, response: &mut String, policy: &Policy) {
    let position = policy.position;
    let filters = &policy.filters;
    if let Action::Redirect {
        scheme,
        host,
        port,
        path,
        code,
    } = &policy.action
    {
        let cond = format!("{{ var(txn.l7_redirect) -m int {position} }}");
        if let Some(change) = path {
            path_change(request, change, &cond, position);
        }
        let _ = writeln!(
            request,
            "    http-request redirect location {} code {code} if {cond}",
            location(scheme, host.as_deref(), *port)
        );
        header_changes(
            response,
            "http-after-response",
            "res.fhdr",
            &filters.response_headers,
            &cond,
        );
        return;
    }
    let cond = format!("{{ var(txn.l7_policy) -m int {position} }}");
    header_changes(
        request,
        "http-request",
        "req.fhdr",
        &filters.request_headers,
        &cond,
    );
    if let Some(host) = &filters.rewrite_host {
        let _ = writeln!(
            request,
            "    http-request set-header host {} if {cond}",
            literal(host)
        );
    }
    if let Some(change) = &filters.rewrite_path {
        path_change(request, change, &cond, position);
    }
    header_changes(
        response,
        "http-response",
        "res.fhdr",
        &filters.response_headers,
        &cond,
    );
}
