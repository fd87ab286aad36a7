//! `kuryr-l7 rules`: the compiled policies, rules and pools of a snapshot, and what was
//! rejected, conflicting or wrong, as a table or as JSON.

use std::fmt::Write as _;

use nephrite_l7::{Action, Listener};

use crate::source::Snapshot;

fn action(action: &Action) -> String {
    match action {
        Action::Reject => "REJECT".into(),
        Action::RedirectToUrl { url, code } => format!("REDIRECT_TO_URL {code} {url}"),
        Action::RedirectPrefix { prefix, code } => format!("REDIRECT_PREFIX {code} {prefix}"),
        Action::RedirectToPool { pool } => format!("REDIRECT_TO_POOL {pool}"),
    }
}

fn listener(out: &mut String, name: &str, listener: &Listener) {
    let _ = writeln!(
        out,
        "LISTENER {name}: {} policies",
        listener.policies().len()
    );
    for policy in listener.policies() {
        let _ = writeln!(
            out,
            "  {:>4}  {}  {}",
            policy.position,
            policy.name,
            action(&policy.action)
        );
        let _ = writeln!(out, "        from {}", policy.origin);
        for rule in &policy.rules {
            let _ = writeln!(out, "        {rule}");
        }
    }
    match &listener.default_pool {
        Some(pool) => {
            let _ = writeln!(out, "  default pool {pool}");
        }
        None => {
            let _ = writeln!(out, "  no match: {}", listener.no_match_status);
        }
    }
}

/// The snapshot as text tables.
pub fn render_table(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    let config = &snapshot.translation.config;
    listener(&mut out, "http", &config.http);
    listener(&mut out, "https", &config.https);
    let _ = writeln!(out, "POOLS");
    for pool in config.pools.values() {
        let members: Vec<String> = pool
            .members
            .iter()
            .map(|m| format!("{} w{}", m.address, m.weight))
            .collect();
        let status = if pool.has_weight() {
            ""
        } else {
            "  (no live member: 503)"
        };
        let _ = writeln!(out, "  {}  [{}]{status}", pool.id, members.join(", "));
    }
    for (host, pool) in &config.passthrough {
        let _ = writeln!(out, "PASSTHROUGH {host} -> {pool}");
    }
    for certificate in &config.certificates {
        let _ = writeln!(
            out,
            "CERTIFICATE {} for [{}]",
            certificate.origin,
            certificate.hosts.join(", ")
        );
    }
    let t = &snapshot.translation;
    for c in &t.conflicts {
        let _ = writeln!(
            out,
            "CONFLICT {} {}: {} wins over {} ({})",
            c.host, c.path, c.winner, c.loser, c.origin
        );
    }
    for r in &t.rejections {
        let _ = writeln!(out, "REJECTED {} ({}): {}", r.object, r.origin, r.reason);
    }
    for w in &t.warnings {
        let _ = writeln!(out, "WARNING {} ({}): {}", w.object, w.origin, w.message);
    }
    for i in &t.ignored {
        let _ = writeln!(out, "IGNORED {} ({}): {}", i.object, i.origin, i.reason);
    }
    for e in &snapshot.read_errors {
        let _ = writeln!(out, "ERROR {e}");
    }
    out
}

/// The snapshot as one JSON document.
pub fn render_json(snapshot: &Snapshot) -> serde_json::Value {
    let mut value = serde_json::to_value(&snapshot.translation).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.insert(
            "read_errors".into(),
            serde_json::json!(snapshot.read_errors),
        );
    }
    value
}
