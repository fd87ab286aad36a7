//! Where the router's objects come from. Today: a directory of YAML files (`dir:PATH`), read
//! whole on every change; the Kubernetes and rules-service sources of the controller issue plug
//! in behind the same [`Snapshot`] channel.
//!
//! Each `*.yaml` / `*.yml` file in the directory (not its subdirectories) holds one or more
//! `---`-separated documents. A document that does not parse is reported with its file and line
//! and left out; the other documents of the file still apply.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nephrite_krm::{DocumentError, Package, PackageError};
use nephrite_l7::{Options, SourceObject};
use tokio::sync::watch;

#[cfg(test)]
mod tests;

/// A `--source` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// `dir:PATH`.
    Dir(PathBuf),
    /// `kube`: the Kubernetes API server found as kube-rs does (`KUBECONFIG`, then in-cluster).
    Kube,
}

/// Why a source could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The `--source` value is not understood.
    #[error("unknown source {0:?}: expected dir:PATH or kube")]
    UnknownSpec(String),
    /// The directory could not be listed.
    #[error("cannot read directory {path}: {source}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl std::str::FromStr for SourceSpec {
    type Err = SourceError;
    fn from_str(s: &str) -> Result<Self, SourceError> {
        if s == "kube" {
            return Ok(SourceSpec::Kube);
        }
        match s.strip_prefix("dir:") {
            Some(path) if !path.is_empty() => Ok(SourceSpec::Dir(PathBuf::from(path))),
            _ => Err(SourceError::UnknownSpec(s.to_owned())),
        }
    }
}

/// One translation of a source, compiled, with what went wrong while reading it: the value the
/// rules API carries, defined once in the client crate.
pub use kuryr_l7_client::Snapshot;

/// Splits `text` into documents at `---` lines: (1-based start line, text).
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut documents = vec![(1usize, String::new())];
    for (index, line) in text.lines().enumerate() {
        let is_separator = line == "---"
            || line.starts_with("--- ")
            || line.starts_with("---\t")
            || line.trim_end() == "---";
        if is_separator && !line.starts_with(' ') {
            documents.push((index + 1, String::new()));
        }
        if let Some((_, document)) = documents.last_mut() {
            document.push_str(line);
            document.push('\n');
        }
    }
    documents
}

/// Reads one file's documents, reporting bad ones as `file: line N: reason`.
pub fn read_file(
    path: &Path,
    text: &str,
    objects: &mut Vec<SourceObject>,
    errors: &mut Vec<String>,
) {
    let origin = path.display().to_string();
    for (start, document) in split_documents(text) {
        match Package::from_yaml(&document) {
            Ok(package) => {
                objects.extend(
                    package
                        .into_objects()
                        .into_iter()
                        .map(|object| SourceObject {
                            object,
                            origin: origin.clone(),
                        }),
                )
            }
            Err(err @ PackageError::Document { .. }) => {
                let PackageError::Document { line, source, .. } = &err;
                let line = match source {
                    DocumentError::Yaml { line, .. } => *line,
                    DocumentError::Object(_) => *line,
                } + start
                    - 1;
                errors.push(format!("{origin}: line {line}: {source}"));
            }
        }
    }
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let entries = std::fs::read_dir(dir).map_err(|source| SourceError::ReadDir {
        path: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && matches!(
                    path.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml")
                )
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads every YAML file of `dir`: the objects, and the errors by file and line.
pub fn load_dir(dir: &Path) -> Result<(Vec<SourceObject>, Vec<String>), SourceError> {
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    for file in yaml_files(dir)? {
        match std::fs::read(&file) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => read_file(&file, &text, &mut objects, &mut errors),
                Err(_) => errors.push(format!("{}: not UTF-8 text", file.display())),
            },
            Err(err) => errors.push(format!("{}: {err}", file.display())),
        }
    }
    Ok((objects, errors))
}

/// Loads `dir` and builds a snapshot.
pub fn snapshot_dir(dir: &Path, options: &Options) -> Result<Snapshot, SourceError> {
    let (objects, errors) = load_dir(dir)?;
    Ok(Snapshot::build(&objects, errors, options))
}

/// Names, sizes and modification times of a directory's YAML files.
type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// What the directory looks like, cheaply: names, sizes and modification times.
fn fingerprint(dir: &Path) -> Fingerprint {
    yaml_files(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).ok();
            let len = meta.as_ref().map_or(0, |m| m.len());
            let modified = meta.and_then(|m| m.modified().ok());
            (path, len, modified)
        })
        .collect()
}

/// [`fingerprint`] on the blocking pool, so that a large directory never holds up the
/// runtime thread that serves requests; `None` if the blocking task failed.
async fn fingerprint_off_thread(dir: &Path) -> Option<Fingerprint> {
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || fingerprint(&dir))
        .await
        .ok()
}

/// How often the directory is looked at; a change is applied once it has held still for one
/// more look (so a file caught mid-write is read again when the writer is done): within about
/// `2 × POLL`.
pub const POLL: Duration = Duration::from_millis(300);

/// Watches `dir` and sends a new snapshot after every change (file created, changed, renamed
/// or removed), debounced. Runs until the receivers are gone.
pub async fn watch_dir(dir: PathBuf, options: Options, sender: watch::Sender<Arc<Snapshot>>) {
    let mut applied = fingerprint_off_thread(&dir).await.unwrap_or_default();
    let mut pending: Option<Fingerprint> = None;
    loop {
        tokio::time::sleep(POLL).await;
        if sender.is_closed() {
            return;
        }
        let Some(now) = fingerprint_off_thread(&dir).await else {
            continue;
        };
        if now == applied {
            pending = None;
            continue;
        }
        if pending.as_ref() != Some(&now) {
            pending = Some(now);
            continue;
        }
        let dir2 = dir.clone();
        let options2 = options.clone();
        let built = tokio::task::spawn_blocking(move || snapshot_dir(&dir2, &options2)).await;
        match built {
            Ok(Ok(snapshot)) => {
                // A file that changed while it was read is read again on the next look.
                applied = now;
                pending = None;
                snapshot.log();
                tracing::info!(
                    http = snapshot.table.http.len(),
                    https = snapshot.table.https.len(),
                    "reloaded {}",
                    dir.display()
                );
                if sender.send(Arc::new(snapshot)).is_err() {
                    return;
                }
            }
            Ok(Err(err)) => tracing::warn!("{err}; keeping the current rules"),
            Err(err) => tracing::warn!("reload failed: {err}; keeping the current rules"),
        }
    }
}
