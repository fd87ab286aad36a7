//! The clusterctl provider artefacts users install with `clusterctl init --infrastructure`:
//! `metadata.yaml` (release series → contract `v1beta2`), `infrastructure-components.yaml`
//! (namespace, the CRDs with the contract label, least-privilege RBAC, the credentials Secret
//! and the controller Deployment, with `${VARIABLE}` placeholders for what differs per
//! install) and the `cluster-template.yaml` flavor, side by side as clusterctl looks for them
//! in a provider repository's version folder. The hand-written manifests live in `deploy/`;
//! the CRDs come from `nephrite-bmm`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The namespace the components install into.
pub const NAMESPACE: &str = "capbmm-system";

const RBAC: &str = include_str!("../deploy/rbac.yaml");
const MANAGER: &str = include_str!("../deploy/manager.yaml");
const CLUSTER_TEMPLATE: &str = include_str!("../deploy/templates/cluster-template.yaml");

/// Why the artefacts could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ClusterctlError {
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A CRD could not be rendered.
    #[error("rendering CRD: {0}")]
    Render(#[from] serde_norway::Error),
}

/// The files, by path relative to the output directory.
pub fn artefacts(version: &str) -> Result<Vec<(&'static str, String)>, ClusterctlError> {
    Ok(vec![
        ("metadata.yaml", metadata(version)),
        ("infrastructure-components.yaml", components()?),
        ("cluster-template.yaml", CLUSTER_TEMPLATE.to_string()),
    ])
}

/// `metadata.yaml`: every release series of this provider speaks contract `v1beta2`.
pub fn metadata(version: &str) -> String {
    let (major, minor) = series(version);
    format!(
        "# The Cluster API contract of each release series of the NVIDIA BMM provider.\n\
         apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\n\
         kind: Metadata\n\
         releaseSeries:\n  \
           - major: {major}\n    minor: {minor}\n    contract: v1beta2\n"
    )
}

/// `major.minor` of `v1.2.3` / `1.2.3` (`0.1` when it does not parse).
fn series(version: &str) -> (u64, u64) {
    let mut parts = version.trim_start_matches('v').split('.');
    match (
        parts.next().and_then(|p| p.parse().ok()),
        parts.next().and_then(|p| p.parse().ok()),
    ) {
        (Some(major), Some(minor)) => (major, minor),
        _ => (0, 1),
    }
}

/// `infrastructure-components.yaml`.
pub fn components() -> Result<String, ClusterctlError> {
    let mut out = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n  labels:\n    \
         cluster.x-k8s.io/provider: infrastructure-nvidia-bmm\n"
    );
    for crd in nephrite_bmm::crd::all_crds() {
        out.push_str("---\n");
        out.push_str(&serde_norway::to_string(&crd)?);
    }
    for part in [RBAC, MANAGER] {
        out.push_str("---\n");
        out.push_str(part.trim_start_matches("---\n"));
    }
    Ok(out)
}

/// Writes the artefacts under `dir`; returns the paths written.
pub fn write(dir: &Path, version: &str) -> Result<Vec<PathBuf>, ClusterctlError> {
    let mut written = Vec::new();
    for (name, text) in artefacts(version)? {
        let path = dir.join(name);
        let io = |source| ClusterctlError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&path, text).map_err(io)?;
        written.push(path);
    }
    Ok(written)
}

/// The `${NAME}` / `${NAME:=default}` variables of a text, by name.
pub fn variables(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find('}') else { break };
        let name = rest[..end].split(":=").next().unwrap_or_default();
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            names.insert(name.to_string());
        }
        rest = &rest[end + 1..];
    }
    names
}

/// Replaces the variables as clusterctl does: a value from `lookup`, else the `:=` default;
/// `Err` names a variable with neither.
pub fn substitute(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":=") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match lookup(name).or_else(|| default.map(str::to_string)) {
            Some(value) => out.push_str(&value),
            None => return Err(format!("variable {name} has no value and no default")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
