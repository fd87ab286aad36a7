//! What the daemons read from the machine they run on: its host name (default names and
//! identities) and PEM files named by flags.

use std::path::{Path, PathBuf};

/// A PEM file named by a flag could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {path}: {source}")]
pub struct PemError {
    /// The file.
    pub path: PathBuf,
    /// The OS error.
    pub source: std::io::Error,
}

/// The host name (`router` when it cannot be read).
pub fn hostname() -> String {
    nephrite_runtime::host::hostname().unwrap_or_else(|| "router".to_owned())
}

fn read(path: &Path) -> Result<String, PemError> {
    std::fs::read_to_string(path).map_err(|source| PemError {
        path: path.to_owned(),
        source,
    })
}

/// The PEM texts of a certificate and its key (`--default-cert`, `--default-key`); `None`
/// unless both are given.
pub fn read_certificate(
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<(String, String)>, PemError> {
    Ok(match (cert, key) {
        (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
        _ => None,
    })
}
