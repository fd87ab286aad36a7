//! The names objects are stored under.

use std::fmt;

/// Where the objects of one group/resource live. All versions of a group/resource share one
/// storage (no conversion: objects are returned as stored, with `apiVersion` rewritten).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct StorageKey {
    /// The API group (`""` for the core group).
    pub group: String,
    /// The resource's plural (`configmaps`, `widgets`).
    pub plural: String,
}

impl StorageKey {
    /// The storage of `plural` in `group`.
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.to_string(),
            plural: plural.to_string(),
        }
    }

    /// Where Namespaces live.
    pub fn namespaces() -> Self {
        Self::new("", "namespaces")
    }

    /// Where CustomResourceDefinitions live.
    pub fn crds() -> Self {
        Self::new(crate::resources::CRD_GROUP, crate::resources::CRD_PLURAL)
    }
}

/// One object's place in its storage. The namespace is `""` for cluster-scoped objects; keys
/// order by namespace, then name (the order lists and continue tokens page in).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ObjectKey {
    /// The namespace, `""` when cluster-scoped.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace` (`""` for cluster-scoped objects).
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}
