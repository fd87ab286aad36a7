//! `networking.k8s.io/v1` Ingress → entries, pools and certificates.

use nephrite_krm::Object;

use super::{Contribution, Entry, HostMatch, PathMatch, extra_rules, parse_host, spec};
use crate::backends::{Backends, PortRef};
use crate::model::{Action, Certificate};
use crate::objects::{IngressBackend, IngressSpec};

fn backend_pool(
    backend: &IngressBackend,
    namespace: &str,
    backends: &Backends,
    contribution: &mut Contribution,
) -> Result<String, String> {
    let Some(service) = backend.service.as_ref().filter(|s| !s.name.is_empty()) else {
        return Err(if backend.resource.is_some() {
            "a resource backend is not supported (only service backends)".into()
        } else {
            "a backend with no service".into()
        });
    };
    let port = match service.port.as_ref() {
        Some(port) => match (&port.number, &port.name) {
            (Some(number), None) if (1..=65535).contains(number) => PortRef::Number(*number),
            (None, Some(name)) if !name.is_empty() => PortRef::Name(name.clone()),
            (Some(number), None) => {
                return Err(format!(
                    "service {} port {number} is out of range",
                    service.name
                ));
            }
            _ => {
                return Err(format!(
                    "service {} port needs exactly one of number and name",
                    service.name
                ));
            }
        },
        None => return Err(format!("service {} has no port", service.name)),
    };
    let (pool, warning) = backends.service_pool(namespace, &service.name, &port);
    let id = pool.id.clone();
    if let Some(warning) = warning
        && !contribution.warnings.contains(&warning)
    {
        contribution.warnings.push(warning);
    }
    if !contribution.pools.iter().any(|p| p.id == id) {
        contribution.pools.push(pool);
    }
    Ok(id)
}

fn path_match(path: Option<&str>, path_type: Option<&str>) -> Result<PathMatch, String> {
    let path_type =
        path_type.ok_or("missing pathType (Exact, Prefix or ImplementationSpecific)")?;
    let path = match (path, path_type) {
        (None | Some(""), "ImplementationSpecific") => "/",
        (None | Some(""), _) => return Err(format!("pathType {path_type} needs a path")),
        (Some(path), _) => path,
    };
    if !path.starts_with('/') {
        return Err(format!("path {path:?} does not start with /"));
    }
    if path.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "path {path:?} holds whitespace or a control character"
        ));
    }
    match path_type {
        "Exact" => Ok(PathMatch::Exact(path.to_owned())),
        "Prefix" => Ok(PathMatch::Prefix(prefix_of(path), "Prefix")),
        "ImplementationSpecific" => Ok(PathMatch::Prefix(
            prefix_of(path),
            "ImplementationSpecific, as Prefix",
        )),
        other => Err(format!(
            "unknown pathType {other:?} (Exact, Prefix or ImplementationSpecific)"
        )),
    }
}

/// `/foo/` → `/foo`, `/` → `` (trailing slashes ignored).
pub(crate) fn prefix_of(path: &str) -> String {
    path.trim_end_matches('/').to_owned()
}

/// Translates one Ingress. `Err` rejects the whole object.
pub(super) fn translate(
    object: &Object,
    owner: usize,
    backends: &Backends,
) -> Result<Contribution, String> {
    let namespace = object.namespace().unwrap_or("default");
    let spec: IngressSpec = spec(object)?;
    let extra = extra_rules(object)?;
    let mut contribution = Contribution::default();
    if let Some(backend) = &spec.default_backend {
        let pool = backend_pool(backend, namespace, backends, &mut contribution)
            .map_err(|e| format!("defaultBackend: {e}"))?;
        contribution.default_pool = Some(pool);
    }
    for (r, rule) in spec.rules.iter().enumerate() {
        let host = parse_host(rule.host.as_deref()).map_err(|e| format!("rules[{r}]: {e}"))?;
        let Some(http) = &rule.http else { continue };
        for (p, path) in http.paths.iter().enumerate() {
            let at = |e: String| format!("rules[{r}].http.paths[{p}]: {e}");
            let path_match =
                path_match(path.path.as_deref(), path.path_type.as_deref()).map_err(at)?;
            let pool =
                backend_pool(&path.backend, namespace, backends, &mut contribution).map_err(at)?;
            let action = Action::RedirectToPool { pool };
            contribution.entries.push(Entry {
                host: host.clone(),
                path: path_match,
                extra: extra.clone(),
                http: Some(action.clone()),
                https: Some(action),
                owner,
            });
        }
    }
    for (t, tls) in spec.tls.iter().enumerate() {
        let at = |e: String| format!("tls[{t}]: {e}");
        let mut hosts = Vec::new();
        for host in &tls.hosts {
            match parse_host(Some(host)).map_err(at)? {
                HostMatch::Exact(h) => hosts.push(h),
                HostMatch::Wildcard(suffix) => hosts.push(format!("*.{suffix}")),
                HostMatch::Any => {}
            }
        }
        let Some(secret_name) = tls.secret_name.as_deref().filter(|s| !s.is_empty()) else {
            contribution.warnings.push(format!(
                "tls[{t}] has no secretName: its hosts get the default certificate"
            ));
            continue;
        };
        let origin = format!("Secret {namespace}/{secret_name}");
        let Some(secret) = backends.secret(namespace, secret_name) else {
            contribution.warnings.push(format!(
                "tls[{t}]: {origin} not found: its hosts get the default certificate"
            ));
            continue;
        };
        if secret.secret_type.as_deref() != Some("kubernetes.io/tls") {
            contribution.warnings.push(format!(
                "tls[{t}]: {origin} is not of type kubernetes.io/tls"
            ));
            continue;
        }
        match (secret.text("tls.crt"), secret.text("tls.key")) {
            (Ok(Some(cert_pem)), Ok(Some(key_pem))) => {
                contribution.certificates.push(Certificate {
                    hosts,
                    cert_pem,
                    key_pem,
                    origin,
                })
            }
            (Err(e), _) | (_, Err(e)) => contribution
                .warnings
                .push(format!("tls[{t}]: {origin}: {e}")),
            _ => contribution
                .warnings
                .push(format!("tls[{t}]: {origin} lacks tls.crt or tls.key")),
        }
    }
    Ok(contribution)
}
