//! What a daemon's `deploy/` manifests grant one ServiceAccount, read without a server.
//!
//! Least-privilege tests compare the rights a manifest gives a daemon's ServiceAccount with a
//! table of what the daemon's code calls. The rights are found the way the API server's RBAC
//! authorizer finds them: from the bindings whose subjects name the account to the Role or
//! ClusterRole each binding refers to (a RoleBinding to a ClusterRole grants its rules in the
//! binding's namespace only). A `*` in any rule, a non-resource URL, a binding to a role no
//! manifest defines and a document that is not YAML are errors naming the file, the role and
//! the rule, so a test never compares a table with rights it could not read.
//!
//! A rule limited by `resourceNames` grants one [`Grant`] per name, so a table row without a
//! name does not match it (and the other way round).
//!
//! ```
//! use nephrite_test_services::rbac::{Grant, assert_exact, granted};
//!
//! let yaml = "
//! kind: ClusterRole
//! metadata: {name: reader}
//! rules: [{apiGroups: [''], resources: [pods], verbs: [list, watch]}]
//! ---
//! kind: ClusterRoleBinding
//! metadata: {name: reader}
//! roleRef: {kind: ClusterRole, name: reader}
//! subjects: [{kind: ServiceAccount, namespace: ops, name: reader}]
//! ";
//! let rights = granted(&[("rbac.yaml", yaml)], "ops/reader").unwrap();
//! assert_exact(&rights, [
//!     Grant::cluster("", "pods", "list"),
//!     Grant::cluster("", "pods", "watch"),
//! ])
//! .unwrap();
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize as _;
use serde_json::Value;

/// Where a grant holds: everywhere, or in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Granted by a ClusterRoleBinding: in every namespace and for cluster-scoped resources.
    Cluster,
    /// Granted by a RoleBinding: in that namespace only.
    Namespace(String),
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Cluster => f.write_str("cluster"),
            Scope::Namespace(namespace) => f.write_str(namespace),
        }
    }
}

/// One verb on one resource of one API group (`""` is the core group), where it holds and, for
/// a rule limited by `resourceNames`, the one object it is limited to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Grant {
    /// Where the grant holds.
    pub scope: Scope,
    /// The API group, `""` for the core group.
    pub group: String,
    /// The resource, with its subresource (`pods/status`).
    pub resource: String,
    /// The object's name, when the rule lists `resourceNames`.
    pub name: Option<String>,
    /// The verb.
    pub verb: String,
}

impl Grant {
    /// `verb` on `group/resource`, granted cluster-wide.
    pub fn cluster(group: &str, resource: &str, verb: &str) -> Self {
        Self {
            scope: Scope::Cluster,
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: None,
            verb: verb.to_owned(),
        }
    }

    /// `verb` on `group/resource`, granted in `namespace`.
    pub fn in_namespace(namespace: &str, group: &str, resource: &str, verb: &str) -> Self {
        Self {
            scope: Scope::Namespace(namespace.to_owned()),
            ..Self::cluster(group, resource, verb)
        }
    }

    /// The same grant, limited to the object `name`.
    pub fn named(self, name: &str) -> Self {
        Self {
            name: Some(name.to_owned()),
            ..self
        }
    }
}

/// `scope group/resource[name]:verb`, the core group written `core`.
impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.scope, self.resource)?;
        if let Some(name) = &self.name {
            write!(f, "[{name}]")?;
        }
        write!(f, ":{}", self.verb)
    }
}

/// Cluster-wide grants of a table of `(API group, resource, verbs)` rows, one per verb.
pub fn cluster_wide(rows: &[(&str, &str, &[&str])]) -> Vec<Grant> {
    rows.iter()
        .flat_map(|(group, resource, verbs)| {
            verbs
                .iter()
                .map(move |verb| Grant::cluster(group, resource, verb))
        })
        .collect()
}

/// Why the rights of a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RbacError {
    /// A document is not YAML.
    #[error("{file}: document {document} is not YAML: {source}")]
    Yaml {
        /// The manifest.
        file: String,
        /// The document's index in the file.
        document: usize,
        /// What the parser said.
        source: serde_norway::Error,
    },
    /// A rule grants `*`.
    #[error("{file}: {role}, rule {rule}: a wildcard {value:?} in {field}")]
    Wildcard {
        /// The manifest.
        file: String,
        /// `ClusterRole name` or `Role namespace/name`.
        role: String,
        /// The rule's index in the role.
        rule: usize,
        /// `apiGroups`, `resources`, `verbs` or `resourceNames`.
        field: &'static str,
        /// The value holding the `*`.
        value: String,
    },
    /// A rule grants non-resource URLs, which no daemon here calls.
    #[error("{file}: {role}, rule {rule}: nonResourceURLs {urls}")]
    NonResourceUrls {
        /// The manifest.
        file: String,
        /// `ClusterRole name` or `Role namespace/name`.
        role: String,
        /// The rule's index in the role.
        rule: usize,
        /// The URLs.
        urls: String,
    },
    /// A field of a rule is not a list of strings.
    #[error("{file}: {role}, rule {rule}: {field} is not a list of strings: {value}")]
    NotStrings {
        /// The manifest.
        file: String,
        /// `ClusterRole name` or `Role namespace/name`.
        role: String,
        /// The rule's index in the role.
        rule: usize,
        /// The field.
        field: &'static str,
        /// What it holds.
        value: String,
    },
    /// A binding refers to a role none of the manifests defines.
    #[error("{file}: {binding} binds {role}, which no manifest defines")]
    UnknownRole {
        /// The manifest of the binding.
        file: String,
        /// `ClusterRoleBinding name` or `RoleBinding namespace/name`.
        binding: String,
        /// The role it refers to.
        role: String,
    },
    /// A binding's subject is not a ServiceAccount.
    #[error("{file}: {binding} binds a {kind} {name:?}; only ServiceAccounts are expected")]
    NotAServiceAccount {
        /// The manifest of the binding.
        file: String,
        /// `ClusterRoleBinding name` or `RoleBinding namespace/name`.
        binding: String,
        /// The subject's kind.
        kind: String,
        /// The subject's name.
        name: String,
    },
    /// The account is not written `namespace/name`.
    #[error("ServiceAccount {0:?} is not namespace/name")]
    Account(String),
}

/// The namespace of a namespaced object without one: where `kubectl apply` puts it.
const DEFAULT_NAMESPACE: &str = "default";

/// A Role or ClusterRole, its rules read.
struct Role {
    rights: Vec<(String, String, Option<String>, String)>,
}

/// A RoleBinding or ClusterRoleBinding.
struct Binding {
    file: String,
    /// `ClusterRoleBinding name` or `RoleBinding namespace/name`.
    label: String,
    scope: Scope,
    /// The key of the role it refers to.
    role: (String, String, String),
    /// `namespace/name` of each ServiceAccount subject, or the kind and name of another.
    subjects: Vec<Result<String, (String, String)>>,
}

/// The roles (keyed by kind, namespace or `""`, name) and bindings of `manifests`.
type Access = (BTreeMap<(String, String, String), Role>, Vec<Binding>);

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// Reads every role and binding of `manifests` (file name, YAML), refusing what
/// [`RbacError`] lists in any role, bound or not.
fn read(manifests: &[(&str, &str)]) -> Result<Access, RbacError> {
    let mut roles = BTreeMap::new();
    let mut bindings = Vec::new();
    for (file, yaml) in manifests {
        for (document, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
            let doc = Value::deserialize(doc).map_err(|source| RbacError::Yaml {
                file: (*file).to_owned(),
                document,
                source,
            })?;
            let kind = text(&doc["kind"]);
            let name = text(&doc["metadata"]["name"]).to_owned();
            let namespace = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or(DEFAULT_NAMESPACE)
                .to_owned();
            match kind {
                "ClusterRole" => {
                    let label = format!("ClusterRole {name}");
                    let role = read_role(file, &label, &doc)?;
                    roles.insert((kind.to_owned(), String::new(), name), role);
                }
                "Role" => {
                    let label = format!("Role {namespace}/{name}");
                    let role = read_role(file, &label, &doc)?;
                    roles.insert((kind.to_owned(), namespace, name), role);
                }
                "ClusterRoleBinding" | "RoleBinding" => {
                    let cluster = kind == "ClusterRoleBinding";
                    let role_kind = text(&doc["roleRef"]["kind"]).to_owned();
                    let role_namespace = if role_kind == "Role" {
                        namespace.clone()
                    } else {
                        String::new()
                    };
                    let subjects = doc["subjects"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|s| {
                            let subject = text(&s["name"]).to_owned();
                            if s["kind"] == "ServiceAccount" {
                                let at = s["namespace"].as_str().unwrap_or(&namespace);
                                Ok(format!("{at}/{subject}"))
                            } else {
                                Err((text(&s["kind"]).to_owned(), subject))
                            }
                        })
                        .collect();
                    bindings.push(Binding {
                        file: (*file).to_owned(),
                        label: if cluster {
                            format!("{kind} {name}")
                        } else {
                            format!("{kind} {namespace}/{name}")
                        },
                        scope: if cluster {
                            Scope::Cluster
                        } else {
                            Scope::Namespace(namespace)
                        },
                        role: (
                            role_kind,
                            role_namespace,
                            text(&doc["roleRef"]["name"]).to_owned(),
                        ),
                        subjects,
                    });
                }
                _ => {}
            }
        }
    }
    Ok((roles, bindings))
}

/// The rights of one role document, `(group, resource, name, verb)`.
fn read_role(file: &str, label: &str, doc: &Value) -> Result<Role, RbacError> {
    let mut rights = Vec::new();
    for (rule_index, rule) in doc["rules"].as_array().into_iter().flatten().enumerate() {
        if let Some(urls) = rule.get("nonResourceURLs") {
            return Err(RbacError::NonResourceUrls {
                file: file.to_owned(),
                role: label.to_owned(),
                rule: rule_index,
                urls: urls.to_string(),
            });
        }
        let field = |field: &'static str| -> Result<Vec<String>, RbacError> {
            let value = &rule[field];
            let not_strings = || RbacError::NotStrings {
                file: file.to_owned(),
                role: label.to_owned(),
                rule: rule_index,
                field,
                value: value.to_string(),
            };
            let items = match value {
                Value::Null => &[][..],
                Value::Array(items) => items.as_slice(),
                _ => return Err(not_strings()),
            }
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(not_strings))
            .collect::<Result<Vec<_>, _>>()?;
            if let Some(wild) = items.iter().find(|item| item.contains('*')) {
                return Err(RbacError::Wildcard {
                    file: file.to_owned(),
                    role: label.to_owned(),
                    rule: rule_index,
                    field,
                    value: wild.clone(),
                });
            }
            Ok(items)
        };
        let groups = field("apiGroups")?;
        let resources = field("resources")?;
        let verbs = field("verbs")?;
        let names: Vec<Option<String>> = match field("resourceNames")? {
            names if names.is_empty() => vec![None],
            names => names.into_iter().map(Some).collect(),
        };
        for group in &groups {
            for resource in &resources {
                for name in &names {
                    for verb in &verbs {
                        rights.push((group.clone(), resource.clone(), name.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    Ok(Role { rights })
}

/// Everything `manifests` (file name, YAML) grant the ServiceAccount `account`
/// (`namespace/name`) through bindings whose subjects name it.
pub fn granted(manifests: &[(&str, &str)], account: &str) -> Result<BTreeSet<Grant>, RbacError> {
    if account
        .split_once('/')
        .is_none_or(|(ns, name)| ns.is_empty() || name.is_empty())
    {
        return Err(RbacError::Account(account.to_owned()));
    }
    let (roles, bindings) = read(manifests)?;
    let mut out = BTreeSet::new();
    for binding in bindings {
        if !binding.subjects.iter().any(|s| s.as_deref() == Ok(account)) {
            continue;
        }
        let Some(role) = roles.get(&binding.role) else {
            let (kind, namespace, name) = binding.role;
            return Err(RbacError::UnknownRole {
                file: binding.file,
                binding: binding.label,
                role: if namespace.is_empty() {
                    format!("{kind} {name}")
                } else {
                    format!("{kind} {namespace}/{name}")
                },
            });
        };
        for (group, resource, name, verb) in &role.rights {
            out.insert(Grant {
                scope: binding.scope.clone(),
                group: group.clone(),
                resource: resource.clone(),
                name: name.clone(),
                verb: verb.clone(),
            });
        }
    }
    Ok(out)
}

/// Every ServiceAccount (`namespace/name`) a binding of `manifests` names, refusing a subject
/// of another kind (a User or Group).
pub fn bound_accounts(manifests: &[(&str, &str)]) -> Result<BTreeSet<String>, RbacError> {
    let (_, bindings) = read(manifests)?;
    let mut out = BTreeSet::new();
    for binding in bindings {
        for subject in binding.subjects {
            match subject {
                Ok(account) => {
                    out.insert(account);
                }
                Err((kind, name)) => {
                    return Err(RbacError::NotAServiceAccount {
                        file: binding.file,
                        binding: binding.label,
                        kind,
                        name,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// The difference between what a manifest grants and what a daemon uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Granted, but in no row of the table.
    pub granted_not_used: Vec<Grant>,
    /// In the table, but not granted.
    pub used_not_granted: Vec<Grant>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |grants: &[Grant]| -> String {
            grants
                .iter()
                .map(|g| format!("\n    {g}"))
                .collect::<String>()
        };
        write!(
            f,
            "granted but not used (drop it, or add a row saying what uses it):{}\n\
             used but not granted:{}",
            list(&self.granted_not_used),
            list(&self.used_not_granted)
        )
    }
}

impl std::error::Error for Mismatch {}

/// `Ok` when `granted` is exactly `expected`, else both differences.
pub fn assert_exact(
    granted: &BTreeSet<Grant>,
    expected: impl IntoIterator<Item = Grant>,
) -> Result<(), Mismatch> {
    let expected: BTreeSet<Grant> = expected.into_iter().collect();
    let mismatch = Mismatch {
        granted_not_used: granted.difference(&expected).cloned().collect(),
        used_not_granted: expected.difference(granted).cloned().collect(),
    };
    if mismatch.granted_not_used.is_empty() && mismatch.used_not_granted.is_empty() {
        Ok(())
    } else {
        Err(mismatch)
    }
}

#[cfg(test)]
mod tests;
