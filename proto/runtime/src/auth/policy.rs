//! The policy file: roles as lists of method patterns, identities as lists of roles.
//!
//! ```yaml
//! roles:                       # added to (or replacing) the roles the daemon defines
//!   read: [nephrite.preparer.v1.Data/Get*, nephrite.preparer.v1.Data/List*]
//!   router: [kuryr.l7.v1.Rules/Watch, kuryr.l7.v1.Rules/Acknowledge]
//! identities:
//!   ops.example.com: [admin]
//!   router-a: [router]
//! default_roles: []            # the roles of identities not named above (none when absent)
//! ```
//!
//! A pattern is `package.Service/Method`, `package.Service/Prefix*` (`/*` for the whole service)
//! or `*`. The role `admin` may call everything unless the daemon or the file defines it.
//!
//! **Identities the policy does not name.** Without a file, the daemon's role table applies
//! and every authenticated identity gets the daemon's *default roles*
//! ([`AuthPolicy::with_default_roles`]; the preparer's `write`, ntc's `preparer`; a daemon
//! without a table: `admin`, i.e. everything). A file is an allowlist: identities it does not
//! name get the roles of its `default_roles` key, none when the key is absent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The role that may call every method unless redefined.
pub const ADMIN_ROLE: &str = "admin";

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read the auth policy {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not a policy.
    #[error("auth policy {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its place.
        message: String,
    },
}

/// A fully-qualified method pattern (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodPattern(String);

impl MethodPattern {
    /// Parses a pattern.
    ///
    /// # Errors
    /// A message naming the pattern when it is not `*` or `service/method` with at most one
    /// trailing `*`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim().trim_start_matches('/');
        let valid = text == "*"
            || text.split_once('/').is_some_and(|(service, method)| {
                !service.is_empty()
                    && !service.contains('*')
                    && !method.contains('/')
                    && !method.trim_end_matches('*').contains('*')
                    && method.matches('*').count() <= 1
            });
        if valid {
            Ok(MethodPattern(text.to_owned()))
        } else {
            Err(format!(
                "method pattern {text:?} is not \"*\", \"package.Service/Method\" or \
                 \"package.Service/Prefix*\""
            ))
        }
    }

    /// Whether the request path `/package.Service/Method` matches.
    pub fn matches(&self, path: &str) -> bool {
        let path = path.trim_start_matches('/');
        match self.0.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == self.0,
        }
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    roles: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    identities: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    default_roles: Vec<String>,
}

/// Roles (method patterns), the roles of each identity, and the roles of the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthPolicy {
    roles: BTreeMap<String, Vec<MethodPattern>>,
    identities: BTreeMap<String, Vec<String>>,
    default_roles: Vec<String>,
}

impl AuthPolicy {
    /// A policy with only the built-in `admin` role and no identities, under which every
    /// identity is `admin` (what a daemon without a role table means: an authenticated caller
    /// may call everything). A daemon with a table narrows that with
    /// [`AuthPolicy::with_default_roles`].
    pub fn new() -> Self {
        let mut policy = AuthPolicy::default();
        policy
            .roles
            .insert(ADMIN_ROLE.to_owned(), vec![MethodPattern("*".to_owned())]);
        policy.default_roles = vec![ADMIN_ROLE.to_owned()];
        policy
    }

    /// Gives identities the policy does not name the `roles` (none: they may call only what
    /// needs no role: health, reflection, daemon info).
    ///
    /// # Errors
    /// The first role that is not defined.
    pub fn with_default_roles<S: Into<String>>(
        mut self,
        roles: impl IntoIterator<Item = S>,
    ) -> Result<Self, String> {
        let roles: Vec<String> = roles.into_iter().map(Into::into).collect();
        if let Some(unknown) = roles.iter().find(|r| !self.roles.contains_key(*r)) {
            return Err(format!(
                "the default role {unknown:?} is not defined (roles: {})",
                self.role_names()
            ));
        }
        self.default_roles = roles;
        Ok(self)
    }

    /// The roles of identities the policy does not name.
    pub fn default_roles(&self) -> &[String] {
        &self.default_roles
    }

    fn role_names(&self) -> String {
        self.roles.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    /// Defines (or redefines) `role` as the methods matching `patterns`.
    ///
    /// # Errors
    /// The first pattern that is not valid.
    pub fn with_role<S: AsRef<str>>(
        mut self,
        role: &str,
        patterns: impl IntoIterator<Item = S>,
    ) -> Result<Self, String> {
        let patterns = patterns
            .into_iter()
            .map(|p| MethodPattern::parse(p.as_ref()))
            .collect::<Result<_, _>>()?;
        self.roles.insert(role.to_owned(), patterns);
        Ok(self)
    }

    /// Gives `identity` the `roles`.
    #[must_use]
    pub fn with_identity<S: Into<String>>(
        mut self,
        identity: &str,
        roles: impl IntoIterator<Item = S>,
    ) -> Self {
        self.identities.insert(
            identity.to_owned(),
            roles.into_iter().map(Into::into).collect(),
        );
        self
    }

    /// This policy with the roles and identities of the YAML `text` added (a role the text
    /// defines replaces the one of the same name). The text is an allowlist: identities it
    /// does not name get its `default_roles`, none when it has no such key.
    ///
    /// # Errors
    /// A message naming what is wrong: bad YAML, a bad pattern, an identity with an unknown role.
    pub fn merge_yaml(mut self, text: &str) -> Result<Self, String> {
        let file: PolicyFile = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        for (role, patterns) in file.roles {
            self = self
                .with_role(&role, &patterns)
                .map_err(|e| format!("role {role:?}: {e}"))?;
        }
        for (identity, roles) in file.identities {
            if let Some(unknown) = roles.iter().find(|r| !self.roles.contains_key(*r)) {
                return Err(format!(
                    "identity {identity:?} has the role {unknown:?}, which is not defined (roles: {})",
                    self.role_names()
                ));
            }
            self = self.with_identity(&identity, roles);
        }
        self.with_default_roles(file.default_roles)
            .map_err(|e| format!("default_roles: {e}"))
    }

    /// This policy with the file at `path` merged in (see [`AuthPolicy::merge_yaml`]).
    ///
    /// # Errors
    /// When the file cannot be read or is not a valid policy; the error names the file.
    pub fn merge_file(self, path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.merge_yaml(&text)
            .map_err(|message| PolicyError::Invalid {
                path: path.to_owned(),
                message,
            })
    }

    /// The roles of `identity` (the default roles for an identity the policy does not name).
    pub fn roles_of(&self, identity: &str) -> Vec<String> {
        self.identities
            .get(identity)
            .unwrap_or(&self.default_roles)
            .clone()
    }

    /// Whether one of `roles` allows the request path `/package.Service/Method`.
    pub fn allows(&self, roles: &[String], path: &str) -> bool {
        roles.iter().any(|role| {
            self.roles
                .get(role)
                .is_some_and(|patterns| patterns.iter().any(|p| p.matches(path)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_methods_services_and_prefixes() {
        let exact = MethodPattern::parse("a.v1.Svc/Get").unwrap();
        assert!(exact.matches("/a.v1.Svc/Get"));
        assert!(!exact.matches("/a.v1.Svc/GetAll"));
        let prefix = MethodPattern::parse("a.v1.Svc/List*").unwrap();
        assert!(prefix.matches("/a.v1.Svc/ListSites"));
        assert!(!prefix.matches("/a.v1.Svc/Delete"));
        let service = MethodPattern::parse("a.v1.Svc/*").unwrap();
        assert!(service.matches("/a.v1.Svc/Delete"));
        assert!(!service.matches("/a.v1.SvcOther/Delete"));
        assert!(MethodPattern::parse("*").unwrap().matches("/x.Y/Z"));
        for bad in [
            "a.v1.Svc",
            "*/Get",
            "a.v1.Svc/G*t",
            "a/b/c",
            "",
            "a.v1.Svc/**",
        ] {
            assert!(MethodPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_adds_roles_and_identities_and_names_its_mistakes() {
        let policy = AuthPolicy::new()
            .with_role("read", ["a.v1.Svc/Get*"])
            .unwrap()
            .merge_yaml(
                "roles:\n  router: [a.v1.Svc/Watch]\nidentities:\n  ops: [admin]\n  r1: [router, read]\n",
            )
            .unwrap();
        let r1 = policy.roles_of("r1");
        assert!(policy.allows(&r1, "/a.v1.Svc/Watch"));
        assert!(policy.allows(&r1, "/a.v1.Svc/GetThing"));
        assert!(!policy.allows(&r1, "/a.v1.Svc/Delete"));
        assert!(policy.allows(&policy.roles_of("ops"), "/b.v1.Other/Delete"));
        assert!(policy.roles_of("stranger").is_empty());

        let err = AuthPolicy::new()
            .merge_yaml("identities:\n  x: [writer]\n")
            .unwrap_err();
        assert!(err.contains("\"writer\", which is not defined"), "{err}");
        let err = AuthPolicy::new()
            .merge_yaml("roles:\n  r: [nonsense]\n")
            .unwrap_err();
        assert!(
            err.contains("role \"r\": method pattern \"nonsense\""),
            "{err}"
        );
        assert!(AuthPolicy::new().merge_yaml("rolez: {}\n").is_err());
        let err = AuthPolicy::new()
            .merge_yaml("default_roles: [writer]\n")
            .unwrap_err();
        assert!(
            err.starts_with("default_roles: the default role \"writer\" is not defined"),
            "{err}"
        );
    }

    #[test]
    fn unnamed_identities_get_the_default_roles_which_a_file_replaces() {
        // A daemon without a table: everyone authenticated is admin.
        let open = AuthPolicy::new();
        assert_eq!(open.roles_of("anyone"), ["admin"]);
        assert!(open.allows(&open.roles_of("anyone"), "/x.v1.Y/Z"));

        let table = AuthPolicy::new()
            .with_role("read", ["a.v1.Svc/Get*"])
            .unwrap()
            .with_role("write", ["a.v1.Svc/*"])
            .unwrap()
            .with_default_roles(["read"])
            .unwrap();
        assert_eq!(table.roles_of("anyone"), ["read"]);
        assert!(table.allows(&table.roles_of("anyone"), "/a.v1.Svc/GetX"));
        assert!(!table.allows(&table.roles_of("anyone"), "/a.v1.Svc/Delete"));
        assert!(table.clone().with_default_roles(["nope"]).is_err());

        // A file names its identities; the others get its default_roles, else nothing.
        let allowlist = table
            .clone()
            .merge_yaml("identities:\n  ops: [admin]\n")
            .unwrap();
        assert_eq!(allowlist.roles_of("ops"), ["admin"]);
        assert!(allowlist.roles_of("anyone").is_empty());
        let widened = table
            .merge_yaml("identities:\n  ops: [admin]\ndefault_roles: [write]\n")
            .unwrap();
        assert_eq!(widened.roles_of("anyone"), ["write"]);
        assert_eq!(widened.default_roles(), ["write"]);
    }
}
