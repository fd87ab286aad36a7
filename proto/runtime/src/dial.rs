//! Dialing an [`Endpoint`] to get a tonic [`Channel`].

use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint as TonicEndpoint, Uri};

use crate::endpoint::{Endpoint, unix_path_problem};
use crate::tls::{ClientTls, ensure_crypto_provider};

/// How to dial: TLS and time limits.
#[derive(Debug, Clone)]
pub struct DialOptions {
    /// TLS settings. Used when set, and required (for its CA) when the
    /// endpoint is written `https://`.
    pub tls: Option<ClientTls>,
    /// Limit on establishing the connection. Default 5 s.
    pub connect_timeout: Duration,
    /// Limit on each request, `None` for no limit (the default; streaming
    /// calls such as health Watch would be cut off otherwise).
    pub request_timeout: Option<Duration>,
}

impl Default for DialOptions {
    fn default() -> Self {
        DialOptions {
            tls: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: None,
        }
    }
}

impl DialOptions {
    /// Default options with TLS.
    pub fn with_tls(tls: ClientTls) -> Self {
        DialOptions {
            tls: Some(tls),
            ..Self::default()
        }
    }
}

/// Why dialing failed. Every variant names the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The endpoint could not be expressed as a URI for tonic.
    #[error("cannot dial {endpoint}: invalid address: {source}")]
    InvalidUri {
        /// The endpoint.
        endpoint: Endpoint,
        /// tonic's error.
        source: tonic::transport::Error,
    },
    /// The TLS configuration was rejected.
    #[error("cannot dial {endpoint}: TLS configuration: {source}")]
    Tls {
        /// The endpoint.
        endpoint: Endpoint,
        /// tonic's error.
        source: tonic::transport::Error,
    },
    /// The Unix socket path is empty or longer than
    /// [`MAX_UNIX_SOCKET_PATH`](crate::MAX_UNIX_SOCKET_PATH) bytes.
    #[error("cannot dial {endpoint}: {problem}")]
    InvalidSocketPath {
        /// The endpoint.
        endpoint: Endpoint,
        /// What is wrong with the path.
        problem: String,
    },
    /// The endpoint is `https://` but no [`ClientTls`] (with a CA) was given.
    #[error("cannot dial {endpoint}: https:// needs TLS options with a CA certificate")]
    TlsWithoutOptions {
        /// The endpoint.
        endpoint: Endpoint,
    },
    /// The connection could not be established.
    #[error("cannot connect to {endpoint}: {detail}")]
    Connect {
        /// The endpoint.
        endpoint: Endpoint,
        /// The innermost cause, e.g. "Connection refused (os error 111)".
        detail: String,
        /// tonic's error. Not the error's `source()`: the message already ends with its
        /// innermost cause, and a chain printer would say it twice
        /// ("…: Connection refused (os error 111): transport error: tcp connect error: …").
        transport: tonic::transport::Error,
    },
}

/// Connect to a plaintext endpoint now, with default [`DialOptions`].
///
/// # Errors
/// See [`DialError`].
pub async fn dial(endpoint: &Endpoint) -> Result<Channel, DialError> {
    dial_with(endpoint, &DialOptions::default()).await
}

/// Connect to `endpoint` now; the returned channel reconnects on its own
/// afterwards.
///
/// # Errors
/// See [`DialError`].
pub async fn dial_with(endpoint: &Endpoint, options: &DialOptions) -> Result<Channel, DialError> {
    let tonic_endpoint = tonic_endpoint(endpoint, options)?;
    let connected = match endpoint {
        Endpoint::Tcp { .. } => tonic_endpoint.connect().await,
        Endpoint::Unix { path } => {
            let path = path.clone();
            tonic_endpoint
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(stream))
                    }
                }))
                .await
        }
    };
    connected.map_err(|transport| DialError::Connect {
        endpoint: endpoint.clone(),
        detail: innermost_cause(&transport),
        transport,
    })
}

/// A channel that connects on first use (and reconnects as needed); only
/// configuration errors are reported here.
///
/// # Errors
/// [`DialError::InvalidUri`], [`DialError::InvalidSocketPath`], [`DialError::Tls`],
/// [`DialError::TlsWithoutOptions`].
pub fn dial_lazy(endpoint: &Endpoint, options: &DialOptions) -> Result<Channel, DialError> {
    let tonic_endpoint = tonic_endpoint(endpoint, options)?;
    Ok(match endpoint {
        Endpoint::Tcp { .. } => tonic_endpoint.connect_lazy(),
        Endpoint::Unix { path } => {
            let path = path.clone();
            tonic_endpoint.connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
        }
    })
}

/// The message of the deepest error in `error`'s source chain: tonic's own
/// message ("transport error") says nothing about what went wrong.
fn innermost_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

fn tonic_endpoint(endpoint: &Endpoint, options: &DialOptions) -> Result<TonicEndpoint, DialError> {
    if let Some(problem) = endpoint.unix_path().and_then(unix_path_problem) {
        return Err(DialError::InvalidSocketPath {
            endpoint: endpoint.clone(),
            problem,
        });
    }
    let use_tls = options.tls.is_some() || endpoint.is_tls();
    let (uri, host) = match endpoint {
        Endpoint::Tcp { host, .. } => {
            let scheme = if use_tls { "https" } else { "http" };
            let authority = endpoint.authority().unwrap_or_default();
            (format!("{scheme}://{authority}"), Some(host.as_str()))
        }
        // The authority is only used for the :authority header (and as the
        // TLS name when none is configured); the connector ignores it.
        Endpoint::Unix { .. } if use_tls => ("https://localhost".to_owned(), None),
        Endpoint::Unix { .. } => ("http://localhost".to_owned(), None),
    };
    let mut tonic_endpoint =
        TonicEndpoint::from_shared(uri).map_err(|source| DialError::InvalidUri {
            endpoint: endpoint.clone(),
            source,
        })?;
    tonic_endpoint = tonic_endpoint.connect_timeout(options.connect_timeout);
    if let Some(timeout) = options.request_timeout {
        tonic_endpoint = tonic_endpoint.timeout(timeout);
    }
    if use_tls {
        let tls = options
            .tls
            .as_ref()
            .ok_or_else(|| DialError::TlsWithoutOptions {
                endpoint: endpoint.clone(),
            })?;
        ensure_crypto_provider();
        tonic_endpoint = tonic_endpoint
            .tls_config(tls.to_tonic(host))
            .map_err(|source| DialError::Tls {
                endpoint: endpoint.clone(),
                source,
            })?;
    }
    Ok(tonic_endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_socket_is_named_with_the_os_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let endpoint = Endpoint::unix(dir.path().join("absent.sock"));
        let err = dial(&endpoint).await.expect_err("nothing listens");
        assert!(matches!(err, DialError::Connect { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("cannot connect to {endpoint}: No such file or directory (os error 2)")
        );
        assert_eq!(
            crate::report::error_chain(&err),
            err.to_string(),
            "the cause is said once"
        );
    }

    #[tokio::test]
    async fn empty_or_too_long_socket_paths_are_refused_before_dialing() {
        let long = Endpoint::unix(format!("/{}", "x".repeat(crate::MAX_UNIX_SOCKET_PATH)));
        for endpoint in [Endpoint::unix(""), long] {
            let err = dial(&endpoint).await.expect_err("bad path");
            assert!(matches!(err, DialError::InvalidSocketPath { .. }), "{err}");
            assert!(
                err.to_string()
                    .starts_with(&format!("cannot dial {endpoint}: the socket path is")),
                "{err}"
            );
            let lazy = dial_lazy(&endpoint, &DialOptions::default()).expect_err("bad path");
            assert!(
                matches!(lazy, DialError::InvalidSocketPath { .. }),
                "{lazy}"
            );
        }
    }
}
