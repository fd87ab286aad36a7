//! The boundary checks between the workspace's crates: who may depend on whom, and how.
//!
//! Two rules keep the daemons apart and the versions in one place:
//!
//! - **No daemon depends on a daemon.** A crate inside a daemon's folder (`preparer/`,
//!   `topology/`, `nimbess-agent/`, `kuryr-l7/`, `bmm-provider/`) is that daemon's, and its
//!   *normal* and build dependencies may not include another daemon crate: what one daemon needs
//!   of another goes through the other's client crate (`<daemon>/client`), which converts the
//!   wire to domain values and links nothing of the server. A client crate may not depend on a
//!   daemon crate either. Dev-dependencies are not checked: a test may start another daemon.
//! - **Workspace crates through `[workspace.dependencies]`.** A member names another member with
//!   `name.workspace = true`, never with a `path` of its own, so each crate's location is written
//!   once, in the root manifest.
//!
//! The first rule reads `cargo metadata` (each package's direct dependencies); the second reads
//! the members' manifests, since the metadata no longer says whether a dependency was inherited.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

/// The daemons' folders, relative to the workspace root.
pub const DAEMON_DIRS: &[&str] = &[
    "preparer",
    "topology",
    "nimbess-agent",
    "kuryr-l7",
    "bmm-provider",
];

/// The folder, inside a daemon's folder, of the client crate of that daemon's API.
const CLIENT_DIR: &str = "client";

/// The part of `cargo metadata --format-version 1` output the checks read.
#[derive(Debug, Deserialize)]
pub struct Metadata {
    packages: Vec<Package>,
    workspace_members: Vec<String>,
    workspace_root: String,
}

#[derive(Debug, Deserialize)]
struct Package {
    id: String,
    name: String,
    manifest_path: String,
    dependencies: Vec<Dependency>,
}

#[derive(Debug, Deserialize)]
struct Dependency {
    name: String,
    kind: Option<String>,
    path: Option<String>,
}

/// What a workspace member is, by where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A crate of a daemon (its library, binaries, or a sub-crate with binaries of its own).
    Daemon,
    /// The client crate of a daemon's API (`<daemon>/client`).
    Client,
    /// Anything else: `core/`, `proto/`, `tests/`, `xtask`.
    Other,
}

/// A workspace member with its folder (relative to the root) and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The package name.
    pub name: String,
    /// The package's folder, relative to the workspace root, `/`-separated.
    pub dir: String,
    /// What the crate is.
    pub role: Role,
}

impl Metadata {
    /// The workspace's members, in metadata order.
    pub fn members(&self) -> Vec<Member> {
        let root = self.workspace_root.trim_end_matches('/');
        self.workspace_members
            .iter()
            .filter_map(|id| self.packages.iter().find(|p| &p.id == id))
            .map(|p| {
                let dir = Path::new(&p.manifest_path)
                    .parent()
                    .map(|d| d.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                let dir = dir
                    .strip_prefix(root)
                    .unwrap_or(&dir)
                    .trim_start_matches('/')
                    .to_string();
                Member {
                    name: p.name.clone(),
                    role: role_of(&dir),
                    dir,
                }
            })
            .collect()
    }

    /// The workspace root.
    pub fn root(&self) -> PathBuf {
        PathBuf::from(&self.workspace_root)
    }
}

fn role_of(dir: &str) -> Role {
    let Some(daemon) = DAEMON_DIRS
        .iter()
        .find(|d| dir == **d || dir.starts_with(&format!("{d}/")))
    else {
        return Role::Other;
    };
    if dir == format!("{daemon}/{CLIENT_DIR}") {
        Role::Client
    } else {
        Role::Daemon
    }
}

/// A dependency that crosses a boundary the rules forbid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A daemon or client crate depends (normal or build) on a daemon crate.
    DaemonDependency {
        /// The depending crate.
        from: String,
        /// The daemon crate it depends on.
        to: String,
        /// `normal` or `build`.
        kind: &'static str,
    },
    /// A member names a workspace crate by `path` instead of `workspace = true`.
    PathDependency {
        /// The member's manifest, relative to the root.
        manifest: String,
        /// The table the dependency sits in (`dependencies`, `dev-dependencies`, ...).
        table: String,
        /// The dependency's key.
        dependency: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DaemonDependency { from, to, kind } => write!(
                f,
                "{from} has a {kind} dependency on the daemon crate {to}: use {to}'s client \
                 crate (or a dev-dependency in tests)"
            ),
            Self::PathDependency {
                manifest,
                table,
                dependency,
            } => write!(
                f,
                "{manifest}: [{table}] {dependency} has its own `path`: declare it once in the \
                 root's [workspace.dependencies] and write `{dependency}.workspace = true`"
            ),
        }
    }
}

/// Every normal or build dependency of a daemon or client crate on a daemon crate.
pub fn daemon_dependencies(metadata: &Metadata) -> Vec<Violation> {
    let members = metadata.members();
    let daemons: Vec<&str> = members
        .iter()
        .filter(|m| m.role == Role::Daemon)
        .map(|m| m.name.as_str())
        .collect();
    let mut violations = Vec::new();
    for member in members.iter().filter(|m| m.role != Role::Other) {
        let Some(package) = metadata.packages.iter().find(|p| p.name == member.name) else {
            continue;
        };
        for dep in &package.dependencies {
            let kind = match dep.kind.as_deref() {
                None => "normal",
                Some("build") => "build",
                Some(_) => continue,
            };
            if dep.path.is_some() && daemons.contains(&dep.name.as_str()) && dep.name != member.name
            {
                violations.push(Violation::DaemonDependency {
                    from: member.name.clone(),
                    to: dep.name.clone(),
                    kind,
                });
            }
        }
    }
    violations
}

/// The dependency tables of a manifest: `(table name, table)`, the target-specific ones too.
fn dependency_tables(manifest: &toml_edit::DocumentMut) -> Vec<(String, &toml_edit::Table)> {
    const KINDS: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];
    let mut tables = Vec::new();
    for kind in KINDS {
        if let Some(table) = manifest.get(kind).and_then(toml_edit::Item::as_table) {
            tables.push(((*kind).to_string(), table));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(toml_edit::Item::as_table) {
        for (target, item) in targets {
            for kind in KINDS {
                if let Some(table) = item.get(kind).and_then(toml_edit::Item::as_table) {
                    tables.push((format!("target.{target}.{kind}"), table));
                }
            }
        }
    }
    tables
}

/// Every dependency in one member manifest's text that carries its own `path`.
pub fn path_dependencies(manifest_name: &str, text: &str) -> anyhow::Result<Vec<Violation>> {
    let manifest: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("parsing {manifest_name}"))?;
    let mut violations = Vec::new();
    for (table_name, table) in dependency_tables(&manifest) {
        for (key, item) in table {
            let has_path = match item {
                toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => t.contains_key("path"),
                toml_edit::Item::Table(t) => t.contains_key("path"),
                _ => false,
            };
            if has_path {
                violations.push(Violation::PathDependency {
                    manifest: manifest_name.to_string(),
                    table: table_name.clone(),
                    dependency: key.to_string(),
                });
            }
        }
    }
    Ok(violations)
}

/// [`path_dependencies`] over every member's manifest.
pub fn workspace_path_dependencies(metadata: &Metadata) -> anyhow::Result<Vec<Violation>> {
    let root = metadata.root();
    let mut violations = Vec::new();
    for member in metadata.members() {
        let relative = if member.dir.is_empty() {
            "Cargo.toml".to_string()
        } else {
            format!("{}/Cargo.toml", member.dir)
        };
        let path = root.join(&relative);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        violations.extend(path_dependencies(&relative, &text)?);
    }
    Ok(violations)
}

#[cfg(test)]
mod tests;
