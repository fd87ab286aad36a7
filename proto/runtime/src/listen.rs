//! Binding an [`Endpoint`] to a listening socket.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener, UnixStream};

use crate::endpoint::{Endpoint, unix_path_problem};

/// Why an endpoint could not be bound. Every variant names the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Name resolution of the TCP host failed or returned nothing.
    #[error("cannot resolve listen address {endpoint}: {source}")]
    Resolve {
        /// The endpoint being bound.
        endpoint: Endpoint,
        /// The resolver's error.
        source: io::Error,
    },
    /// The operating system refused to bind or listen.
    #[error("cannot listen on {endpoint}: {source}")]
    Listen {
        /// The endpoint being bound.
        endpoint: Endpoint,
        /// The bind/listen error.
        source: io::Error,
    },
    /// The Unix socket path is empty or longer than
    /// [`MAX_UNIX_SOCKET_PATH`](crate::MAX_UNIX_SOCKET_PATH) bytes.
    #[error("cannot listen on {endpoint}: {problem}")]
    InvalidSocketPath {
        /// The endpoint being bound.
        endpoint: Endpoint,
        /// What is wrong with the path.
        problem: String,
    },
    /// A live server already accepts connections on the socket path.
    #[error("cannot listen on {endpoint}: the socket is in use by a running server")]
    SocketInUse {
        /// The endpoint being bound.
        endpoint: Endpoint,
    },
    /// The socket path exists and is not a socket; it is left alone.
    #[error("cannot listen on {endpoint}: {path} exists and is not a socket")]
    NotASocket {
        /// The endpoint being bound.
        endpoint: Endpoint,
        /// The offending path.
        path: PathBuf,
    },
    /// A stale socket file could not be inspected or removed.
    #[error("cannot listen on {endpoint}: stale socket {path} could not be removed: {source}")]
    StaleSocket {
        /// The endpoint being bound.
        endpoint: Endpoint,
        /// The stale socket path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The listen endpoint was written `https://`, but no certificate was given.
    #[error("listen address {endpoint} asks for TLS but no certificate and key were configured")]
    TlsWithoutCertificate {
        /// The endpoint being bound.
        endpoint: Endpoint,
    },
}

/// A bound listening socket, TCP or Unix, that knows its actual address
/// (the port the OS picked for `:0`).
///
/// A Unix socket file created here is removed when the listener is dropped,
/// unless another process replaced it in the meantime.
#[derive(Debug)]
pub(crate) struct BoundListener {
    pub(crate) socket: BoundSocket,
    local: Endpoint,
}

#[derive(Debug)]
pub(crate) enum BoundSocket {
    Tcp(TcpListener),
    Unix(UnixListener, SocketFileGuard),
}

impl BoundListener {
    /// Bind `endpoint`. TCP hosts are resolved and the first address that
    /// binds wins. For a Unix socket, a stale socket file (nobody accepting)
    /// is removed first; a live one is an error, as is a path that is not a
    /// socket.
    ///
    /// # Errors
    /// See [`BindError`].
    pub(crate) async fn bind(endpoint: &Endpoint) -> Result<Self, BindError> {
        match endpoint {
            Endpoint::Tcp { host, port, .. } => {
                let addrs: Vec<_> = tokio::net::lookup_host((host.as_str(), *port))
                    .await
                    .map_err(|source| BindError::Resolve {
                        endpoint: endpoint.clone(),
                        source,
                    })?
                    .collect();
                let mut last_error =
                    io::Error::new(io::ErrorKind::NotFound, "host resolved to no addresses");
                for addr in addrs {
                    match TcpListener::bind(addr).await {
                        Ok(listener) => {
                            let local =
                                listener.local_addr().map_err(|source| BindError::Listen {
                                    endpoint: endpoint.clone(),
                                    source,
                                })?;
                            return Ok(BoundListener {
                                socket: BoundSocket::Tcp(listener),
                                local: Endpoint::tcp(local),
                            });
                        }
                        Err(error) => last_error = error,
                    }
                }
                Err(BindError::Listen {
                    endpoint: endpoint.clone(),
                    source: last_error,
                })
            }
            Endpoint::Unix { path } => {
                if let Some(problem) = unix_path_problem(path) {
                    return Err(BindError::InvalidSocketPath {
                        endpoint: endpoint.clone(),
                        problem,
                    });
                }
                remove_stale_socket(endpoint, path).await?;
                let listener = UnixListener::bind(path).map_err(|source| BindError::Listen {
                    endpoint: endpoint.clone(),
                    source,
                })?;
                let guard = SocketFileGuard::new(path.clone());
                Ok(BoundListener {
                    socket: BoundSocket::Unix(listener, guard),
                    local: endpoint.clone(),
                })
            }
        }
    }

    /// The bound address: for TCP the actual IP and port, for Unix the path.
    pub(crate) fn local_endpoint(&self) -> &Endpoint {
        &self.local
    }
}

async fn remove_stale_socket(endpoint: &Endpoint, path: &Path) -> Result<(), BindError> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BindError::StaleSocket {
                endpoint: endpoint.clone(),
                path: path.to_owned(),
                source,
            });
        }
    };
    if !metadata.file_type().is_socket() {
        return Err(BindError::NotASocket {
            endpoint: endpoint.clone(),
            path: path.to_owned(),
        });
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(BindError::SocketInUse {
            endpoint: endpoint.clone(),
        }),
        Err(error) if error.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "removing stale socket file");
            std::fs::remove_file(path).map_err(|source| BindError::StaleSocket {
                endpoint: endpoint.clone(),
                path: path.to_owned(),
                source,
            })
        }
        Err(source) => Err(BindError::StaleSocket {
            endpoint: endpoint.clone(),
            path: path.to_owned(),
            source,
        }),
    }
}

/// Removes the socket file it was created for when dropped, if the file is
/// still the same inode (another server may have replaced it).
#[derive(Debug)]
pub(crate) struct SocketFileGuard {
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl SocketFileGuard {
    fn new(path: PathBuf) -> Self {
        let identity = std::fs::symlink_metadata(&path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        SocketFileGuard { path, identity }
    }
}

impl Drop for SocketFileGuard {
    fn drop(&mut self) {
        let current = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if current.is_some()
            && current == self.identity
            && let Err(error) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove socket file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tcp_port_zero_reports_the_actual_port() {
        let bound = BoundListener::bind(&"127.0.0.1:0".parse().expect("endpoint"))
            .await
            .expect("bind");
        match bound.local_endpoint() {
            Endpoint::Tcp { host, port, .. } => {
                assert_eq!(host, "127.0.0.1");
                assert_ne!(*port, 0);
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[tokio::test]
    async fn empty_or_too_long_socket_paths_are_refused_by_name() {
        // An empty path would bind an abstract socket nobody can dial.
        let empty = Endpoint::unix("");
        let err = BoundListener::bind(&empty).await.expect_err("empty path");
        assert!(matches!(err, BindError::InvalidSocketPath { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "cannot listen on unix:: the socket path is empty"
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s".repeat(crate::MAX_UNIX_SOCKET_PATH));
        let long = Endpoint::unix(&path);
        let err = BoundListener::bind(&long).await.expect_err("long path");
        assert!(matches!(err, BindError::InvalidSocketPath { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("(sockaddr_un)"), "{message}");
    }

    #[tokio::test]
    async fn unix_socket_stale_live_and_not_a_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("d.sock");
        let endpoint = Endpoint::unix(&path);

        // a stale socket: bound by a std listener that is then dropped
        drop(std::os::unix::net::UnixListener::bind(&path).expect("std bind"));
        assert!(path.exists());
        let live = BoundListener::bind(&endpoint).await.expect("stale removed");

        // while `live` accepts, binding again fails and names the endpoint
        let err = BoundListener::bind(&endpoint).await.expect_err("in use");
        assert!(matches!(err, BindError::SocketInUse { .. }), "{err}");
        assert!(err.to_string().contains(&endpoint.to_string()));

        drop(live);
        assert!(!path.exists(), "socket file removed on drop");

        std::fs::write(&path, b"not a socket").expect("write");
        let err = BoundListener::bind(&endpoint)
            .await
            .expect_err("regular file");
        assert!(matches!(err, BindError::NotASocket { .. }), "{err}");
        assert!(path.exists(), "a regular file is never removed");
    }
}
