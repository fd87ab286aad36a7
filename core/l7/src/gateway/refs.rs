//! References out of Gateway API objects: backendRefs to Services (resolved to ready endpoints
//! through the crate's Service/EndpointSlice resolution), certificateRefs to TLS Secrets, and
//! the ReferenceGrants a reference into another namespace needs.
//!
//! A failed reference says why in the spec's terms: `InvalidKind` (not a core Service),
//! `RefNotPermitted` (another namespace, no grant), `BackendNotFound` (no such Service or
//! port), `InvalidCertificateRef` (not a Secret, missing, or without a certificate and key).

use std::collections::BTreeMap;

use crate::backends::{Backends, PortRef};

use super::ObjectKey;
use super::api::{BackendRef, GROUP, ReferenceGrant, SecretObjectReference};
use super::compiled::ServiceBackend;

/// Spec reasons a reference fails with.
pub mod reason {
    /// The reference is to a kind this implementation does not serve.
    pub const INVALID_KIND: &str = "InvalidKind";
    /// A cross-namespace reference without a ReferenceGrant.
    pub const REF_NOT_PERMITTED: &str = "RefNotPermitted";
    /// The referred Service (or its port) does not exist.
    pub const BACKEND_NOT_FOUND: &str = "BackendNotFound";
    /// A certificate reference that does not resolve to a usable TLS Secret.
    pub const INVALID_CERTIFICATE_REF: &str = "InvalidCertificateRef";
}

/// Why a reference failed: the spec's reason and a message naming the field and object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefFailure {
    /// The condition reason.
    pub reason: &'static str,
    /// What failed.
    pub message: String,
}

fn fail(reason: &'static str, message: String) -> RefFailure {
    RefFailure { reason, message }
}

/// What references resolve against: Services, slices and Secrets, Namespace labels and
/// ReferenceGrants.
#[derive(Debug, Default)]
pub struct RefIndex {
    /// Services, EndpointSlices and Secrets.
    pub backends: Backends,
    /// Namespace labels by namespace name.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// ReferenceGrants.
    pub grants: Vec<ReferenceGrant>,
}

impl RefIndex {
    /// Whether a ReferenceGrant in `to_namespace` lets a `from_kind` in `from_namespace` refer
    /// to the `to_group`/`to_kind` named `to_name`. Same-namespace references need none.
    pub fn permits(
        &self,
        (from_kind, from_namespace): (&str, &str),
        (to_group, to_kind, to_namespace, to_name): (&str, &str, &str, &str),
    ) -> bool {
        from_namespace == to_namespace
            || self.grants.iter().any(|grant| {
                grant.key.namespace == to_namespace
                    && grant.from.iter().any(|f| {
                        f.group == GROUP && f.kind == from_kind && f.namespace == from_namespace
                    })
                    && grant.to.iter().any(|t| {
                        t.group == to_group
                            && t.kind == to_kind
                            && t.name.as_deref().is_none_or(|n| n == to_name)
                    })
            })
    }

    /// Resolves a backendRef (at `field`) of the HTTPRoute in `route_namespace`.
    pub fn resolve_backend(
        &self,
        route_namespace: &str,
        backend: &BackendRef,
        field: &str,
    ) -> Result<ServiceBackend, RefFailure> {
        if !backend.group.is_empty() || backend.kind != "Service" {
            return Err(fail(
                reason::INVALID_KIND,
                format!(
                    "{field}: kind {:?} of group {:?} is not a core Service",
                    backend.kind, backend.group
                ),
            ));
        }
        let namespace = backend.namespace.as_deref().unwrap_or(route_namespace);
        if !self.permits(
            ("HTTPRoute", route_namespace),
            ("", "Service", namespace, &backend.name),
        ) {
            return Err(fail(
                reason::REF_NOT_PERMITTED,
                format!(
                    "{field}: Service {namespace}/{} is in another namespace and no ReferenceGrant \
                     there allows HTTPRoutes from {route_namespace}",
                    backend.name
                ),
            ));
        }
        let Some(port) = backend.port else {
            return Err(fail(
                reason::BACKEND_NOT_FOUND,
                format!(
                    "{field}: Service {namespace}/{} names no port",
                    backend.name
                ),
            ));
        };
        let Some(service) = self.backends.service(namespace, &backend.name) else {
            return Err(fail(
                reason::BACKEND_NOT_FOUND,
                format!("{field}: Service {namespace}/{} not found", backend.name),
            ));
        };
        if !service.ports.iter().any(|p| p.port == i64::from(port)) {
            return Err(fail(
                reason::BACKEND_NOT_FOUND,
                format!(
                    "{field}: Service {namespace}/{} has no port {port}",
                    backend.name
                ),
            ));
        }
        let (pool, _) =
            self.backends
                .service_pool(namespace, &backend.name, &PortRef::Number(i64::from(port)));
        Ok(ServiceBackend {
            service: ObjectKey::new(namespace, &backend.name),
            port,
            endpoints: pool.members.iter().map(|m| m.address).collect(),
        })
    }

    /// Resolves a certificateRef (at `field`) of the Gateway in `gateway_namespace`.
    pub fn resolve_certificate(
        &self,
        gateway_namespace: &str,
        reference: &SecretObjectReference,
        field: &str,
    ) -> Result<ObjectKey, RefFailure> {
        if !reference.group.is_empty() || reference.kind != "Secret" {
            return Err(fail(
                reason::INVALID_CERTIFICATE_REF,
                format!(
                    "{field}: kind {:?} of group {:?} is not a core Secret",
                    reference.kind, reference.group
                ),
            ));
        }
        let namespace = reference.namespace.as_deref().unwrap_or(gateway_namespace);
        if !self.permits(
            ("Gateway", gateway_namespace),
            ("", "Secret", namespace, &reference.name),
        ) {
            return Err(fail(
                reason::REF_NOT_PERMITTED,
                format!(
                    "{field}: Secret {namespace}/{} is in another namespace and no ReferenceGrant \
                     there allows Gateways from {gateway_namespace}",
                    reference.name
                ),
            ));
        }
        let Some(secret) = self.backends.secret(namespace, &reference.name) else {
            return Err(fail(
                reason::INVALID_CERTIFICATE_REF,
                format!("{field}: Secret {namespace}/{} not found", reference.name),
            ));
        };
        let usable = secret.secret_type.as_deref() == Some("kubernetes.io/tls")
            && matches!(secret.text("tls.crt"), Ok(Some(_)))
            && matches!(secret.text("tls.key"), Ok(Some(_)));
        if !usable {
            return Err(fail(
                reason::INVALID_CERTIFICATE_REF,
                format!(
                    "{field}: Secret {namespace}/{} is not a kubernetes.io/tls Secret with \
                     tls.crt and tls.key",
                    reference.name
                ),
            ));
        }
        Ok(ObjectKey::new(namespace, &reference.name))
    }
}
