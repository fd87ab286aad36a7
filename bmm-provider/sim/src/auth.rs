//! HS256 bearer tokens: what `bmm-sim token` prints and what the simulator accepts.

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde::{Deserialize, Serialize};

/// The claims of a simulator token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Subject.
    pub sub: String,
    /// The org the token is for.
    pub org: String,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Issued at.
    pub iat: u64,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No `Authorization: Bearer …` header.
    #[error("missing bearer token")]
    Missing,
    /// Bad signature, malformed, wrong algorithm.
    #[error("invalid bearer token: {0}")]
    Invalid(String),
    /// Past its `exp`.
    #[error("expired bearer token")]
    Expired,
    /// Signed for another org.
    #[error("token is for org {token:?}, not {path:?}")]
    WrongOrg {
        /// The token's org.
        token: String,
        /// The org in the path.
        path: String,
    },
}

/// A fresh random secret (two v4 UUIDs from the OS's random source, 244 random bits), for a
/// simulator started without one.
pub fn random_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Decodes the percent-escapes of a path segment (`acm%65` → `acme`), as the router does
/// before handlers see it; `None` when an escape is malformed or the result is not UTF-8.
pub fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Signs a token for `org`, valid `ttl` from `now_secs`.
pub fn issue(secret: &str, org: &str, now_secs: u64, ttl: Duration) -> Result<String, TokenError> {
    let claims = Claims {
        sub: "bmm-sim-user".into(),
        org: org.into(),
        iat: now_secs,
        exp: now_secs + ttl.as_secs(),
    };
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .map_err(|e| TokenError::Invalid(e.to_string()))
}

/// Checks an `Authorization` header value for `org`.
pub fn check(secret: &str, header: Option<&str>, org: &str) -> Result<Claims, TokenError> {
    let token = header
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(TokenError::Missing)?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = 0;
    validation.set_required_spec_claims(&["exp"]);
    let data = decode::<Claims>(
        token,
        &DecodingKey::from_secret(secret.as_bytes()),
        &validation,
    )
    .map_err(|e| match e.kind() {
        jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
        _ => TokenError::Invalid(e.to_string()),
    })?;
    if data.claims.org != org {
        return Err(TokenError::WrongOrg {
            token: data.claims.org,
            path: org.into(),
        });
    }
    Ok(data.claims)
}
