//! `route.openshift.io/v1` Route → one entry, its own weighted pool, and its TLS settings.
//!
//! - `spec.host` is required (this translation does not generate hosts); `spec.path` is an
//!   element-wise prefix, as the OpenShift router matches it (not `STARTS_WITH`).
//! - `to` plus up to 3 `alternateBackends`, weights 0–256 (missing = 100): each Service gets
//!   weight/Σweights of the requests, split evenly over its ready endpoints (a Service without
//!   ready endpoints is left out of the split); all weights 0 → 503.
//! - `port.targetPort` picks the EndpointSlice port by name or number (absent: the first port).
//! - TLS: `edge` and `reencrypt` terminate with `spec.tls.certificate`/`key` (the router's
//!   default certificate when absent; `reencrypt` talks HTTPS to the members, verified against
//!   `destinationCACertificate`); `passthrough` forwards the TLS stream by SNI. HTTP follows
//!   `insecureEdgeTerminationPolicy`: `None` (default) not served, `Allow` served,
//!   `Redirect` → 302 to `https://<host>` + the request target.

use nephrite_krm::Object;

use super::ingress::prefix_of;
use super::{Contribution, Entry, HostMatch, PathMatch, extra_rules, parse_host, spec};
use crate::backends::{Backends, weighted_members};
use crate::model::{Action, Certificate, Pool, PoolProtocol};
use crate::objects::{RouteSpec, RouteTargetReference};

fn weight(target: &RouteTargetReference) -> Result<u32, String> {
    if let Some(kind) = target.kind.as_deref()
        && kind != "Service"
    {
        return Err(format!("backend kind {kind:?} is not Service"));
    }
    if target.name.is_empty() {
        return Err("a backend with no service".into());
    }
    match target.weight {
        None => Ok(100),
        Some(w) if (0..=256).contains(&w) => Ok(w as u32),
        Some(w) => Err(format!(
            "backend {} weight {w} is outside 0–256",
            target.name
        )),
    }
}

/// Translates one Route. `Err` rejects the whole object.
pub(super) fn translate(
    object: &Object,
    owner: usize,
    backends: &Backends,
) -> Result<Contribution, String> {
    let namespace = object.namespace().unwrap_or("default");
    let name = object.name().unwrap_or_default();
    let spec: RouteSpec = spec(object)?;
    let extra = extra_rules(object)?;
    let host = match parse_host(spec.host.as_deref())? {
        HostMatch::Exact(host) => host,
        HostMatch::Wildcard(_) => return Err("a wildcard Route host is not supported".into()),
        HostMatch::Any => return Err("spec.host is required".into()),
    };
    let path = match spec.path.as_deref() {
        None | Some("") => PathMatch::Prefix(String::new(), "Route prefix"),
        Some(path)
            if path.starts_with('/')
                && !path.chars().any(|c| c.is_control() || c.is_whitespace()) =>
        {
            PathMatch::Prefix(prefix_of(path), "Route prefix")
        }
        Some(path) => return Err(format!("path {path:?} does not start with /")),
    };
    let to = spec
        .to
        .as_ref()
        .ok_or("spec.to is required (a backend with no service)")?;
    if spec.alternate_backends.len() > 3 {
        return Err(format!(
            "{} alternateBackends (at most 3)",
            spec.alternate_backends.len()
        ));
    }
    let mut contribution = Contribution::default();
    let mut services = Vec::new();
    for target in std::iter::once(to).chain(&spec.alternate_backends) {
        let weight = weight(target)?;
        if !backends.knows_service(namespace, &target.name) {
            contribution.warnings.push(format!(
                "Service {namespace}/{} not found: it gets no traffic",
                target.name
            ));
        }
        let target_port = spec.port.as_ref().map(|p| &p.target_port);
        services.push((
            weight,
            backends.route_addresses(namespace, &target.name, target_port),
        ));
    }
    let pool_id = format!("route:{namespace}/{name}");
    let mut pool = Pool {
        id: pool_id.clone(),
        members: weighted_members(&services),
        protocol: PoolProtocol::Http,
        unavailable_weight: 0,
    };
    if services.iter().all(|(w, _)| *w == 0) {
        contribution
            .warnings
            .push("every backend has weight 0: 503 for the route".into());
    }
    let to_pool = Action::RedirectToPool {
        pool: pool_id.clone(),
    };
    let redirect = Action::RedirectPrefix {
        prefix: format!("https://{host}"),
        code: 302,
    };
    let (http, https) = match &spec.tls {
        None => (Some(to_pool), None),
        Some(tls) => {
            let insecure = tls
                .insecure_edge_termination_policy
                .as_deref()
                .unwrap_or("None");
            let termination = tls.termination.to_ascii_lowercase();
            let http = match (insecure, termination.as_str()) {
                ("" | "None", _) => None,
                ("Allow", "passthrough") => {
                    return Err(
                        "insecureEdgeTerminationPolicy Allow is not valid with passthrough".into(),
                    );
                }
                ("Allow", _) => Some(to_pool.clone()),
                ("Redirect", _) => Some(redirect),
                (other, _) => {
                    return Err(format!(
                        "unknown insecureEdgeTerminationPolicy {other:?} (None, Allow or Redirect)"
                    ));
                }
            };
            match termination.as_str() {
                "edge" | "reencrypt" => {
                    match (&tls.certificate, &tls.key) {
                        (Some(cert), Some(key)) if !cert.is_empty() && !key.is_empty() => {
                            let mut cert_pem = cert.clone();
                            if let Some(ca) = &tls.ca_certificate {
                                cert_pem.push('\n');
                                cert_pem.push_str(ca);
                            }
                            contribution.certificates.push(Certificate {
                                hosts: vec![host.clone()],
                                cert_pem,
                                key_pem: key.clone(),
                                origin: format!("Route {namespace}/{name}"),
                            });
                        }
                        _ => contribution.warnings.push(
                            "no spec.tls certificate and key: the router's default certificate is used"
                                .into(),
                        ),
                    }
                    if termination == "reencrypt" {
                        pool.protocol = PoolProtocol::Https {
                            ca_pem: tls.destination_ca_certificate.clone(),
                        };
                    }
                    (http, Some(to_pool))
                }
                "passthrough" => {
                    if spec
                        .path
                        .as_deref()
                        .is_some_and(|p| !p.is_empty() && p != "/")
                    {
                        return Err("a passthrough Route cannot have a path".into());
                    }
                    contribution
                        .passthrough
                        .push((host.clone(), pool_id.clone()));
                    (http, None)
                }
                other => {
                    return Err(format!(
                        "unknown tls termination {other:?} (edge, passthrough or reencrypt)"
                    ));
                }
            }
        }
    };
    contribution.pools.push(pool);
    if http.is_some() || https.is_some() {
        contribution.entries.push(Entry {
            host: HostMatch::Exact(host),
            path,
            extra,
            http,
            https,
            owner,
        });
    }
    Ok(contribution)
}
