//! The server's token file: which bearer token proves which identity, re-read when it changes.
//!
//! One token per line, `TOKEN,IDENTITY` (Kubernetes' static token file shape; further
//! comma-separated fields are ignored), blank lines and `#` comments skipped. Tokens are
//! compared in constant time and never logged.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use std::os::unix::fs::MetadataExt as _;

/// Why the token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A line is not `TOKEN,IDENTITY`.
    #[error("token file {path} line {line}: expected TOKEN,IDENTITY with neither empty")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
    },
}

/// What identifies one version of the file.
type Version = (SystemTime, u64, u64);

/// Each token with the identity it proves.
type Entries = Vec<(Vec<u8>, String)>;

struct Loaded {
    version: Option<Version>,
    entries: Entries,
}

/// The token file, loaded, and re-read whenever its modification time, size or inode changes
/// (so an operator rotates tokens by replacing the file). A file that becomes unreadable or
/// invalid keeps the last good tokens, with a warning.
#[derive(Clone)]
pub struct TokenFile {
    path: PathBuf,
    loaded: Arc<RwLock<Loaded>>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenFile {
    /// Loads the file at `path`.
    ///
    /// # Errors
    /// When it cannot be read or a line is not `TOKEN,IDENTITY`.
    pub fn load(path: &Path) -> Result<Self, TokenError> {
        let (version, entries) = read(path)?;
        Ok(TokenFile {
            path: path.to_owned(),
            loaded: Arc::new(RwLock::new(Loaded {
                version: Some(version),
                entries,
            })),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The identity `token` proves, after re-reading the file if it changed. Every entry is
    /// compared, in constant time for each.
    pub fn identity_of(&self, token: &[u8]) -> Option<String> {
        self.refresh();
        let loaded = self.loaded.read().unwrap_or_else(|e| e.into_inner());
        let mut found = None;
        for (candidate, identity) in &loaded.entries {
            if constant_time_eq(candidate, token) && found.is_none() {
                found = Some(identity.clone());
            }
        }
        found
    }

    fn refresh(&self) {
        let current = std::fs::metadata(&self.path).ok().map(|m| version_of(&m));
        let known = self
            .loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .version;
        if current.is_none() || current == known {
            return;
        }
        let mut loaded = self.loaded.write().unwrap_or_else(|e| e.into_inner());
        match read(&self.path) {
            Ok((version, entries)) => {
                tracing::info!(path = %self.path.display(), tokens = entries.len(), "token file re-read");
                *loaded = Loaded {
                    version: Some(version),
                    entries,
                };
            }
            Err(error) => {
                tracing::warn!(%error, "keeping the previous tokens");
                loaded.version = current;
            }
        }
    }
}

fn version_of(metadata: &std::fs::Metadata) -> Version {
    (
        metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        metadata.len(),
        metadata.ino(),
    )
}

fn read(path: &Path) -> Result<(Version, Entries), TokenError> {
    let read_error = |source| TokenError::Read {
        path: path.to_owned(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split(',').map(str::trim);
        match (fields.next(), fields.next()) {
            (Some(token), Some(identity)) if !token.is_empty() && !identity.is_empty() => {
                entries.push((token.as_bytes().to_vec(), identity.to_owned()));
            }
            _ => {
                return Err(TokenError::Invalid {
                    path: path.to_owned(),
                    line: index + 1,
                });
            }
        }
    }
    Ok((version_of(&metadata), entries))
}

/// Equal contents, in time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_identities_and_bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(
            &path,
            "# ops\ns3cret,ops,1000,\"admins\"\n\nr-token, router-a\n",
        )
        .unwrap();
        let file = TokenFile::load(&path).unwrap();
        assert_eq!(file.identity_of(b"s3cret").as_deref(), Some("ops"));
        assert_eq!(file.identity_of(b"r-token").as_deref(), Some("router-a"));
        assert_eq!(file.identity_of(b"s3cre"), None);
        assert_eq!(file.identity_of(b""), None);

        std::fs::write(&path, "ok,a\njust-a-token\n").unwrap();
        let err = TokenFile::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "token file {} line 2: expected TOKEN,IDENTITY with neither empty",
                path.display()
            )
        );
        assert!(!format!("{err:?}").contains("just-a-token"));
    }

    #[test]
    fn equality_is_exact() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
