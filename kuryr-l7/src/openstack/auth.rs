//! Who the controller is to OpenStack: Keystone v3 credentials, the token they buy, and the
//! service catalog that comes with it.
//!
//! Three ways, named as keystoneauth names them (`auth_type`): `password` (a user in a domain,
//! scoped to a project by id or by name and domain), `v3applicationcredential` (an application
//! credential's id and secret, scoped by Keystone itself), and `noauth` (no Keystone: the
//! project id travels as `X-Project-Id`, as Octavia and Neutron accept with
//! `auth_strategy = noauth`). This module builds the token request and reads the answer; the
//! [`Session`](super::Session) sends it and keeps the token.

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;
use serde_json::{Value, json};

/// How long before its expiry a token is replaced, so no call starts with a token about to
/// lapse mid-flight.
pub const RENEW_BEFORE_EXPIRY: SignedDuration = SignedDuration::from_secs(120);

/// The credentials the controller presents.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// No Keystone: every request carries `X-Project-Id` (and create bodies `project_id`).
    NoAuth {
        /// The project the controller's objects belong to.
        project_id: String,
    },
    /// Keystone v3 password authentication, scoped to a project.
    Password {
        /// Keystone's URL (`http://keystone:5000/v3`, or without `/v3`).
        auth_url: String,
        /// The user's name.
        username: String,
        /// The user's password.
        password: String,
        /// The user's domain (`user_domain_name`, e.g. `Default`).
        user_domain_name: String,
        /// The project to scope the token to.
        project: ProjectScope,
    },
    /// Keystone v3 application credential (its project scope is the credential's own).
    ApplicationCredential {
        /// Keystone's URL.
        auth_url: String,
        /// The credential's id.
        id: String,
        /// The credential's secret.
        secret: String,
    },
}

impl std::fmt::Debug for Credentials {
    // Passwords and secrets stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::NoAuth { project_id } => f
                .debug_struct("NoAuth")
                .field("project_id", project_id)
                .finish(),
            Credentials::Password {
                auth_url,
                username,
                user_domain_name,
                project,
                ..
            } => f
                .debug_struct("Password")
                .field("auth_url", auth_url)
                .field("username", username)
                .field("password", &"<hidden>")
                .field("user_domain_name", user_domain_name)
                .field("project", project)
                .finish(),
            Credentials::ApplicationCredential { auth_url, id, .. } => f
                .debug_struct("ApplicationCredential")
                .field("auth_url", auth_url)
                .field("id", id)
                .field("secret", &"<hidden>")
                .finish(),
        }
    }
}

/// The project a password token is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectScope {
    /// By id (`project_id`).
    Id(String),
    /// By name within a domain (`project_name`, `project_domain_name`).
    Name {
        /// The project's name.
        name: String,
        /// Its domain's name.
        domain_name: String,
    },
}

impl Credentials {
    /// Keystone's token URL for these credentials; None for `noauth`.
    pub fn token_url(&self) -> Option<String> {
        match self {
            Credentials::NoAuth { .. } => None,
            Credentials::Password { auth_url, .. }
            | Credentials::ApplicationCredential { auth_url, .. } => Some(token_url(auth_url)),
        }
    }

    /// The body of `POST /v3/auth/tokens`; None for `noauth`.
    pub fn token_request(&self) -> Option<Value> {
        match self {
            Credentials::NoAuth { .. } => None,
            Credentials::Password {
                username,
                password,
                user_domain_name,
                project,
                ..
            } => {
                let project = match project {
                    ProjectScope::Id(id) => json!({"id": id}),
                    ProjectScope::Name { name, domain_name } => {
                        json!({"name": name, "domain": {"name": domain_name}})
                    }
                };
                Some(json!({"auth": {
                    "identity": {
                        "methods": ["password"],
                        "password": {"user": {
                            "name": username,
                            "domain": {"name": user_domain_name},
                            "password": password,
                        }},
                    },
                    "scope": {"project": project},
                }}))
            }
            Credentials::ApplicationCredential { id, secret, .. } => Some(json!({"auth": {
                "identity": {
                    "methods": ["application_credential"],
                    "application_credential": {"id": id, "secret": secret},
                },
            }})),
        }
    }
}

/// `<auth_url>/v3/auth/tokens`, whether or not `auth_url` already ends in `/v3`.
pub(crate) fn token_url(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

/// An issued token: its value (the `X-Subject-Token` header), expiry, project and catalog.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// What goes in `X-Auth-Token`.
    pub value: String,
    /// When Keystone stops accepting it.
    pub expires_at: Timestamp,
    /// The project it is scoped to.
    pub project_id: String,
    /// The service catalog.
    pub catalog: Vec<CatalogService>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<hidden>")
            .field("expires_at", &self.expires_at)
            .field("project_id", &self.project_id)
            .field("catalog", &self.catalog)
            .finish()
    }
}

impl Token {
    /// Whether the token should be replaced before a call made at `now`.
    pub fn needs_renewal(&self, now: Timestamp) -> bool {
        now >= self.expires_at - RENEW_BEFORE_EXPIRY
    }

    /// The URL of the `interface` endpoint of `service_type` (in `region` when given).
    pub fn endpoint(
        &self,
        service_type: &str,
        interface: &str,
        region: Option<&str>,
    ) -> Option<String> {
        self.catalog
            .iter()
            .filter(|service| service.service_type == service_type)
            .flat_map(|service| &service.endpoints)
            .find(|e| {
                e.interface == interface
                    && region.is_none_or(|r| {
                        e.region_id.as_deref() == Some(r) || e.region.as_deref() == Some(r)
                    })
            })
            .map(|e| e.url.trim_end_matches('/').to_owned())
    }
}

/// One service of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CatalogService {
    /// `load-balancer`, `network`, `identity`, …
    #[serde(rename = "type")]
    pub service_type: String,
    /// Its endpoints.
    #[serde(default)]
    pub endpoints: Vec<CatalogEndpoint>,
}

/// One endpoint of a catalog service.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CatalogEndpoint {
    /// `public`, `internal` or `admin`.
    pub interface: String,
    /// The region's id (Keystone v3; `region` is its deprecated twin).
    #[serde(default)]
    pub region_id: Option<String>,
    /// The region, as older Keystones name it.
    #[serde(default)]
    pub region: Option<String>,
    /// The URL.
    pub url: String,
}

/// The body of a token answer.
#[derive(Deserialize)]
struct TokenAnswer {
    token: TokenBody,
}

#[derive(Deserialize)]
struct TokenBody {
    expires_at: String,
    project: Option<ProjectRef>,
    #[serde(default)]
    catalog: Vec<CatalogService>,
}

#[derive(Deserialize)]
struct ProjectRef {
    id: String,
}

/// The token in Keystone's answer: `value` from the `X-Subject-Token` header, the rest from the
/// body. Err says what is missing.
pub(crate) fn parse_token(value: String, body: &str) -> Result<Token, String> {
    let answer: TokenAnswer =
        serde_json::from_str(body).map_err(|e| format!("not a token answer: {e}"))?;
    let expires_at: Timestamp = answer
        .token
        .expires_at
        .parse()
        .map_err(|e| format!("expires_at {:?}: {e}", answer.token.expires_at))?;
    let project_id = answer
        .token
        .project
        .map(|p| p.id)
        .ok_or("the token is not scoped to a project")?;
    Ok(Token {
        value,
        expires_at,
        project_id,
        catalog: answer.token.catalog,
    })
}

#[cfg(test)]
mod tests;
