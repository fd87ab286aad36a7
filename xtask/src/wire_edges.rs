//! The wire-edge check: inside a daemon, protobuf types stay at the edges.
//!
//! A daemon converts between its wire form (`nephrite_proto`'s generated types) and its domain
//! values in a few named modules: the gRPC services it serves and the clients it dials. The
//! rest of the daemon passes domain values, so a change of wire format touches those modules
//! only. This check reads each listed crate's sources and names every file outside its edge
//! modules that mentions `nephrite_proto`. Every crate in a daemon's folder but its client crate
//! is checked (the list comes from `cargo metadata`, so a new daemon crate is covered the day it
//! is added); a crate [`EDGES`] does not name has no edge module at all. Client crates
//! (`<daemon>/client`) are the wire's other home and are not read. Tests (`tests/`, `benches/`)
//! are not read either: they may drive the wire directly.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The crate whose generated types are the wire.
const WIRE_CRATE: &str = "nephrite_proto";

/// A daemon crate and the source files (relative to the crate's folder) allowed to use the wire.
/// A path ending in `/` allows every file under that folder.
pub struct Edges {
    /// The crate's folder, relative to the workspace root.
    pub crate_dir: &'static str,
    /// The edge modules.
    pub allowed: &'static [&'static str],
}

/// The daemon crates with edge modules, and those modules; a daemon crate not listed (e.g.
/// `bmm-provider`, `nimbess-agent/cni`, `bmm-provider/sim`) may not use the wire at all.
pub const EDGES: &[Edges] = &[
    Edges {
        crate_dir: "preparer",
        // the Data API it serves, and its calls to the plugins it runs (preparers,
        // validators, schedulers)
        allowed: &[
            "src/api/grpc.rs",
            "src/preparation/plugin.rs",
            "src/preparation/validation.rs",
            "src/preparation/scheduling.rs",
        ],
    },
    Edges {
        crate_dir: "topology",
        // the preparer's plugin API, which ntc serves
        allowed: &["src/tko/plugin.rs"],
    },
    Edges {
        crate_dir: "nimbess-agent",
        // the agent's gRPC services; the etcd v3 client of the fabric
        allowed: &["src/grpc/", "src/fabric/etcd.rs"],
    },
    Edges {
        crate_dir: "kuryr-l7",
        // the rules service and its role checks (which strip private keys from its snapshots);
        // its callers, the routers and the `rules` CLI, go through kuryr-l7/client
        allowed: &[
            "src/rules_service.rs",
            "src/rules_service/",
            "src/rules_auth.rs",
        ],
    },
];

/// A file outside a crate's edge modules that mentions the wire crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The offending file, relative to the workspace root.
    pub file: PathBuf,
    /// The first line (1-based) that mentions the wire crate.
    pub line: usize,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: uses {WIRE_CRATE} outside the crate's wire-edge modules",
            self.file.display(),
            self.line
        )
    }
}

/// Every file of the crates in `crate_dirs` (relative to `root`) that names the wire outside the
/// edge modules `edges` lists for it, in path order. An entry of `edges` for a folder that is not
/// in `crate_dirs` is an error: the list has gone stale.
pub fn check(root: &Path, crate_dirs: &[&str], edges: &[Edges]) -> anyhow::Result<Vec<Violation>> {
    if let Some(stale) = edges.iter().find(|e| !crate_dirs.contains(&e.crate_dir)) {
        anyhow::bail!(
            "the wire-edge list names {}, which is not a daemon crate's folder (one of {})",
            stale.crate_dir,
            crate_dirs.join(", ")
        );
    }
    let mut violations = Vec::new();
    for crate_dir in crate_dirs {
        let allowed = edges
            .iter()
            .find(|e| e.crate_dir == *crate_dir)
            .map_or(&[][..], |e| e.allowed);
        let src = root.join(crate_dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files)?;
        files.sort();
        for file in files {
            let relative = file
                .strip_prefix(root.join(crate_dir))
                .unwrap_or(&file)
                .to_string_lossy()
                .replace('\\', "/");
            if is_allowed(&relative, allowed) {
                continue;
            }
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            if let Some(line) = first_wire_use(&text) {
                violations.push(Violation {
                    file: file.strip_prefix(root).unwrap_or(&file).to_path_buf(),
                    line,
                });
            }
        }
    }
    Ok(violations)
}

fn is_allowed(relative: &str, allowed: &[&str]) -> bool {
    allowed.iter().any(|a| {
        if a.ends_with('/') {
            relative.starts_with(a)
        } else {
            relative == *a
        }
    })
}

/// The first line that names the wire crate in code (line comments and doc comments skipped).
fn first_wire_use(text: &str) -> Option<usize> {
    text.lines().enumerate().find_map(|(i, line)| {
        let code = line.split("//").next().unwrap_or("");
        code.contains(WIRE_CRATE).then_some(i + 1)
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("reading directory {}", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading directory {}", dir.display()))?
            .path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/wire-edges")
    }

    const DAEMON: &[Edges] = &[Edges {
        crate_dir: "daemon",
        allowed: &["src/service.rs", "src/client/"],
    }];

    #[test]
    fn wire_types_inside_the_daemon_are_named_with_their_line() {
        let violations = check(&fixture_root(), &["daemon"], DAEMON).unwrap();
        assert_eq!(
            violations,
            vec![Violation {
                file: PathBuf::from("daemon/src/agent.rs"),
                line: 4,
            }]
        );
        assert_eq!(
            violations[0].to_string(),
            "daemon/src/agent.rs:4: uses nephrite_proto outside the crate's wire-edge modules"
        );
    }

    #[test]
    fn every_file_allowed_passes() {
        let all = &[Edges {
            crate_dir: "daemon",
            allowed: &["src/"],
        }];
        assert!(check(&fixture_root(), &["daemon"], all).unwrap().is_empty());
    }

    #[test]
    fn a_crate_without_edges_may_not_name_the_wire_anywhere() {
        let violations = check(&fixture_root(), &["daemon"], &[]).unwrap();
        let files: Vec<_> = violations.iter().map(|v| v.file.clone()).collect();
        assert_eq!(
            files,
            vec![
                PathBuf::from("daemon/src/agent.rs"),
                PathBuf::from("daemon/src/client/dial.rs"),
                PathBuf::from("daemon/src/service.rs"),
            ]
        );
    }

    #[test]
    fn a_missing_crate_folder_is_an_error() {
        let err = check(&fixture_root(), &["no-such-crate"], &[]).unwrap_err();
        assert!(format!("{err:#}").contains("no-such-crate"), "{err:#}");
    }

    #[test]
    fn an_edge_entry_for_a_crate_that_is_not_checked_is_an_error() {
        let stale = &[Edges {
            crate_dir: "gone",
            allowed: &["src/"],
        }];
        let err = check(&fixture_root(), &["daemon"], stale).unwrap_err();
        assert!(format!("{err:#}").contains("names gone"), "{err:#}");
    }

    #[test]
    fn this_workspace_passes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let out = crate::cargo_metadata(&["--no-deps"]).expect("cargo metadata runs");
        let metadata: crate::boundaries::Metadata = serde_json::from_slice(&out).unwrap();
        let daemons = metadata.members();
        let dirs: Vec<&str> = daemons
            .iter()
            .filter(|m| m.role == crate::boundaries::Role::Daemon)
            .map(|m| m.dir.as_str())
            .collect();
        assert!(dirs.len() >= 5, "{dirs:?}");
        let violations = check(root, &dirs, EDGES).unwrap();
        assert!(violations.is_empty(), "{violations:?}");
    }
}
