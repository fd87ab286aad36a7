//! Who may call what on the agent's socket: its default role table, which
//! the runtime's `--auth-policy` extends (identities) or overrides (a role
//! of the same name). Authentication itself (client certificates, the
//! token file) is the runtime's; on the default Unix socket it is off
//! unless configured.
//!
//! | role | may call |
//! |---|---|
//! | `cni` | every `nimbess.cni.v1.Cni` method (what `nimbess-cni` sends) |
//! | `read` | `nimbess.cni.v1.Agent`: `List*`, `Get*`, `Verify` (the inspection subcommands); `nimbess.cni.v1.Vifs`: `List*`, `Get*` |
//! | `vif` | every `nimbess.cni.v1.Vifs` method (what `kuryr-l7 vif-handler` calls) |
//! | `admin` | everything (the runtime's) |

use nephrite_runtime::AuthPolicy;

/// The CNI service's gRPC name.
pub const CNI_SERVICE: &str = "nimbess.cni.v1.Cni";
/// The VIF service's gRPC name.
pub const VIFS_SERVICE: &str = "nimbess.cni.v1.Vifs";
/// The inspection service's gRPC name.
pub const AGENT_SERVICE: &str = "nimbess.cni.v1.Agent";
/// The role of CNI plugins.
pub const CNI_ROLE: &str = "cni";
/// The role of the VIF handler.
pub const VIF_ROLE: &str = "vif";
/// The role of the inspection subcommands.
pub const READ_ROLE: &str = "read";

/// The default role table.
pub fn roles() -> AuthPolicy {
    let read: Vec<String> = ["List*", "Get*", "Verify"]
        .iter()
        .map(|m| format!("{AGENT_SERVICE}/{m}"))
        .chain(
            ["List*", "Get*"]
                .iter()
                .map(|m| format!("{VIFS_SERVICE}/{m}")),
        )
        .collect();
    AuthPolicy::new()
        .with_role(CNI_ROLE, [format!("{CNI_SERVICE}/*")])
        .and_then(|p| p.with_role(VIF_ROLE, [format!("{VIFS_SERVICE}/*")]))
        .and_then(|p| p.with_role(READ_ROLE, &read))
        .unwrap_or_else(|e| unreachable!("the built-in roles are valid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(role: &str, path: &str) -> bool {
        roles().allows(&[role.to_string()], path)
    }

    #[test]
    fn each_role_reaches_its_own_methods_only() {
        for m in ["Add", "Del", "Check", "Status", "Gc", "Version"] {
            let path = format!("/{CNI_SERVICE}/{m}");
            assert!(allows(CNI_ROLE, &path), "{path}");
            assert!(!allows(READ_ROLE, &path), "{path}");
            assert!(allows("admin", &path), "{path}");
        }
        for m in ["ListPorts", "ListNetworks", "GetPipelines", "Verify"] {
            let path = format!("/{AGENT_SERVICE}/{m}");
            assert!(allows(READ_ROLE, &path), "{path}");
            assert!(!allows(CNI_ROLE, &path), "{path}");
        }
        for m in ["AllocateVif", "ReleaseVif", "ListVifs", "GetVif"] {
            let path = format!("/{VIFS_SERVICE}/{m}");
            assert!(allows(VIF_ROLE, &path), "{path}");
            assert!(!allows(CNI_ROLE, &path), "{path}");
            assert_eq!(allows(READ_ROLE, &path), !m.ends_with("eVif"), "{path}");
        }
        assert!(!allows(VIF_ROLE, &format!("/{CNI_SERVICE}/Add")));
        assert!(!allows("nobody", &format!("/{CNI_SERVICE}/Add")));
    }
}
