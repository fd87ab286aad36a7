//! Reading `ntc plan`'s input files: the NFTopology, the NFClasses and the clusters.
//!
//! Topology and classes are multi-document YAML (`---`-separated objects, read with
//! `nephrite-krm`'s reader, which names the document and line of a malformed one). Clusters come
//! either as a YAML list of `{name, labels}` or as `WorkloadCluster` objects
//! (`infra.nephio.org/v1alpha1`), whose `metadata.name` and `metadata.labels` are used. Every
//! error names the file.

use std::path::{Path, PathBuf};

use nephrite_krm::{Object, Package};
use nephrite_topology::api::{Cluster, NF_CLASS_KIND, NF_TOPOLOGY_KIND, NFClass, NFTopology};

/// Kind of the Nephio workload-cluster objects.
pub const WORKLOAD_CLUSTER_KIND: &str = "WorkloadCluster";

/// A bad input file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid YAML or not KRM objects.
    #[error("{path}: {source}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The reader's error, with document and line.
        source: nephrite_krm::PackageError,
    },
    /// A cluster list that could not be read.
    #[error("{path}: {message}")]
    ClusterList {
        /// The file.
        path: PathBuf,
        /// The YAML reader's message, with line and column.
        message: String,
    },
    /// An object that is not what its kind says.
    #[error("{path}: document {index} (starting at line {line}, {kind} {name:?}): {message}")]
    Object {
        /// The file.
        path: PathBuf,
        /// 0-based document index.
        index: usize,
        /// 1-based line where the document's content starts.
        line: usize,
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A file with the wrong number of objects of a kind.
    #[error("{path}: {message}")]
    Content {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn read(path: &Path) -> Result<String, InputError> {
    std::fs::read_to_string(path).map_err(|source| InputError::Read {
        path: path.to_owned(),
        source,
    })
}

fn package(path: &Path, text: &str) -> Result<Package, InputError> {
    Package::from_yaml(text).map_err(|source| InputError::Yaml {
        path: path.to_owned(),
        source,
    })
}

/// The 1-based line where each non-empty document of a YAML stream starts (its first line
/// that is neither blank nor a comment), in the order [`Package::from_yaml`] numbers them.
fn document_lines(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut current: Option<usize> = None;
    for (number, line) in text.lines().enumerate() {
        if line.starts_with("---") {
            starts.extend(current.take());
            continue;
        }
        let content = line.trim_start();
        if current.is_none() && !content.is_empty() && !content.starts_with('#') {
            current = Some(number + 1);
        }
    }
    starts.extend(current);
    starts
}

fn typed<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    index: usize,
    object: &Object,
) -> Result<T, InputError> {
    serde_json::from_value(object.to_json()).map_err(|e| InputError::Object {
        path: path.to_owned(),
        index,
        line: document_lines(text).get(index).copied().unwrap_or(1),
        kind: object.kind.clone(),
        name: object.name().unwrap_or("").to_owned(),
        message: e.to_string(),
    })
}

/// Reads the one `NFTopology` of `path` (other kinds in the file are ignored).
pub fn read_topology(path: &Path) -> Result<NFTopology, InputError> {
    let text = read(path)?;
    let package = package(path, &text)?;
    let mut found = Vec::new();
    for (index, object) in package.iter().enumerate() {
        if object.kind == NF_TOPOLOGY_KIND {
            found.push(typed::<NFTopology>(path, &text, index, object)?);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(InputError::Content {
            path: path.to_owned(),
            message: "no NFTopology object found".into(),
        }),
        n => Err(InputError::Content {
            path: path.to_owned(),
            message: format!("{n} NFTopology objects found, expected one"),
        }),
    }
}

/// Reads every `NFClass` of `path`.
pub fn read_classes(path: &Path) -> Result<Vec<NFClass>, InputError> {
    let text = read(path)?;
    let package = package(path, &text)?;
    package
        .iter()
        .enumerate()
        .filter(|(_, o)| o.kind == NF_CLASS_KIND)
        .map(|(index, object)| typed(path, &text, index, object))
        .collect()
}

/// Reads clusters: a YAML list of `{name, labels}`, or `WorkloadCluster` objects.
pub fn read_clusters(path: &Path) -> Result<Vec<Cluster>, InputError> {
    let text = read(path)?;
    if is_list(&text) {
        return serde_norway::from_str::<Vec<Cluster>>(&text).map_err(|e| {
            InputError::ClusterList {
                path: path.to_owned(),
                message: e.to_string(),
            }
        });
    }
    let package = package(path, &text)?;
    Ok(package
        .iter()
        .filter(|o| o.kind == WORKLOAD_CLUSTER_KIND)
        .filter_map(cluster_of)
        .collect())
}

/// The cluster a `WorkloadCluster` object stands for (`None` without a name).
pub fn cluster_of(object: &Object) -> Option<Cluster> {
    Some(Cluster {
        name: object.name()?.to_owned(),
        labels: object.labels().clone(),
    })
}

/// Whether the first content line of a YAML text starts a sequence.
fn is_list(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty() && !l.starts_with('#') && *l != "---")
        .is_some_and(|l| l.starts_with("- ") || l == "-" || l.starts_with('['))
}

#[cfg(test)]
mod tests;
