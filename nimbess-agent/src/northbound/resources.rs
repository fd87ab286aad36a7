//! `--resources dir:PATH`: the northbound's objects as Kubernetes YAML
//! files, for tests and hosts without Kubernetes. Every `*.yaml` (and
//! `*.yml`) file directly under the directory, several documents per file
//! allowed, kinds Service, EndpointSlice, NetworkPolicy, Namespace and Pod
//! (others ignored). The directory is looked at every second and read again
//! when a file changed, appeared or went away. A document that does not
//! parse is logged (file, document index, why) and skipped.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Deserialize as _;
use tokio::sync::watch;

use super::Objects;

/// How often the directory is looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// Read every object under `dir`; the warnings name what was skipped.
///
/// # Errors
/// The directory cannot be listed.
pub fn load_dir(dir: &Path) -> std::io::Result<(Objects, Vec<String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut objects = Objects::default();
    let mut warnings = Vec::new();
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => parse_into(
                &text,
                &file.display().to_string(),
                &mut objects,
                &mut warnings,
            ),
            Err(e) => warnings.push(format!("{}: {e}", file.display())),
        }
    }
    Ok((objects, warnings))
}

/// Parse the documents of `text` (named `origin` in warnings) into `objects`.
pub fn parse_into(text: &str, origin: &str, objects: &mut Objects, warnings: &mut Vec<String>) {
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = match serde_json::Value::deserialize(doc) {
            Ok(serde_json::Value::Null) => continue,
            Ok(v) => v,
            Err(e) => {
                warnings.push(format!("{origin}: document {i}: {e}"));
                // a syntax error ends the stream: nothing after it is read
                break;
            }
        };
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let parsed = match kind.as_str() {
            "Service" => serde_json::from_value(value).map(|o| objects.services.push(o)),
            "EndpointSlice" => serde_json::from_value(value).map(|o| objects.slices.push(o)),
            "NetworkPolicy" => serde_json::from_value(value).map(|o| objects.policies.push(o)),
            "Namespace" => serde_json::from_value(value).map(|o| objects.namespaces.push(o)),
            "Pod" => serde_json::from_value(value).map(|o| objects.pods.push(o)),
            "AdminNetworkPolicy" => {
                serde_json::from_value(value).map(|o| objects.admin_policies.push(o))
            }
            "BaselineAdminNetworkPolicy" => {
                serde_json::from_value(value).map(|o| objects.baseline_policies.push(o))
            }
            _ => Ok(()),
        };
        if let Err(e) = parsed {
            warnings.push(format!("{origin}: document {i} ({kind} {name}): {e}"));
        }
    }
}

/// What the directory looks like: names, sizes, modification times.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.path(), m.len(), m.modified().ok()))
        })
        .collect();
    out.sort();
    out
}

/// Watch `dir`, sending a snapshot at start and after every change, until
/// the receiver is gone.
pub async fn watch_dir(dir: PathBuf, tx: watch::Sender<Option<Objects>>) {
    let mut seen = None;
    loop {
        let now = fingerprint(&dir);
        if seen.as_ref() != Some(&now) {
            let loaded = {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || load_dir(&dir)).await
            };
            match loaded {
                Ok(Ok((objects, warnings))) => {
                    for w in warnings {
                        tracing::warn!("{w}; skipped, everything else applied");
                    }
                    if tx.send(Some(objects)).is_err() {
                        return;
                    }
                }
                Ok(Err(e)) => {
                    tracing::error!(dir = %dir.display(), error = %e, "resources not read")
                }
                Err(e) => tracing::error!(error = %e, "reading the resources failed"),
            }
            seen = Some(now);
        }
        tokio::time::sleep(POLL).await;
    }
}
