//! The Kubernetes REST path layout: which document or resource a path addresses.

/// A request for objects: `/api/v1/...` or `/apis/<group>/<version>/...`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub sub: Option<String>,
    pub legacy_watch: bool,
}

/// A group (`""` for the core group) and a version.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupVersion {
    pub group: String,
    pub version: String,
}

impl GroupVersion {
    pub fn new(group: &str, version: &str) -> Self {
        Self {
            group: group.to_string(),
            version: version.to_string(),
        }
    }
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Target {
    /// `/version`.
    Version,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    GroupList,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    ResourceList(GroupVersion),
    /// Objects of a resource.
    Resource(ResourcePath),
    /// `/_test/<what>`.
    Admin(String),
    /// `/openapi/v3`.
    OpenApiRoot,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
    OpenApi(GroupVersion),
}

pub(super) fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Some(Target::Version),
        ["api"] => Some(Target::CoreVersions),
        ["apis"] => Some(Target::GroupList),
        ["_test", what] => Some(Target::Admin((*what).to_string())),
        ["openapi", "v3"] => Some(Target::OpenApiRoot),
        ["openapi", "v3", "api", version] => Some(Target::OpenApi(GroupVersion::new("", version))),
        ["openapi", "v3", "apis", group, version] => {
            Some(Target::OpenApi(GroupVersion::new(group, version)))
        }
        ["api", version, rest @ ..] => resource_path("", version, rest),
        ["apis", group] => Some(Target::Group((*group).to_string())),
        ["apis", group, version, rest @ ..] => resource_path(group, version, rest),
        _ => None,
    }
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    if rest.is_empty() {
        return Some(Target::ResourceList(GroupVersion::new(group, version)));
    }
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let (namespace, tail) = match rest {
        // `/api/v1/namespaces/<name>/status` addresses the Namespace itself.
        ["namespaces", _, sub] if group.is_empty() && matches!(*sub, "status" | "finalize") => {
            (None, rest)
        }
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some((*ns).to_string()), tail),
        _ => (None, rest),
    };
    match tail {
        [plural, more @ ..] if more.len() <= 2 => Some(Target::Resource(ResourcePath {
            group: group.into(),
            version: version.into(),
            namespace,
            plural: (*plural).to_string(),
            name: more.first().map(|s| (*s).to_string()),
            sub: more.get(1).map(|s| (*s).to_string()),
            legacy_watch,
        })),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
