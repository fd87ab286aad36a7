//! The provider ID: `nvidia-bmm://<site-id>/<instance-id>`.
//!
//! The reference provider wrote three different formats over its life; nodes registered by any
//! of them must still be recognised. [`ProviderId`] always writes the canonical form and reads:
//!
//! | accepted input                              | why                                   |
//! |---------------------------------------------|---------------------------------------|
//! | `nvidia-bmm://SITE/INSTANCE`                | canonical                             |
//! | `nvidia-bmm:///SITE/INSTANCE`               | empty authority (cloud-provider style) |
//! | `nvidia-bmm://SITE/INSTANCE/`               | trailing slash                        |
//! | `NVIDIA-BMM://…`                            | scheme case-insensitive               |
//! | `nvidiabmm://…`, `nvidia-carbide://…`       | earlier scheme names                  |
//!
//! Anything else — no scheme, one segment only, more than two segments, empty ids, whitespace
//! in an id — is refused with the input in the error.

use std::fmt;
use std::str::FromStr;

/// The scheme the provider writes.
pub const SCHEME: &str = "nvidia-bmm";
const LEGACY_SCHEMES: &[&str] = &["nvidiabmm", "nvidia-carbide"];

/// A provider ID that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderIdError {
    /// The input has no `scheme://`, or a scheme that is not BMM's.
    #[error("provider ID {0:?} is not a nvidia-bmm:// ID")]
    Scheme(String),
    /// The path is not `<site-id>/<instance-id>`.
    #[error("provider ID {0:?} is not nvidia-bmm://<site-id>/<instance-id>")]
    Shape(String),
}

/// A parsed provider ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProviderId {
    /// The BMM site the instance is in.
    pub site_id: String,
    /// The BMM instance.
    pub instance_id: String,
}

impl ProviderId {
    /// A provider ID for an instance at a site.
    pub fn new(site_id: impl Into<String>, instance_id: impl Into<String>) -> Self {
        ProviderId {
            site_id: site_id.into(),
            instance_id: instance_id.into(),
        }
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}://{}/{}", self.site_id, self.instance_id)
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && !id
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c == '?' || c == '#')
}

impl FromStr for ProviderId {
    type Err = ProviderIdError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let trimmed = input.trim();
        let (scheme, rest) = trimmed
            .split_once("://")
            .ok_or_else(|| ProviderIdError::Scheme(input.to_string()))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != SCHEME && !LEGACY_SCHEMES.contains(&scheme.as_str()) {
            return Err(ProviderIdError::Scheme(input.to_string()));
        }
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let mut parts = rest.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(site), Some(instance), None) if valid_id(site) && valid_id(instance) => {
                Ok(ProviderId::new(site, instance))
            }
            _ => Err(ProviderIdError::Shape(input.to_string())),
        }
    }
}

#[cfg(test)]
mod tests;
