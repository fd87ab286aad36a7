//! What the leader writes back to Kubernetes, decided without IO: Ingress
//! `status.loadBalancer.ingress`, Route `status.ingress[]` with its `Admitted` condition, and
//! a Warning Event for every object refused or losing a conflict (naming the reason or the
//! winner).
//!
//! Only objects whose status differs from what is stored get an update, so writing is
//! idempotent (a status write comes back as a watch event and decides nothing new).
//!
//! Pure: the objects as stored, the translation and `now` in, the writes out; kuryr-l7's
//! controller does the Kubernetes calls.

use std::net::IpAddr;

use crate::translate::{Translation, describe};
use nephrite_krm::Object;
use serde_json::{Value, json};

#[cfg(test)]
mod tests;

/// A status to write.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// `Ingress` or `Route`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The whole new `status`.
    pub status: Value,
}

/// A Warning Event to publish about an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WarningEvent {
    /// `Ingress` or `Route`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `Rejected`, `Conflict` or `BackendWarning`.
    pub reason: String,
    /// What happened (the reason, or the winner).
    pub message: String,
}

/// What the leader should write.
#[derive(Debug, Default)]
pub struct Decisions {
    /// Statuses that differ from the stored ones.
    pub statuses: Vec<StatusUpdate>,
    /// Warning Events.
    pub events: Vec<WarningEvent>,
}

/// Where the status comes from.
#[derive(Debug, Clone)]
pub struct StatusSettings {
    /// Router addresses for Ingress `status.loadBalancer.ingress` (IPs or host names); none
    /// leaves Ingress status alone.
    pub addresses: Vec<String>,
    /// `routerName` in Route status.
    pub router_name: String,
    /// `routerCanonicalHostname` in Route status (the Octavia driver's floating IP); None
    /// leaves it out.
    pub canonical_hostname: Option<String>,
}

/// Why an object is not (fully) served: (condition reason, message) of a rejection or lost
/// conflict.
fn refusal(translation: &Translation, who: &str) -> Option<(&'static str, String)> {
    if let Some(r) = translation.rejections.iter().find(|r| r.object == who) {
        return Some(("Rejected", r.reason.clone()));
    }
    translation
        .conflicts
        .iter()
        .find(|c| c.loser == who)
        .map(|c| {
            (
                "HostAlreadyClaimed",
                format!("{} {} is served by {}", c.host, c.path, c.winner),
            )
        })
}

fn load_balancer(addresses: &[String]) -> Value {
    let ingress: Vec<Value> = addresses
        .iter()
        .map(|a| match a.parse::<IpAddr>() {
            Ok(_) => json!({"ip": a}),
            Err(_) => json!({"hostname": a}),
        })
        .collect();
    json!({"loadBalancer": {"ingress": ingress}})
}

fn current_status(object: &Object) -> Value {
    object.body.get("status").cloned().unwrap_or(Value::Null)
}

fn route_status(
    object: &Object,
    translation: &Translation,
    settings: &StatusSettings,
    now: &str,
) -> Value {
    let current = current_status(object);
    let entries = current
        .get("ingress")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ours_before = entries
        .iter()
        .find(|e| e.get("routerName").and_then(Value::as_str) == Some(&settings.router_name));
    let (status, reason, message) = match refusal(translation, &describe(object)) {
        Some((reason, message)) => ("False", Some(reason), Some(message)),
        None => ("True", None, None),
    };
    let before = ours_before
        .and_then(|e| e.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Admitted"))
        });
    let transition = before
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(now.to_owned()));
    let mut condition =
        json!({"type": "Admitted", "status": status, "lastTransitionTime": transition});
    if let (Some(reason), Some(message)) = (reason, message) {
        condition["reason"] = reason.into();
        condition["message"] = message.into();
    }
    let host = object
        .spec()
        .and_then(|s| s.get("host"))
        .cloned()
        .unwrap_or(Value::String(String::new()));
    let mut ours = json!({
        "host": host,
        "routerName": settings.router_name,
        "wildcardPolicy": "None",
        "conditions": [condition],
    });
    if let Some(canonical) = &settings.canonical_hostname {
        ours["routerCanonicalHostname"] = canonical.clone().into();
    }
    let mut out: Vec<Value> = entries
        .into_iter()
        .filter(|e| e.get("routerName").and_then(Value::as_str) != Some(&settings.router_name))
        .collect();
    out.push(ours);
    let mut status = match current {
        Value::Object(map) => Value::Object(map),
        _ => json!({}),
    };
    status["ingress"] = Value::Array(out);
    status
}

/// Decides the statuses and Events for `objects` (Ingresses and Routes as stored, with their
/// status) under `translation`. `now` (RFC 3339) stamps new condition transitions.
pub fn decide(
    objects: &[Object],
    translation: &Translation,
    settings: &StatusSettings,
    now: &str,
) -> Decisions {
    let mut decisions = Decisions::default();
    for object in objects {
        let kind = object.kind.as_str();
        let served_kind = matches!(
            (object.api_version.as_str(), kind),
            ("networking.k8s.io/v1", "Ingress") | ("route.openshift.io/v1", "Route")
        );
        if !served_kind {
            continue;
        }
        let who = describe(object);
        if translation.ignored.iter().any(|i| i.object == who) {
            continue; // another controller's
        }
        let event = |reason: &str, message: String| WarningEvent {
            kind: kind.to_owned(),
            namespace: object.namespace().unwrap_or("default").to_owned(),
            name: object.name().unwrap_or_default().to_owned(),
            reason: reason.to_owned(),
            message,
        };
        for r in translation.rejections.iter().filter(|r| r.object == who) {
            decisions.events.push(event("Rejected", r.reason.clone()));
        }
        for c in translation.conflicts.iter().filter(|c| c.loser == who) {
            decisions.events.push(event(
                "Conflict",
                format!("{} {} is served by {}", c.host, c.path, c.winner),
            ));
        }
        for w in translation.warnings.iter().filter(|w| w.object == who) {
            decisions
                .events
                .push(event("BackendWarning", w.message.clone()));
        }
        let wanted = if kind == "Ingress" {
            if settings.addresses.is_empty() {
                continue;
            }
            let rejected = translation.rejections.iter().any(|r| r.object == who);
            let mut status = match current_status(object) {
                Value::Object(map) => Value::Object(map),
                _ => json!({}),
            };
            status["loadBalancer"] = if rejected {
                json!({})
            } else {
                load_balancer(&settings.addresses)["loadBalancer"].clone()
            };
            status
        } else {
            route_status(object, translation, settings, now)
        };
        if wanted != current_status(object) {
            decisions.statuses.push(StatusUpdate {
                kind: kind.to_owned(),
                namespace: object.namespace().unwrap_or("default").to_owned(),
                name: object.name().unwrap_or_default().to_owned(),
                status: wanted,
            });
        }
    }
    decisions.events.sort();
    decisions.events.dedup();
    decisions
}
