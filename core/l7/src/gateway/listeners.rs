//! A Gateway's listeners checked: protocol (HTTP and HTTPS are served), hostname, TLS
//! certificates (HTTPS terminates with `kubernetes.io/tls` Secrets, cross-namespace only with a
//! ReferenceGrant), the route kinds it allows, and conflicts between listeners on one port (two
//! protocols: `ProtocolConflict`; the same hostname twice: `HostnameConflict`). A listener that
//! fails any of these is not programmed, though routes may still attach to it (attachment
//! depends only on `allowedRoutes` and parentRefs, as the spec says).

use std::collections::{BTreeMap, BTreeSet};

use super::ObjectKey;
use super::api::{GROUP, Gateway, ListenerSpec, RouteGroupKind};
use super::compiled::Protocol;
use super::hostname::Hostname;
use super::outcome::{ListenerOutcome, Verdict};
use super::refs::RefIndex;

/// A listener while the model is built.
pub(super) struct ListenerState {
    pub spec: ListenerSpec,
    pub hostname: Option<Hostname>,
    pub protocol: Option<Protocol>,
    pub certificates: Vec<ObjectKey>,
    pub outcome: ListenerOutcome,
    /// Routes attached: (route index, served hostnames).
    pub attached: Vec<(usize, Vec<Option<Hostname>>)>,
}

pub(super) fn http_route_kind() -> RouteGroupKind {
    RouteGroupKind {
        group: GROUP.to_owned(),
        kind: "HTTPRoute".to_owned(),
    }
}

/// Checks `spec.listeners[index]` of `gateway`.
pub(super) fn validate_listener(
    gateway: &Gateway,
    index: usize,
    spec: &ListenerSpec,
    refs: &RefIndex,
) -> ListenerState {
    let field = format!("spec.listeners[{index}]");
    let protocol = match spec.protocol.as_str() {
        "HTTP" => Some(Protocol::Http),
        "HTTPS" => Some(Protocol::Https),
        _ => None,
    };
    let mut accepted = Verdict::yes("Accepted", "listener accepted");
    let mut resolved = Verdict::yes("ResolvedRefs", "all references resolved");
    let hostname = match spec.hostname.as_deref().map(Hostname::parse) {
        None => None,
        Some(Ok(h)) => Some(h),
        Some(Err(err)) => {
            accepted = Verdict::no("UnsupportedValue", format!("{field}.hostname: {err}"));
            None
        }
    };
    if protocol.is_none() {
        accepted = Verdict::no(
            "UnsupportedProtocol",
            format!(
                "{field}.protocol {:?} is not served (HTTP and HTTPS are)",
                spec.protocol
            ),
        );
    }
    let mut certificates = Vec::new();
    if protocol == Some(Protocol::Https) {
        match &spec.tls {
            None => {
                resolved = Verdict::no(
                    "InvalidCertificateRef",
                    format!("{field}.tls: an HTTPS listener needs certificateRefs"),
                );
            }
            Some(tls) if tls.mode != "Terminate" => {
                accepted = Verdict::no(
                    "UnsupportedValue",
                    format!(
                        "{field}.tls.mode {:?}: HTTPS listeners terminate TLS",
                        tls.mode
                    ),
                );
            }
            Some(tls) if tls.certificate_refs.is_empty() => {
                resolved = Verdict::no(
                    "InvalidCertificateRef",
                    format!("{field}.tls.certificateRefs is empty"),
                );
            }
            Some(tls) => {
                for (i, reference) in tls.certificate_refs.iter().enumerate() {
                    let at = format!("{field}.tls.certificateRefs[{i}]");
                    match refs.resolve_certificate(&gateway.key.namespace, reference, &at) {
                        Ok(key) => certificates.push(key),
                        Err(failure) if resolved.holds => {
                            resolved = Verdict::no(failure.reason, failure.message);
                        }
                        Err(_) => {}
                    }
                }
            }
        }
    }
    let mut supported_kinds = Vec::new();
    if protocol.is_some() {
        if spec.allowed_routes.kinds.is_empty() {
            supported_kinds.push(http_route_kind());
        }
        for (i, kind) in spec.allowed_routes.kinds.iter().enumerate() {
            if *kind == http_route_kind() {
                supported_kinds.push(kind.clone());
            } else if resolved.holds {
                resolved = Verdict::no(
                    "InvalidRouteKinds",
                    format!(
                        "{field}.allowedRoutes.kinds[{i}]: {}/{} is not a route kind of this listener",
                        kind.group, kind.kind
                    ),
                );
            }
        }
    }
    ListenerState {
        spec: spec.clone(),
        hostname,
        protocol,
        certificates,
        outcome: ListenerOutcome {
            name: spec.name.clone(),
            supported_kinds,
            attached_routes: 0,
            accepted,
            resolved_refs: resolved,
            conflicted: Verdict::no("NoConflicts", "no conflict"),
            programmed: Verdict::yes("Programmed", "listener programmed"),
        },
        attached: Vec::new(),
    }
}

/// Marks listeners sharing a port with another protocol, or port, protocol and hostname.
pub(super) fn mark_conflicts(listeners: &mut [ListenerState]) {
    let mut by_port: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (index, listener) in listeners.iter().enumerate() {
        if listener.protocol.is_some() {
            by_port.entry(listener.spec.port).or_default().push(index);
        }
    }
    for (port, indices) in by_port {
        let protocols: BTreeSet<String> = indices
            .iter()
            .map(|&i| listeners[i].spec.protocol.clone())
            .collect();
        for &i in &indices {
            let twins = indices
                .iter()
                .filter(|&&j| j != i && listeners[j].hostname == listeners[i].hostname)
                .count();
            listeners[i].outcome.conflicted = if protocols.len() > 1 {
                Verdict::yes(
                    "ProtocolConflict",
                    format!("port {port} is used with protocols {protocols:?}"),
                )
            } else if twins > 0 {
                Verdict::yes(
                    "HostnameConflict",
                    format!(
                        "another listener on port {port} has the same hostname {}",
                        listeners[i]
                            .hostname
                            .as_ref()
                            .map_or("(any)".to_owned(), ToString::to_string)
                    ),
                )
            } else {
                continue;
            };
        }
    }
    for listener in listeners {
        let outcome = &mut listener.outcome;
        let why = [&outcome.accepted, &outcome.resolved_refs]
            .into_iter()
            .find(|v| !v.holds)
            .map(|v| v.message.clone())
            .or_else(|| {
                outcome
                    .conflicted
                    .holds
                    .then(|| outcome.conflicted.message.clone())
            });
        if let Some(why) = why {
            outcome.programmed = Verdict::no("Invalid", why);
        }
    }
}

/// Whether the listener takes HTTPRoutes from `route`'s namespace.
pub(super) fn allows(
    listener: &ListenerState,
    gateway: &ObjectKey,
    route: &ObjectKey,
    refs: &RefIndex,
) -> bool {
    if !listener
        .outcome
        .supported_kinds
        .contains(&http_route_kind())
    {
        return false;
    }
    let namespaces = &listener.spec.allowed_routes.namespaces;
    match namespaces.from.as_str() {
        "All" => true,
        "Same" => route.namespace == gateway.namespace,
        "Selector" => namespaces.selector.as_ref().is_some_and(|selector| {
            let labels = refs
                .namespaces
                .get(&route.namespace)
                .cloned()
                .unwrap_or_default();
            selector.matches(&labels)
        }),
        _ => false,
    }
}
