//! Where a daemon listens and where a client dials: `tcp://host:port`,
//! `host:port`, `https://host:port`, `unix:///abs/path`, `unix:rel/path`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The longest Unix socket path the operating system accepts, in bytes: the size of
/// `sockaddr_un.sun_path` (108 on Linux, 104 on the BSDs and macOS) less its terminating NUL.
pub const MAX_UNIX_SOCKET_PATH: usize = if cfg!(any(target_os = "linux", target_os = "android")) {
    107
} else {
    103
};

/// What is wrong with a Unix socket path, if anything: empty (Linux would silently bind an
/// unreachable abstract socket) or too long for `sockaddr_un`.
pub(crate) fn unix_path_problem(path: &Path) -> Option<String> {
    let len = path.as_os_str().len();
    if len == 0 {
        Some("the socket path is empty".to_owned())
    } else if len > MAX_UNIX_SOCKET_PATH {
        Some(format!(
            "the socket path is {len} bytes, longer than the {MAX_UNIX_SOCKET_PATH} a Unix socket \
             address (sockaddr_un) can hold"
        ))
    } else {
        None
    }
}

/// A gRPC endpoint: a TCP host and port or a Unix domain socket path.
///
/// Accepted spellings (see [`Endpoint::from_str`]):
///
/// | text | meaning |
/// |---|---|
/// | `127.0.0.1:50051`, `[::1]:50051`, `localhost:50051` | TCP, plaintext |
/// | `tcp://HOST:PORT`, `http://HOST:PORT` | TCP, plaintext |
/// | `https://HOST:PORT` | TCP, TLS when dialing |
/// | `unix:///run/nephrite.sock`, `unix:/run/nephrite.sock`, `/run/nephrite.sock` | Unix socket, absolute path |
/// | `unix:relative.sock` | Unix socket, path relative to the working directory |
///
/// Port `0` is allowed for listening: the operating system picks a free
/// port and the bound listener reports it. A Unix socket path may have at most
/// [`MAX_UNIX_SOCKET_PATH`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A TCP endpoint.
    Tcp {
        /// An IP literal (without brackets) or a DNS name.
        host: String,
        /// The TCP port; `0` means "any free port" when listening.
        port: u16,
        /// Whether the endpoint was written as `https://`: dial with TLS.
        tls: bool,
    },
    /// A Unix domain socket.
    Unix {
        /// The socket file.
        path: PathBuf,
    },
}

/// Why a string is not an [`Endpoint`]. Every variant names the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The string is empty or only whitespace.
    #[error("empty endpoint: expected HOST:PORT, tcp://HOST:PORT or unix:///PATH")]
    Empty,
    /// The scheme is not one of `tcp`, `http`, `https`, `unix`.
    #[error("endpoint {input:?}: unknown scheme {scheme:?} (expected tcp, http, https or unix)")]
    UnknownScheme {
        /// The whole input.
        input: String,
        /// The scheme found before `://`.
        scheme: String,
    },
    /// A TCP endpoint without a `:PORT`.
    #[error("endpoint {input:?}: missing port (expected HOST:PORT)")]
    MissingPort {
        /// The whole input.
        input: String,
    },
    /// The port is not a number in 0..=65535.
    #[error("endpoint {input:?}: invalid port {port:?}")]
    InvalidPort {
        /// The whole input.
        input: String,
        /// The text after the last `:`.
        port: String,
    },
    /// A TCP endpoint without a host.
    #[error("endpoint {input:?}: missing host (expected HOST:PORT)")]
    MissingHost {
        /// The whole input.
        input: String,
    },
    /// A TCP endpoint with a path, query or other trailing text.
    #[error("endpoint {input:?}: unexpected path or characters after HOST:PORT")]
    TrailingPath {
        /// The whole input.
        input: String,
    },
    /// A `unix:` endpoint without a path.
    #[error("endpoint {input:?}: missing socket path (expected unix:///PATH)")]
    MissingPath {
        /// The whole input.
        input: String,
    },
    /// A Unix socket path longer than [`MAX_UNIX_SOCKET_PATH`] bytes.
    #[error("endpoint {input:?}: {problem}")]
    InvalidSocketPath {
        /// The whole input.
        input: String,
        /// What is wrong with the path.
        problem: String,
    },
    /// `unix://` followed by something that is not an absolute path, e.g.
    /// `unix://run/x.sock` (which would silently drop the leading `/`).
    #[error(
        "endpoint {input:?}: unix:// must be followed by an absolute path (unix:///run/x.sock) \
         or use unix:relative/path"
    )]
    UnixNotAbsolute {
        /// The whole input.
        input: String,
    },
}

impl Endpoint {
    /// A plaintext TCP endpoint for a socket address.
    pub fn tcp(addr: SocketAddr) -> Self {
        Endpoint::Tcp {
            host: addr.ip().to_string(),
            port: addr.port(),
            tls: false,
        }
    }

    /// A Unix socket endpoint.
    pub fn unix(path: impl Into<PathBuf>) -> Self {
        Endpoint::Unix { path: path.into() }
    }

    /// The same endpoint, marked to be dialed with TLS (`https://`); a Unix
    /// endpoint is returned unchanged.
    #[must_use]
    pub fn with_tls(self) -> Self {
        match self {
            Endpoint::Tcp { host, port, .. } => Endpoint::Tcp {
                host,
                port,
                tls: true,
            },
            unix @ Endpoint::Unix { .. } => unix,
        }
    }

    /// The socket path of a Unix endpoint.
    pub fn unix_path(&self) -> Option<&Path> {
        match self {
            Endpoint::Unix { path } => Some(path),
            Endpoint::Tcp { .. } => None,
        }
    }

    /// Whether dialing this endpoint uses TLS because it was written `https://`.
    pub fn is_tls(&self) -> bool {
        matches!(self, Endpoint::Tcp { tls: true, .. })
    }

    /// `host:port` with IPv6 literals bracketed; `None` for Unix sockets.
    pub fn authority(&self) -> Option<String> {
        match self {
            Endpoint::Tcp { host, port, .. } if host.contains(':') => {
                Some(format!("[{host}]:{port}"))
            }
            Endpoint::Tcp { host, port, .. } => Some(format!("{host}:{port}")),
            Endpoint::Unix { .. } => None,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp { tls, .. } => {
                let scheme = if *tls { "https" } else { "tcp" };
                let authority = self.authority().unwrap_or_default();
                write!(f, "{scheme}://{authority}")
            }
            Endpoint::Unix { path } if path.is_absolute() => write!(f, "unix://{}", path.display()),
            Endpoint::Unix { path } => write!(f, "unix:{}", path.display()),
        }
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let text = input.trim();
        if text.is_empty() {
            return Err(EndpointError::Empty);
        }
        if let Some(rest) = text.strip_prefix("unix:") {
            return parse_unix(input, rest);
        }
        if text.starts_with('/') {
            return unix_endpoint(input, text);
        }
        let (authority, tls) = match text.split_once("://") {
            Some(("tcp" | "http", rest)) => (rest, false),
            Some(("https", rest)) => (rest, true),
            Some((scheme, _)) => {
                return Err(EndpointError::UnknownScheme {
                    input: input.to_owned(),
                    scheme: scheme.to_owned(),
                });
            }
            None => (text, false),
        };
        // A single trailing slash (`http://host:1/`) is harmless; anything else is a path.
        let authority = authority.strip_suffix('/').unwrap_or(authority);
        if authority.contains(['/', '?', '#', '@']) {
            return Err(EndpointError::TrailingPath {
                input: input.to_owned(),
            });
        }
        let (host, port) = split_host_port(input, authority)?;
        Ok(Endpoint::Tcp { host, port, tls })
    }
}

fn parse_unix(input: &str, rest: &str) -> Result<Endpoint, EndpointError> {
    let path = match rest.strip_prefix("//") {
        Some("") => "",
        Some(after) if after.starts_with('/') => after,
        Some(_) => {
            return Err(EndpointError::UnixNotAbsolute {
                input: input.to_owned(),
            });
        }
        None => rest,
    };
    if path.is_empty() {
        return Err(EndpointError::MissingPath {
            input: input.to_owned(),
        });
    }
    unix_endpoint(input, path)
}

fn unix_endpoint(input: &str, path: &str) -> Result<Endpoint, EndpointError> {
    match unix_path_problem(Path::new(path)) {
        Some(problem) => Err(EndpointError::InvalidSocketPath {
            input: input.to_owned(),
            problem,
        }),
        None => Ok(Endpoint::unix(path)),
    }
}

fn split_host_port(input: &str, authority: &str) -> Result<(String, u16), EndpointError> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        // [v6]:port
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| EndpointError::MissingPort {
                input: input.to_owned(),
            })?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| EndpointError::MissingPort {
                input: input.to_owned(),
            })?;
        (host, port)
    } else {
        let (host, port) =
            authority
                .rsplit_once(':')
                .ok_or_else(|| EndpointError::MissingPort {
                    input: input.to_owned(),
                })?;
        if host.contains(':') {
            // an unbracketed IPv6 literal is ambiguous
            return Err(EndpointError::MissingPort {
                input: input.to_owned(),
            });
        }
        (host, port)
    };
    if host.is_empty() {
        return Err(EndpointError::MissingHost {
            input: input.to_owned(),
        });
    }
    // Digits only: `u16::from_str` would also take `+80`.
    let port = port
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| port.parse::<u16>().ok())
        .flatten()
        .ok_or_else(|| EndpointError::InvalidPort {
            input: input.to_owned(),
            port: port.to_owned(),
        })?;
    Ok((host.to_owned(), port))
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
