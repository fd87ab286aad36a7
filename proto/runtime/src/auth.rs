//! Who may call what: callers prove an identity with a client certificate (mutual TLS) or a
//! bearer token, and a small policy file gives identities roles and roles the methods they may
//! call. One tower layer checks every request before any service sees it and hands
//! the caller's identity to the handlers as a request extension ([`CallerIdentity`]).
//!
//! Always open, whatever credentials a request carries: `grpc.health.v1.Health` (probes).
//! Open to every authenticated caller, whatever its roles: reflection and
//! `nephrite.daemon.v1.Daemon`.

mod identity;
pub(crate) mod layer;
mod policy;
pub mod probe;
mod tokens;

pub use identity::{CallerIdentity, Credential, identity_of_certificate};
pub use policy::{ADMIN_ROLE, AuthPolicy, MethodPattern, PolicyError};
pub use tokens::{TokenError, TokenFile};

/// Methods anyone may call, with or without credentials.
pub(crate) const OPEN_SERVICES: &[&str] = &["grpc.health.v1.Health"];

/// Services every authenticated caller may use, whatever its roles.
pub(crate) const AUTHENTICATED_SERVICES: &[&str] = &[
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
    "nephrite.daemon.v1.Daemon",
];
