//! Who may call what on the controller's `kuryr.l7.v1.Rules` service: its default role table,
//! which the runtime's `--auth-policy` extends (identities) or overrides (a role of the same
//! name). Authentication itself (client certificates, the `--auth-tokens` file) is the
//! runtime's; see the README, "Credentials".
//!
//! | role | may call |
//! |---|---|
//! | `read` | `Get`, `ListRouters`, `Watch`: snapshots without private keys (each `key_pem` is the key's fingerprint, `sha256:<hex>`; the version is the same, see [`version_of`](kuryr_l7_client::wire::version_of)) |
//! | `router` | `Watch` and `Acknowledge`, only as itself: the `router` of the request is the caller's identity; snapshots with keys (a router serves TLS) |
//! | `admin` | everything, keys included (the runtime's) |
//!
//! A server without authentication (loopback, or `--insecure`) has no caller identities: every
//! caller is treated as the operator and gets keys, as before.

use nephrite_proto::kuryr::l7::v1 as pb;
use nephrite_runtime::CallerIdentity;
use nephrite_runtime::auth::{ADMIN_ROLE, AuthPolicy};
use tonic::Status;

use kuryr_l7_client::wire::key_fingerprint;

/// The rules service's gRPC name.
pub const SERVICE: &str = "kuryr.l7.v1.Rules";
/// The role of inspection (`kuryr-l7 rules`-like readers, dashboards).
pub const READ_ROLE: &str = "read";
/// The role of routers.
pub const ROUTER_ROLE: &str = "router";

/// The default role table (`admin` is the runtime's: every method).
pub fn roles() -> AuthPolicy {
    let methods = |names: &[&str]| -> Vec<String> {
        names.iter().map(|m| format!("{SERVICE}/{m}")).collect()
    };
    AuthPolicy::new()
        .with_role(READ_ROLE, methods(&["Get", "ListRouters", "Watch"]))
        .and_then(|p| p.with_role(ROUTER_ROLE, methods(&["Watch", "Acknowledge"])))
        .unwrap_or_else(|e| unreachable!("the built-in roles are valid: {e}"))
}

/// Whether `caller` gets private keys: routers and admins, and every caller of a server
/// without authentication.
pub fn sees_keys(caller: Option<&CallerIdentity>) -> bool {
    caller.is_none_or(|c| c.has_role(ROUTER_ROLE) || c.has_role(ADMIN_ROLE))
}

/// PERMISSION_DENIED unless a router-role caller names itself as `router` (admins and readers
/// are not routers: an admin may act for any router, a reader's Watch names a router for the
/// logs only).
pub fn as_itself(caller: Option<&CallerIdentity>, router: &str) -> Result<(), Status> {
    match caller {
        Some(caller) if caller.has_role(ROUTER_ROLE) => caller.require_self(router),
        _ => Ok(()),
    }
}

/// `snapshot` with each private key replaced by its fingerprint.
pub fn strip_keys(snapshot: &mut pb::Snapshot) {
    for certificate in &mut snapshot.certificates {
        certificate.key_pem = key_fingerprint(&certificate.key_pem);
    }
}

/// `delta` with each private key replaced by its fingerprint.
pub fn strip_delta_keys(delta: &mut pb::Delta) {
    if let Some(certificates) = &mut delta.certificates {
        for certificate in &mut certificates.certificates {
            certificate.key_pem = key_fingerprint(&certificate.key_pem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nephrite_runtime::auth::Credential;

    fn caller(name: &str, roles: &[&str]) -> CallerIdentity {
        CallerIdentity {
            name: name.to_owned(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            credential: Credential::Token,
        }
    }

    fn allows(role: &str, method: &str) -> bool {
        roles().allows(&[role.to_owned()], &format!("/{SERVICE}/{method}"))
    }

    #[test]
    fn each_role_reaches_its_own_methods_only() {
        for method in ["Get", "ListRouters", "Watch"] {
            assert!(allows(READ_ROLE, method), "{method}");
        }
        assert!(!allows(READ_ROLE, "Acknowledge"));
        for method in ["Watch", "Acknowledge"] {
            assert!(allows(ROUTER_ROLE, method), "{method}");
        }
        for method in ["Get", "ListRouters"] {
            assert!(!allows(ROUTER_ROLE, method), "{method}");
        }
        for method in ["Get", "ListRouters", "Watch", "Acknowledge"] {
            assert!(allows(ADMIN_ROLE, method), "{method}");
            assert!(!allows("nobody", method), "{method}");
        }
    }

    #[test]
    fn keys_go_to_routers_and_admins_only() {
        assert!(sees_keys(None));
        assert!(sees_keys(Some(&caller("r1", &[ROUTER_ROLE]))));
        assert!(sees_keys(Some(&caller("ops", &[ADMIN_ROLE]))));
        assert!(!sees_keys(Some(&caller("dash", &[READ_ROLE]))));
        let mut snapshot = pb::Snapshot {
            certificates: vec![pb::Certificate {
                cert_pem: "CERT".into(),
                key_pem: "KEY".into(),
                ..pb::Certificate::default()
            }],
            ..pb::Snapshot::default()
        };
        snapshot.version = kuryr_l7_client::wire::version_of(&snapshot);
        let version = snapshot.version.clone();
        strip_keys(&mut snapshot);
        assert!(!snapshot.certificates[0].key_pem.contains("KEY"));
        assert!(snapshot.certificates[0].key_pem.starts_with("sha256:"));
        assert_eq!(snapshot.certificates[0].cert_pem, "CERT");
        // The stripped snapshot still checks against its version.
        assert_eq!(kuryr_l7_client::wire::version_of(&snapshot), version);
        // A new key alone is a new version (routers get it).
        let mut rotated = snapshot.clone();
        rotated.certificates[0].key_pem = "OTHER KEY".into();
        assert_ne!(kuryr_l7_client::wire::version_of(&rotated), version);
    }

    #[test]
    fn a_router_acts_only_as_itself() {
        let r1 = caller("r1", &[ROUTER_ROLE]);
        assert!(as_itself(Some(&r1), "r1").is_ok());
        let refused = as_itself(Some(&r1), "r2").unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(as_itself(Some(&caller("ops", &[ADMIN_ROLE])), "r2").is_ok());
        assert!(as_itself(Some(&caller("dash", &[READ_ROLE])), "any").is_ok());
        assert!(as_itself(None, "any").is_ok());
    }
}
