//! The BMM REST client: `/v2/org/{org}/carbide/…` over reqwest (rustls, aws-lc-rs).
//!
//! What it adds to plain HTTP calls:
//! - the status codes the API really uses (201 on create, 202 or 204 on delete, 404 on delete
//!   counts as done) and the error classification of [`ApiError`];
//! - retries of transient failures with jittered exponential backoff capped at 60 s;
//! - paging through `pageNumber`/`pageSize` with the `X-Pagination` header;
//! - finding by exact name (the API filters by name only for instances; for the rest the client
//!   narrows with `query` and matches the name itself);
//! - creates that never duplicate: after any failed create the object is looked up by exact
//!   name (or by the id a 409 carries) and adopted before a retry;
//! - a bearer token that is never logged ([`Token`]'s `Debug` hides it, the header is marked
//!   sensitive).

mod error;
mod power;
mod resources;
mod retry;
pub mod types;

use std::fmt;
use std::time::Duration;

pub use error::ApiError;
pub use retry::RetryPolicy;

/// A bearer token; its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token (surrounding whitespace is removed, as token files end in a newline).
    pub fn new(token: impl AsRef<str>) -> Token {
        Token(token.as_ref().trim().to_string())
    }

    /// The token itself, for the Authorization header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// How to reach the API.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server root, `http://host:port` or `https://…` (the client appends the base path).
    pub endpoint: String,
    /// The org.
    pub org: String,
    /// The bearer token.
    pub token: Token,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retry policy for transient failures.
    pub retry: RetryPolicy,
    /// PEM CA certificate(s) to trust instead of the system roots (a private endpoint, or
    /// `bmm-sim --tls-cert`).
    pub ca_pem: Option<Vec<u8>>,
}

impl ClientConfig {
    /// A configuration with a 30 s timeout and the default retry policy.
    pub fn new(endpoint: impl Into<String>, org: impl Into<String>, token: Token) -> ClientConfig {
        ClientConfig {
            endpoint: endpoint.into(),
            org: org.into(),
            token,
            timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            ca_pem: None,
        }
    }
}

/// The client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct BmmClient {
    http: reqwest::Client,
    base: String,
    token: Token,
    retry: RetryPolicy,
    metrics: Option<crate::metrics::ProviderMetrics>,
}

impl BmmClient {
    /// Builds a client; refuses an endpoint that is not `http(s)://…` or an empty org.
    pub fn new(config: ClientConfig) -> Result<BmmClient, ApiError> {
        let endpoint = config.endpoint.trim_end_matches('/');
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(ApiError::Config(format!(
                "endpoint {endpoint:?} is not http(s)://host[:port]"
            )));
        }
        let org = config.org.trim();
        if org.is_empty() || org.contains('/') {
            return Err(ApiError::Config(format!(
                "org {org:?} is empty or contains '/'"
            )));
        }
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)));
        if let Some(pem) = &config.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ApiError::Config(format!("CA certificate: {e}")))?;
            if certs.is_empty() {
                return Err(ApiError::Config(
                    "CA certificate: no CERTIFICATE in the PEM".into(),
                ));
            }
            builder = builder.tls_certs_only(certs);
        }
        let http = builder
            .build()
            .map_err(|e| ApiError::Config(format!("building the HTTP client: {e}")))?;
        Ok(BmmClient {
            http,
            base: format!("{endpoint}/v2/org/{org}/carbide"),
            token: config.token,
            retry: config.retry,
            metrics: None,
        })
    }

    /// Counts every call this client makes in `metrics` (`bmm_provider_api_calls_total`).
    pub fn with_metrics(mut self, metrics: crate::metrics::ProviderMetrics) -> BmmClient {
        self.metrics = Some(metrics);
        self
    }

    /// The token it sends (unit tests only).
    #[cfg(test)]
    pub(crate) fn token_for_tests(&self) -> &str {
        self.token.expose()
    }

    /// The base URL, `<endpoint>/v2/org/<org>/carbide`.
    pub fn base_url(&self) -> &str {
        &self.base
    }
}

#[cfg(test)]
mod tests;
