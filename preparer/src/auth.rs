//! Who may call what on the Data API: the preparer's default role table, which
//! `--auth-policy` extends (identities) or overrides (a role of the same name). Authentication
//! itself (client certificates, the `--auth-tokens` file) is the runtime's; see
//! `preparer/README.md`, "Credentials".
//!
//! Without `--auth-policy`, every authenticated caller has the role `write` ([`DEFAULT_ROLE`]):
//! it may do the daily work (templates, sites, deployments), but registering a plugin needs an
//! identity the policy file names `admin`. A policy file is an allowlist: identities it does
//! not name get its `default_roles` (none when it has no such key).
//!
//! | role | may call |
//! |---|---|
//! | `read` | `Get*`, `List*`, `Watch` |
//! | `write` | what `read` may, and register / delete templates and sites, create / update / approve / delete deployments (one by one or in an `ApplyDeployments` batch), modifications, named leases (`AcquireLease`, `RenewLease`, `ReleaseLease`; `GetLease` is `read`'s) |
//! | `plugin` | `UpdateDeployment`, `RenewModification`, `EndModification`, `CancelModification`: only with a modification token, so only the deployments the preparer handed it |
//! | `admin` | everything, and alone `RegisterPlugin` / `DeletePlugin` |
//!
//! Plugin registration is admin-only because a registered plugin is sent every matching
//! package, secrets and modification tokens included.

use nephrite_runtime::CallerIdentity;
use nephrite_runtime::auth::{ADMIN_ROLE, AuthPolicy};

/// The Data API's gRPC service name.
pub const SERVICE: &str = "nephrite.preparer.data.v1.Data";

/// The role that reads everything.
pub const READ_ROLE: &str = "read";
/// The role that writes templates, sites and deployments (and reads).
pub const WRITE_ROLE: &str = "write";
/// The role of preparation plugins: token-bound writes to the deployments handed to them.
pub const PLUGIN_ROLE: &str = "plugin";
/// The role of authenticated callers when no `--auth-policy` names them.
pub const DEFAULT_ROLE: &str = WRITE_ROLE;

const READ: &[&str] = &["Get*", "List*", "Watch"];

const WRITE: &[&str] = &[
    "RegisterTemplate",
    "DeleteTemplate",
    "RegisterSite",
    "DeleteSite",
    "CreateDeployment",
    "UpdateDeployment",
    "ApproveDeployment",
    "DeleteDeployment",
    "ApplyDeployments",
    "RollbackDeployment",
    "StartModification",
    "RenewModification",
    "EndModification",
    "CancelModification",
    "AcquireLease",
    "RenewLease",
    "ReleaseLease",
];

const PLUGIN: &[&str] = &[
    "UpdateDeployment",
    "RenewModification",
    "EndModification",
    "CancelModification",
];

fn patterns(methods: &[&[&str]]) -> Vec<String> {
    methods
        .iter()
        .flat_map(|m| m.iter())
        .map(|method| format!("{SERVICE}/{method}"))
        .collect()
}

/// The default role table (`admin` is the runtime's: every method), unnamed identities
/// [`DEFAULT_ROLE`].
pub fn roles() -> AuthPolicy {
    let table = [
        (READ_ROLE, patterns(&[READ])),
        (WRITE_ROLE, patterns(&[READ, WRITE])),
        (PLUGIN_ROLE, patterns(&[PLUGIN])),
    ];
    table
        .into_iter()
        .fold(AuthPolicy::new(), |policy, (role, patterns)| {
            policy
                .with_role(role, &patterns)
                .unwrap_or_else(|e| unreachable!("the built-in role {role} is valid: {e}"))
        })
        .with_default_roles([DEFAULT_ROLE])
        .unwrap_or_else(|e| unreachable!("the default role is in the table: {e}"))
}

/// The gRPC path of a Data API method, as policies match it.
pub fn method_path(method: &str) -> String {
    format!("/{SERVICE}/{method}")
}

/// Whether `caller` may write a deployment without a modification token: everyone but a
/// caller whose roles are only `plugin`'s (and callers of a server without roles).
pub fn may_write_without_token(caller: Option<&CallerIdentity>) -> bool {
    caller.is_none_or(|caller| {
        !caller.has_role(PLUGIN_ROLE) || caller.has_role(WRITE_ROLE) || caller.has_role(ADMIN_ROLE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_gives_each_role_its_methods() {
        let policy = roles();
        let can =
            |role: &str, method: &str| policy.allows(&[role.to_owned()], &method_path(method));
        for method in [
            "GetDeployment",
            "ListSites",
            "ListPlugins",
            "Watch",
            "GetLease",
        ] {
            assert!(can("read", method) && can("write", method), "{method}");
            assert!(!can("plugin", method), "{method}");
        }
        for method in [
            "CreateDeployment",
            "DeleteDeployment",
            "ApplyDeployments",
            "RegisterSite",
            "EndModification",
            "AcquireLease",
            "RenewLease",
            "ReleaseLease",
        ] {
            assert!(can("write", method) && !can("read", method), "{method}");
        }
        for method in ["RegisterPlugin", "DeletePlugin"] {
            assert!(can("admin", method), "{method}");
            assert!(!can("write", method) && !can("read", method) && !can("plugin", method));
        }
        assert!(can("plugin", "UpdateDeployment") && !can("plugin", "CreateDeployment"));
        assert!(!can("plugin", "ApplyDeployments"));
        assert_eq!(policy.roles_of("someone-unnamed"), [WRITE_ROLE]);
    }
}
