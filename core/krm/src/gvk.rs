//! Group, version and kind.

use std::fmt;

/// A group, version and kind: the type of a KRM object.
///
/// The core group (`v1` objects such as `ConfigMap`) is the empty string; [`Gvk::new`] and
/// [`Gvk::from_api_version_kind`] also accept the spelling `core` and store it as `""`.
///
/// ```
/// use nephrite_krm::Gvk;
///
/// let deployment = Gvk::from_api_version_kind("apps/v1", "Deployment")?;
/// assert_eq!(deployment.group, "apps");
/// assert_eq!(deployment.api_version(), "apps/v1");
///
/// let config_map = Gvk::from_api_version_kind("v1", "ConfigMap")?;
/// assert_eq!(config_map.group, "");
/// assert_eq!(config_map.api_version(), "v1");
/// assert_eq!(config_map.to_string(), "v1, Kind=ConfigMap");
/// # Ok::<(), nephrite_krm::GvkError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Gvk {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1alpha1`.
    pub version: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

/// Why an apiVersion/kind pair is not a valid [`Gvk`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GvkError {
    /// The apiVersion is not `version` or `group/version` with non-empty parts and no whitespace.
    #[error("apiVersion {api_version:?} is not of the form `version` or `group/version`")]
    BadApiVersion {
        /// The apiVersion as given.
        api_version: String,
    },
    /// The kind is empty or contains whitespace or `/`.
    #[error(
        "kind {kind:?} (apiVersion {api_version:?}) must be non-empty without whitespace or `/`"
    )]
    BadKind {
        /// The apiVersion as given.
        api_version: String,
        /// The kind as given.
        kind: String,
    },
}

impl Gvk {
    /// A GVK from its parts; a group spelled `core` is stored as the empty core group.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        let mut group = group.into();
        if group == "core" {
            group.clear();
        }
        Gvk {
            group,
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// Parses an `apiVersion` (`v1` or `group/version`) and a kind, checking their shape.
    pub fn from_api_version_kind(api_version: &str, kind: &str) -> Result<Self, GvkError> {
        let bad_api_version = || GvkError::BadApiVersion {
            api_version: api_version.to_owned(),
        };
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        let bad_part =
            |part: &str| part.is_empty() || part.contains(|c: char| c.is_whitespace() || c == '/');
        if bad_part(version) || (api_version.contains('/') && bad_part(group)) {
            return Err(bad_api_version());
        }
        if bad_part(kind) {
            return Err(GvkError::BadKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            });
        }
        Ok(Gvk::new(group, version, kind))
    }

    /// Splits an apiVersion without checking it: everything before the last `/` is the group.
    /// Used where an object's apiVersion must be read even if it is odd.
    pub(crate) fn from_api_version_kind_lenient(api_version: &str, kind: &str) -> Self {
        match api_version.rsplit_once('/') {
            Some((group, version)) => Gvk::new(group, version, kind),
            None => Gvk::new("", api_version, kind),
        }
    }

    /// The `apiVersion` string: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether this is in the core (empty) group.
    pub fn is_core(&self) -> bool {
        self.group.is_empty()
    }

    /// Whether an object with this `apiVersion` and `kind` has this GVK.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && Gvk::from_api_version_kind_lenient(api_version, kind) == *self
    }
}

impl fmt::Display for Gvk {
    /// Kubernetes' spelling: `apps/v1, Kind=Deployment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}, Kind={}", self.version, self.kind)
        } else {
            write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_core_and_grouped() {
        let core = Gvk::from_api_version_kind("v1", "Pod").unwrap();
        assert_eq!(core, Gvk::new("", "v1", "Pod"));
        assert_eq!(core, Gvk::new("core", "v1", "Pod"));
        assert!(core.is_core());
        let apps = Gvk::from_api_version_kind("apps/v1", "Deployment").unwrap();
        assert_eq!(apps.group, "apps");
        assert_eq!(apps.version, "v1");
        assert_eq!(apps.api_version(), "apps/v1");
        assert_eq!(apps.to_string(), "apps/v1, Kind=Deployment");
        assert!(apps.matches("apps/v1", "Deployment"));
        assert!(!apps.matches("apps/v1beta1", "Deployment"));
        assert!(core.matches("v1", "Pod"));
        assert_eq!(
            Gvk::from_api_version_kind("core/v1", "Pod")
                .unwrap()
                .api_version(),
            "v1"
        );
    }

    #[test]
    fn rejects_bad_shapes() {
        for bad in ["", "/v1", "apps/", "a/b/c", "apps /v1", "v 1"] {
            assert_eq!(
                Gvk::from_api_version_kind(bad, "Kind"),
                Err(GvkError::BadApiVersion {
                    api_version: bad.into()
                }),
                "{bad:?}"
            );
        }
        let err = Gvk::from_api_version_kind("v1", "").unwrap_err();
        assert!(err.to_string().contains("kind \"\""), "{err}");
    }
}
