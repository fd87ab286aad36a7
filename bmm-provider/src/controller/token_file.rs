//! The node controller's credentials when they come from the environment (`--endpoint`,
//! `--org`, `--token-file`) instead of a Secret: the token file is re-read whenever it
//! changes (modification time, size or inode), so a token rotated by replacing the file — a
//! projected or mounted Secret, a renewal job — is used from the next reconcile on, with a
//! new client (a fresh connection pool) only then. A file that becomes unreadable or empty
//! keeps the last good token, with a warning naming the file.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::client::{ApiError, BmmClient, ClientConfig, Token};
use crate::metrics::ProviderMetrics;

/// What identifies one version of the file.
type Version = (Option<SystemTime>, u64, u64);

/// The BMM client of the node controller: fixed, or built from a token file it follows.
/// Cheap to clone; clones share the current client.
#[derive(Clone)]
pub struct NodeCredentials {
    source: Source,
}

#[derive(Clone)]
enum Source {
    Fixed(BmmClient),
    File(Arc<TokenFile>),
}

struct TokenFile {
    path: PathBuf,
    /// The endpoint, org, timeouts and CA; its token is replaced by the file's.
    config: ClientConfig,
    metrics: Option<ProviderMetrics>,
    current: Mutex<(Version, BmmClient)>,
}

impl std::fmt::Debug for NodeCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Source::Fixed(client) => f.debug_tuple("Fixed").field(client).finish(),
            Source::File(file) => f
                .debug_struct("TokenFile")
                .field("path", &file.path)
                .field("endpoint", &file.config.endpoint)
                .finish_non_exhaustive(),
        }
    }
}

/// Why the token file gives no client.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file cannot be read or holds no token.
    #[error("token file {path}: {problem}")]
    Unusable {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The endpoint or org are not usable.
    #[error(transparent)]
    Config(#[from] ApiError),
}

fn version(path: &Path) -> Version {
    match std::fs::metadata(path) {
        Ok(m) => (m.modified().ok(), m.len(), m.ino()),
        Err(_) => (None, 0, 0),
    }
}

fn read_token(path: &Path) -> Result<Token, TokenFileError> {
    let unusable = |problem: String| TokenFileError::Unusable {
        path: path.to_owned(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| unusable(e.to_string()))?;
    let token = Token::new(text.lines().next().unwrap_or_default());
    if token.expose().is_empty() {
        return Err(unusable("it holds no token".into()));
    }
    Ok(token)
}

impl NodeCredentials {
    /// Always this client (its token never changes).
    pub fn fixed(client: BmmClient) -> NodeCredentials {
        NodeCredentials {
            source: Source::Fixed(client),
        }
    }

    /// A client with `config`'s endpoint, org and settings and the token of `path` (its first
    /// line), rebuilt whenever the file changes; every call counted in `metrics`.
    ///
    /// # Errors
    /// When the file cannot be read now, holds no token, or the endpoint or org are unusable.
    pub fn token_file(
        config: ClientConfig,
        path: impl Into<PathBuf>,
        metrics: Option<ProviderMetrics>,
    ) -> Result<NodeCredentials, TokenFileError> {
        let path = path.into();
        let seen = version(&path);
        let client = build(&config, read_token(&path)?, metrics.as_ref())?;
        Ok(NodeCredentials {
            source: Source::File(Arc::new(TokenFile {
                path,
                config,
                metrics,
                current: Mutex::new((seen, client)),
            })),
        })
    }

    /// What the credentials are, for messages (never the token): the token file's path.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Fixed(client) => format!("the client of {}", client.base_url()),
            Source::File(file) => format!("the token file {}", file.path.display()),
        }
    }

    /// The client to call BMM with now: after the token file changed, one with its new token.
    pub fn client(&self) -> BmmClient {
        match &self.source {
            Source::Fixed(client) => client.clone(),
            Source::File(file) => file.client(),
        }
    }
}

fn build(
    config: &ClientConfig,
    token: Token,
    metrics: Option<&ProviderMetrics>,
) -> Result<BmmClient, ApiError> {
    let client = BmmClient::new(ClientConfig {
        token,
        ..config.clone()
    })?;
    Ok(match metrics {
        Some(m) => client.with_metrics(m.clone()),
        None => client,
    })
}

impl TokenFile {
    fn client(&self) -> BmmClient {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let now = version(&self.path);
        if now != current.0 {
            // Remember the version either way: a broken file warns once, not per reconcile.
            current.0 = now;
            match read_token(&self.path)
                .and_then(|t| Ok(build(&self.config, t, self.metrics.as_ref())?))
            {
                Ok(client) => {
                    tracing::info!(path = %self.path.display(), "token file changed: using its token");
                    current.1 = client;
                }
                Err(error) => {
                    tracing::warn!(%error, "keeping the previous token");
                }
            }
        }
        current.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ClientConfig {
        ClientConfig::new("http://127.0.0.1:1", "acme", Token::new("unused"))
    }

    #[test]
    fn a_replaced_file_gives_a_client_with_its_token_and_a_broken_one_keeps_the_last() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").expect("write");
        let credentials = NodeCredentials::token_file(config(), &path, None).expect("open");
        assert_eq!(credentials.client().token_for_tests(), "first");
        // Replaced as a Secret volume does: a new file renamed over the old one.
        let next = dir.path().join("token.new");
        std::fs::write(&next, "second\n").expect("write");
        std::fs::rename(&next, &path).expect("rename");
        assert_eq!(credentials.client().token_for_tests(), "second");
        std::fs::write(&path, "\n\n").expect("write");
        assert_eq!(credentials.client().token_for_tests(), "second");
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(credentials.client().token_for_tests(), "second");
    }

    #[test]
    fn an_empty_or_missing_file_is_refused_at_start_naming_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        let err = NodeCredentials::token_file(config(), &path, None).unwrap_err();
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
        std::fs::write(&path, " \n").expect("write");
        let err = NodeCredentials::token_file(config(), &path, None).unwrap_err();
        assert!(err.to_string().contains("holds no token"), "{err}");
    }
}
