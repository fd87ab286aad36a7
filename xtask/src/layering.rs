//! The layering check: crates under `core/` stay pure.
//!
//! A `core/` crate may not have an IO crate (async runtime, RPC, HTTP, Kubernetes client,
//! database driver, netlink) anywhere in its *normal* dependency tree. The check reads the
//! resolved graph from `cargo metadata`, so a forbidden crate pulled in through an intermediate
//! dependency is caught as well as a direct one. Dev- and build-dependencies are not followed:
//! tests may use whatever they like.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use serde::Deserialize;

/// Crates that perform IO or drive an async runtime, by package name.
pub const FORBIDDEN: &[&str] = &[
    // async runtimes and their IO layers
    "tokio",
    "async-std",
    "smol",
    "mio",
    // RPC and HTTP
    "tonic",
    "hyper",
    "hyper-util",
    "axum",
    "reqwest",
    "ureq",
    "h2",
    // Kubernetes client side (kube-core and kube-derive are types only and allowed)
    "kube-client",
    "kube-runtime",
    // database drivers
    "sqlx",
    "sqlx-core",
    "rusqlite",
    "libsqlite3-sys",
    "postgres",
    "tokio-postgres",
    "diesel",
    "redis",
    "etcd-client",
    // netlink and raw sockets
    "rtnetlink",
    "netlink-sys",
    "netlink-proto",
    "netlink-packet-core",
    "netlink-packet-route",
    "neli",
    "socket2",
];

/// The part of `cargo metadata --format-version 1` output the check reads.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
    workspace_root: String,
    resolve: Option<Resolve>,
}

#[derive(Debug, Deserialize)]
struct Package {
    id: String,
    name: String,
    manifest_path: String,
}

#[derive(Debug, Deserialize)]
struct Resolve {
    nodes: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    id: String,
    deps: Vec<NodeDep>,
}

#[derive(Debug, Deserialize)]
struct NodeDep {
    pkg: String,
    dep_kinds: Vec<DepKind>,
}

#[derive(Debug, Deserialize)]
struct DepKind {
    kind: Option<String>,
}

/// One forbidden crate reached from a `core/` crate, with the path that reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The `core/` crate.
    pub core_crate: String,
    /// The forbidden crate.
    pub forbidden: String,
    /// Package names from the core crate to the forbidden one, both included.
    pub path: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (core/) depends on {}: {}",
            self.core_crate,
            self.forbidden,
            self.path.join(" -> ")
        )
    }
}

/// Finds every forbidden crate in the normal dependency tree of each `core/` workspace crate.
///
/// Returns an error when the metadata has no resolved graph (`--no-deps` was passed).
pub fn check(metadata: &Metadata) -> anyhow::Result<Vec<Violation>> {
    let resolve = metadata.resolve.as_ref().ok_or_else(|| {
        anyhow::anyhow!("cargo metadata output has no `resolve` graph (was --no-deps passed?)")
    })?;
    let names: BTreeMap<&str, &str> = metadata
        .packages
        .iter()
        .map(|p| (p.id.as_str(), p.name.as_str()))
        .collect();
    let normal_deps: BTreeMap<&str, Vec<&str>> = resolve
        .nodes
        .iter()
        .map(|n| {
            let deps = n
                .deps
                .iter()
                .filter(|d| d.dep_kinds.iter().any(|k| k.kind.is_none()))
                .map(|d| d.pkg.as_str())
                .collect();
            (n.id.as_str(), deps)
        })
        .collect();
    let core_dir = format!("{}/core/", metadata.workspace_root.trim_end_matches('/'));

    let mut violations = Vec::new();
    for member in &metadata.workspace_members {
        let Some(package) = metadata.packages.iter().find(|p| &p.id == member) else {
            continue;
        };
        if !package.manifest_path.starts_with(&core_dir) {
            continue;
        }
        // Breadth-first, so the reported path to each forbidden crate is a shortest one.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut seen: BTreeSet<&str> = BTreeSet::from([member.as_str()]);
        let mut queue = VecDeque::from([member.as_str()]);
        while let Some(id) = queue.pop_front() {
            for &dep in normal_deps.get(id).map(Vec::as_slice).unwrap_or_default() {
                if !seen.insert(dep) {
                    continue;
                }
                parent.insert(dep, id);
                let name = names.get(dep).copied().unwrap_or(dep);
                if FORBIDDEN.contains(&name) {
                    let mut path = vec![name.to_string()];
                    let mut at = dep;
                    while let Some(&up) = parent.get(at) {
                        path.push(names.get(up).copied().unwrap_or(up).to_string());
                        at = up;
                    }
                    path.reverse();
                    violations.push(Violation {
                        core_crate: package.name.clone(),
                        forbidden: name.to_string(),
                        path,
                    });
                    // Do not walk below a forbidden crate: one report per entry point is enough.
                    continue;
                }
                queue.push_back(dep);
            }
        }
    }
    Ok(violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Metadata {
        let path = format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("fixture is readable");
        serde_json::from_str(&text).expect("fixture is valid cargo metadata")
    }

    #[test]
    fn core_crate_gaining_tokio_through_an_intermediate_fails() {
        let violations = check(&fixture("core-with-tokio.json")).unwrap();
        assert_eq!(
            violations,
            vec![Violation {
                core_crate: "nephrite-krm".into(),
                forbidden: "tokio".into(),
                path: vec!["nephrite-krm".into(), "helper-lib".into(), "tokio".into()],
            }]
        );
        assert_eq!(
            violations[0].to_string(),
            "nephrite-krm (core/) depends on tokio: nephrite-krm -> helper-lib -> tokio"
        );
    }

    #[test]
    fn tokio_as_dev_dependency_or_outside_core_is_allowed() {
        assert_eq!(check(&fixture("core-clean.json")).unwrap(), vec![]);
    }

    #[test]
    fn metadata_without_resolve_is_an_error() {
        let mut metadata = fixture("core-clean.json");
        metadata.resolve = None;
        let err = check(&metadata).unwrap_err().to_string();
        assert!(err.contains("no-deps"), "{err}");
    }

    #[test]
    fn this_workspace_passes() {
        let out = crate::cargo_metadata(&[]).expect("cargo metadata runs");
        let metadata: Metadata = serde_json::from_slice(&out).unwrap();
        let violations = check(&metadata).unwrap();
        assert!(violations.is_empty(), "{violations:#?}");
    }
}
