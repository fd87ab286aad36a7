//! The resource types the server serves (built-ins and CRD-defined), and discovery documents.

use serde_json::{Map, Value, json};

use crate::error::FieldProblem;
use crate::store::StorageKey;

/// One served group/version/resource.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// `openAPIV3Schema` of a CRD version (enforced by [`crate::schema`]).
    pub schema: Option<Value>,
    /// The schema's `pattern`s, compiled when the CRD was stored.
    pub patterns: crate::schema::Patterns,
    /// Name of the CRD that defines this resource; `None` for built-ins.
    pub crd: Option<String>,
}

impl ResourceType {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `widgets.example.com`, as used in error messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `ConfigMap`, or `Ingress.networking.k8s.io`: how error messages name the kind.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The storage this resource reads and writes.
    pub fn storage(&self) -> StorageKey {
        StorageKey::new(&self.group, &self.plural)
    }

    /// The `APIResource` entries for discovery (the resource and its status subresource).
    pub fn discovery_entries(&self) -> Vec<Value> {
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        });
        if let Some(map) = main.as_object_mut() {
            if !self.short_names.is_empty() {
                map.insert("shortNames".into(), json!(self.short_names));
            }
            if !self.categories.is_empty() {
                map.insert("categories".into(), json!(self.categories));
            }
        }
        let mut out = vec![main];
        if self.status_subresource {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        out
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    plural: &str,
    kind: &str,
    namespaced: bool,
    short_names: &[&str],
    status: bool,
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        plural: plural.into(),
        singular: kind.to_ascii_lowercase(),
        kind: kind.into(),
        namespaced,
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        status_subresource: status,
        schema: None,
        patterns: Default::default(),
        crd: None,
    }
}

/// The built-in kinds served from start-up.
pub(crate) fn builtins() -> Vec<ResourceType> {
    vec![
        builtin("", "v1", "namespaces", "Namespace", false, &["ns"], true),
        builtin("", "v1", "configmaps", "ConfigMap", true, &["cm"], false),
        builtin("", "v1", "secrets", "Secret", true, &[], false),
        builtin("", "v1", "services", "Service", true, &["svc"], true),
        builtin("", "v1", "endpoints", "Endpoints", true, &["ep"], false),
        builtin("", "v1", "nodes", "Node", false, &["no"], true),
        builtin("", "v1", "pods", "Pod", true, &["po"], true),
        builtin("", "v1", "events", "Event", true, &["ev"], false),
        builtin(
            "",
            "v1",
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            false,
        ),
        builtin(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            true,
            &[],
            false,
        ),
        builtin(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            true,
            &["ev"],
            false,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "leases",
            "Lease",
            true,
            &[],
            false,
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "ingresses",
            "Ingress",
            true,
            &["ing"],
            true,
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "networkpolicies",
            "NetworkPolicy",
            true,
            &["netpol"],
            false,
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "ingressclasses",
            "IngressClass",
            false,
            &[],
            false,
        ),
        builtin(
            "apps",
            "v1",
            "deployments",
            "Deployment",
            true,
            &["deploy"],
            true,
        ),
        builtin(
            "apps",
            "v1",
            "statefulsets",
            "StatefulSet",
            true,
            &["sts"],
            true,
        ),
        builtin("apps", "v1", "daemonsets", "DaemonSet", true, &["ds"], true),
        builtin(
            "apps",
            "v1",
            "replicasets",
            "ReplicaSet",
            true,
            &["rs"],
            true,
        ),
        builtin(RBAC_GROUP, "v1", "roles", "Role", true, &[], false),
        builtin(
            RBAC_GROUP,
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
            &[],
            false,
        ),
        builtin(
            RBAC_GROUP,
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
            &[],
            false,
        ),
        builtin(
            RBAC_GROUP,
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
            false,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
        ),
    ]
}

/// The group of Roles, ClusterRoles and their bindings.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The group/resource of CustomResourceDefinitions.
pub(crate) const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The plural of CustomResourceDefinitions.
pub(crate) const CRD_PLURAL: &str = "customresourcedefinitions";

/// Orders versions like Kubernetes: GA before beta before alpha, higher numbers first, then
/// anything else alphabetically. Returns a sort key (smaller sorts first).
pub(crate) fn version_priority(version: &str) -> (u8, i64, i64, String) {
    let parsed = version.strip_prefix('v').and_then(|rest| {
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let major: i64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0u8, -major, 0i64));
        }
        for (level, word) in [(1u8, "beta"), (2u8, "alpha")] {
            if let Some(n) = tail.strip_prefix(word) {
                let minor: i64 = if n.is_empty() { 0 } else { n.parse().ok()? };
                return Some((level, -major, -minor));
            }
        }
        None
    });
    match parsed {
        Some((level, major, minor)) => (level, major, minor, String::new()),
        None => (3, 0, 0, version.to_string()),
    }
}

/// A CRD that names its resource, as read from the CRD object.
pub(crate) struct CrdDefinition {
    pub group: String,
    pub plural: String,
    pub names: Value,
    pub types: Vec<ResourceType>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

/// Reads a CRD object into the resource types it serves. The error names the field at fault.
pub(crate) fn parse_crd(crd: &Value) -> Result<CrdDefinition, FieldProblem> {
    let required = |path: &[&str]| {
        str_at(crd, path)
            .map(str::to_string)
            .ok_or_else(|| FieldProblem::new(path.join("."), "Required value"))
    };
    let name = required(&["metadata", "name"])?;
    let group = required(&["spec", "group"])?;
    let plural = required(&["spec", "names", "plural"])?;
    let kind = required(&["spec", "names", "kind"])?;
    if plural != plural.to_ascii_lowercase() {
        return Err(FieldProblem::new(
            "spec.names.plural",
            format!("Invalid value: {plural:?}: must be lowercase"),
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(FieldProblem::new(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let singular = str_at(crd, &["spec", "names", "singular"])
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let scope = str_at(crd, &["spec", "scope"]).unwrap_or("");
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            return Err(FieldProblem::new(
                "spec.scope",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
        }
    };
    let strings = |path: &[&str]| -> Vec<String> {
        let mut cur = crd;
        for p in path {
            match cur.get(p) {
                Some(v) => cur = v,
                None => return Vec::new(),
            }
        }
        cur.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strings(&["spec", "names", "shortNames"]);
    let categories = strings(&["spec", "names", "categories"]);
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| FieldProblem::new("spec.versions", "Required value"))?;
    let mut types = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let vname = str_at(v, &["name"]).ok_or_else(|| {
            FieldProblem::new(format!("spec.versions[{i}].name"), "Required value")
        })?;
        let schema = v.pointer("/schema/openAPIV3Schema").cloned();
        let schema_path = format!("spec.versions[{i}].schema.openAPIV3Schema");
        let patterns = match &schema {
            Some(s) => {
                crate::schema::compile_patterns(s, &schema_path).map_err(|(path, pattern)| {
                    FieldProblem::new(
                        path,
                        format!("Invalid value: {pattern:?}: must be a valid regular expression"),
                    )
                })?
            }
            None => Default::default(),
        };
        if !v.get("served").and_then(Value::as_bool).unwrap_or(false) {
            continue;
        }
        types.push(ResourceType {
            group: group.clone(),
            version: vname.to_string(),
            plural: plural.clone(),
            singular: singular.clone(),
            kind: kind.clone(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            status_subresource: v.pointer("/subresources/status").is_some(),
            schema,
            patterns,
            crd: Some(name.clone()),
        });
    }
    types.sort_by_key(|t| version_priority(&t.version));
    let mut names = Map::new();
    names.insert("plural".into(), json!(plural));
    names.insert("singular".into(), json!(singular));
    names.insert("kind".into(), json!(kind));
    if let Some(list_kind) = str_at(crd, &["spec", "names", "listKind"]) {
        names.insert("listKind".into(), json!(list_kind));
    } else {
        names.insert("listKind".into(), json!(format!("{kind}List")));
    }
    if !short_names.is_empty() {
        names.insert("shortNames".into(), json!(short_names));
    }
    if !categories.is_empty() {
        names.insert("categories".into(), json!(categories));
    }
    Ok(CrdDefinition {
        group,
        plural,
        names: Value::Object(names),
        types,
    })
}

/// The `/version` document.
pub(crate) fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-nephrite-test",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Groups in serving order with their versions (preferred first).
pub(crate) fn groups(types: &[ResourceType]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for t in types {
        match out.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, versions)) => {
                if !versions.contains(&t.version) {
                    versions.push(t.version.clone());
                }
            }
            None => out.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by_key(|v| version_priority(v));
    }
    out
}

/// The `APIGroup` document for one group.
pub(crate) fn api_group(group: &str, versions: &[String]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": gvs,
        "preferredVersion": preferred,
    })
}

/// The `APIGroupList` document (`/apis`), named groups only.
pub(crate) fn api_group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = groups(types)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| {
            let mut doc = api_group(&g, &versions);
            if let Some(map) = doc.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            doc
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// The `APIResourceList` for one group/version, or `None` when nothing is served there.
pub(crate) fn api_resource_list(
    types: &[ResourceType],
    group: &str,
    version: &str,
) -> Option<Value> {
    let entries: Vec<Value> = types
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .flat_map(ResourceType::discovery_entries)
        .collect();
    if entries.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": entries,
    }))
}

#[cfg(test)]
mod tests;
