//! The credentials every client presents: a CA to trust, a client certificate and key (mutual
//! TLS), a bearer token file. [`ClientArgs`] is flattened into a CLI the way [`crate::ServeArgs`]
//! is into a daemon, and [`ClientArgs::dial`] gives an [`AuthChannel`] that any generated client
//! takes (`FooClient::new(channel)`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::SystemTime;

use http::HeaderValue;
use tonic::transport::Channel;

use crate::dial::{DialError, DialOptions, dial_lazy, dial_with};
use crate::endpoint::Endpoint;
use crate::tls::{ClientTls, TlsError};

/// Client credential flags, each also an environment variable `NEPHRITE_*`.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ClientArgs {
    /// Trust this PEM CA for the server's certificate (dials with TLS).
    #[arg(id = "client_ca", long = "ca", env = "NEPHRITE_CA", value_name = "PEM")]
    pub ca: Option<PathBuf>,

    /// Present this PEM client certificate (mutual TLS; needs --key and --ca).
    #[arg(
        id = "client_cert",
        long = "cert",
        env = "NEPHRITE_CERT",
        value_name = "PEM",
        requires_all = ["client_key", "client_ca"]
    )]
    pub cert: Option<PathBuf>,

    /// PEM private key of --cert.
    #[arg(
        id = "client_key",
        long = "key",
        env = "NEPHRITE_KEY",
        value_name = "PEM",
        requires = "client_cert"
    )]
    pub key: Option<PathBuf>,

    /// Send the bearer token in this file (its first line), re-read when the file changes.
    #[arg(
        id = "client_token_file",
        long = "token-file",
        env = "NEPHRITE_TOKEN_FILE",
        value_name = "FILE"
    )]
    pub token_file: Option<PathBuf>,

    /// Verify the server's certificate against this name instead of the dialed host.
    #[arg(
        id = "client_tls_domain",
        long = "tls-domain",
        env = "NEPHRITE_TLS_DOMAIN",
        value_name = "NAME"
    )]
    pub tls_domain: Option<String>,
}

/// Why the client credentials could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A certificate, key or CA file is unreadable or invalid.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The token file is unreadable or empty.
    #[error("cannot use the token file {path}: {problem}")]
    Token {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// Dialing failed.
    #[error(transparent)]
    Dial(#[from] DialError),
}

impl ClientArgs {
    /// The TLS options the flags name (`None` without `--ca`).
    ///
    /// # Errors
    /// When a file cannot be read or is invalid.
    pub fn client_tls(&self) -> Result<Option<ClientTls>, TlsError> {
        let Some(ca) = &self.ca else {
            return Ok(None);
        };
        let mut tls = ClientTls::new().with_ca_file(ca)?;
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            tls = tls.with_identity_files(cert, key)?;
        }
        if let Some(domain) = &self.tls_domain {
            tls = tls.with_domain(domain.clone());
        }
        Ok(Some(tls))
    }

    /// `base` with the flags' TLS (when `--ca` is given), and the token to send.
    fn options(
        &self,
        base: &DialOptions,
    ) -> Result<(DialOptions, Option<BearerToken>), ClientError> {
        let mut options = base.clone();
        if let Some(tls) = self.client_tls()? {
            options.tls = Some(tls);
        }
        let token = self
            .token_file
            .as_deref()
            .map(BearerToken::load)
            .transpose()?;
        Ok((options, token))
    }

    /// Connects to `endpoint` now with these credentials.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn dial(&self, endpoint: &Endpoint) -> Result<AuthChannel, ClientError> {
        self.dial_with(endpoint, &DialOptions::default()).await
    }

    /// [`ClientArgs::dial`] with other time limits: `options`, whose TLS the flags' replaces
    /// when `--ca` is given.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn dial_with(
        &self,
        endpoint: &Endpoint,
        options: &DialOptions,
    ) -> Result<AuthChannel, ClientError> {
        let (options, token) = self.options(options)?;
        let channel = dial_with(endpoint, &options).await?;
        Ok(AuthChannel { channel, token })
    }

    /// A channel with these credentials that connects on first use.
    ///
    /// # Errors
    /// See [`ClientError`] (configuration only).
    pub fn dial_lazy(&self, endpoint: &Endpoint) -> Result<AuthChannel, ClientError> {
        let (options, token) = self.options(&DialOptions::default())?;
        let channel = dial_lazy(endpoint, &options)?;
        Ok(AuthChannel { channel, token })
    }
}

/// A token read from a file, re-read when the file's modification time changes.
#[derive(Clone)]
struct BearerToken {
    path: PathBuf,
    current: Arc<Mutex<(Option<SystemTime>, HeaderValue)>>,
}

impl BearerToken {
    fn load(path: &Path) -> Result<Self, ClientError> {
        let (modified, value) = read_token(path)?;
        Ok(BearerToken {
            path: path.to_owned(),
            current: Arc::new(Mutex::new((modified, value))),
        })
    }

    fn header(&self) -> HeaderValue {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        if modified.is_some() && modified != current.0 {
            match read_token(&self.path) {
                Ok(fresh) => *current = fresh,
                Err(error) => {
                    tracing::warn!(%error, "keeping the previous token");
                    current.0 = modified;
                }
            }
        }
        current.1.clone()
    }
}

fn read_token(path: &Path) -> Result<(Option<SystemTime>, HeaderValue), ClientError> {
    let problem = |problem: String| ClientError::Token {
        path: path.to_owned(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| problem(e.to_string()))?;
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(problem("it holds no token".to_owned()));
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| problem("the token holds characters a header cannot".to_owned()))?;
    value.set_sensitive(true);
    Ok((modified, value))
}

/// A [`Channel`] that sends the bearer token (if any) with every request. Generated clients
/// take it like a channel: `FooClient::new(auth_channel)`.
#[derive(Clone)]
pub struct AuthChannel {
    channel: Channel,
    token: Option<BearerToken>,
}

impl std::fmt::Debug for AuthChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthChannel")
            .field("token", &self.token.as_ref().map(|t| &t.path))
            .finish_non_exhaustive()
    }
}

impl AuthChannel {
    /// A channel without a token (e.g. from [`crate::dial`]).
    pub fn new(channel: Channel) -> Self {
        AuthChannel {
            channel,
            token: None,
        }
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for AuthChannel {
    type Response = http::Response<tonic::body::Body>;
    type Error = tonic::transport::Error;
    type Future = <Channel as tower::Service<http::Request<tonic::body::Body>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower::Service::poll_ready(&mut self.channel, cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        if let Some(token) = &self.token {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, token.header());
        }
        tower::Service::call(&mut self.channel, request)
    }
}
