//! One authenticated HTTP session shared by the Octavia and Neutron clients.
//!
//! It holds the credentials and the current token: a token is issued on first use, replaced
//! shortly before it expires, and re-issued once when a service answers 401 (revoked, or
//! Keystone's keys rotated) before the call is sent again. With `noauth` it sends the project
//! id as `X-Project-Id` instead. It also finds each service's URL: the configured
//! `endpoint_override`, else the token's catalog.

use std::time::Duration;

use jiff::Timestamp;
use reqwest::Method;
use serde_json::Value;
use tokio::sync::Mutex;

use super::auth::{Credentials, Token, parse_token};
use super::error::{ApiError, server_message};

/// Where a service is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A fixed URL (`endpoint_override`), e.g. `http://127.0.0.1:9876`.
    Url(String),
    /// The token's catalog entry.
    Catalog {
        /// The service type (`load-balancer`, `network`).
        service_type: String,
        /// `public`, `internal` or `admin` (keystoneauth's `valid_interfaces`).
        interface: String,
        /// The region (`region_name`), if any.
        region: Option<String>,
    },
}

impl Endpoint {
    /// The catalog's public endpoint of `service_type`.
    pub fn public(service_type: &str) -> Endpoint {
        Endpoint::Catalog {
            service_type: service_type.to_owned(),
            interface: "public".to_owned(),
            region: None,
        }
    }
}

/// A service's answer: its status and body, for the client to decode or refuse.
#[derive(Debug)]
pub struct Answer {
    /// The request method.
    pub method: Method,
    /// The request URL.
    pub url: String,
    /// The HTTP status.
    pub status: u16,
    /// The body.
    pub body: String,
}

impl Answer {
    /// The body as `T`, or a [`ApiError::Decode`] naming the call.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_str(&self.body).map_err(|e| ApiError::Decode {
            method: self.method.clone(),
            url: self.url.clone(),
            detail: format!("{e} in {}", server_message(&self.body)),
        })
    }

    /// `body[key]` as `T` (the APIs wrap every object: `{"port": {…}}`, `{"ports": […]}`).
    pub(crate) fn field<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T, ApiError> {
        let mut body: Value = self.json()?;
        let inner = body
            .get_mut(key)
            .map(Value::take)
            .ok_or_else(|| ApiError::Decode {
                method: self.method.clone(),
                url: self.url.clone(),
                detail: format!("no {key:?} in the answer"),
            })?;
        serde_json::from_value(inner).map_err(|e| ApiError::Decode {
            method: self.method.clone(),
            url: self.url.clone(),
            detail: format!("{key}: {e}"),
        })
    }

    /// Whether the status is 2xx.
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// This answer as a refusal ([`ApiError::Status`]).
    pub(crate) fn into_error(self) -> ApiError {
        ApiError::Status {
            message: server_message(&self.body),
            method: self.method,
            url: self.url,
            status: self.status,
        }
    }

    /// Ok(self) for a 2xx answer, the refusal otherwise.
    pub fn success(self) -> Result<Answer, ApiError> {
        if self.is_success() {
            Ok(self)
        } else {
            Err(self.into_error())
        }
    }
}

/// A 404 as None.
pub(crate) fn absent_is_none<T>(result: Result<T, ApiError>) -> Result<Option<T>, ApiError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `collection?k=v&…` with keys and values percent-encoded.
pub(crate) fn with_query(collection: &str, filters: &[(&str, &str)]) -> String {
    let mut path = collection.to_owned();
    for (i, (k, v)) in filters.iter().enumerate() {
        path.push(if i == 0 { '?' } else { '&' });
        path.push_str(&encode(k));
        path.push('=');
        path.push_str(&encode(v));
    }
    path
}

/// `text` percent-encoded for a query string (RFC 3986 unreserved characters kept).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Credentials, the current token and one HTTP client; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Session {
    http: reqwest::Client,
    credentials: Credentials,
    token: Mutex<Option<Token>>,
}

impl Session {
    /// A session with `credentials`; every request times out after `timeout`.
    pub fn new(credentials: Credentials, timeout: Duration) -> Result<Session, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()?;
        Ok(Session {
            http,
            credentials,
            token: Mutex::new(None),
        })
    }

    /// The credentials.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The project the controller works in: `noauth`'s project id, or the token's project.
    pub async fn project_id(&self) -> Result<String, ApiError> {
        match &self.credentials {
            Credentials::NoAuth { project_id } => Ok(project_id.clone()),
            _ => Ok(self.token().await?.project_id),
        }
    }

    /// The base URL of `endpoint`, without a trailing slash.
    pub async fn url_of(&self, endpoint: &Endpoint) -> Result<String, ApiError> {
        match endpoint {
            Endpoint::Url(url) => Ok(url.trim_end_matches('/').to_owned()),
            Endpoint::Catalog {
                service_type,
                interface,
                region,
            } => {
                let missing = || ApiError::NoEndpoint {
                    service_type: service_type.clone(),
                    interface: interface.clone(),
                    region: region.clone(),
                };
                if matches!(self.credentials, Credentials::NoAuth { .. }) {
                    return Err(missing());
                }
                self.token()
                    .await?
                    .endpoint(service_type, interface, region.as_deref())
                    .ok_or_else(missing)
            }
        }
    }

    /// The current token, issued or replaced when there is none or it is about to expire.
    pub async fn token(&self) -> Result<Token, ApiError> {
        let mut current = self.token.lock().await;
        if let Some(token) = current.as_ref()
            && !token.needs_renewal(Timestamp::now())
        {
            return Ok(token.clone());
        }
        let token = self.issue().await?;
        *current = Some(token.clone());
        Ok(token)
    }

    /// Forget `stale` (a token a service refused) unless another call already replaced it.
    async fn forget(&self, stale: &str) {
        let mut current = self.token.lock().await;
        if current.as_ref().is_some_and(|t| t.value == stale) {
            *current = None;
        }
    }

    /// `POST /v3/auth/tokens`.
    async fn issue(&self) -> Result<Token, ApiError> {
        let (Some(url), Some(body)) = (
            self.credentials.token_url(),
            self.credentials.token_request(),
        ) else {
            return Err(ApiError::Auth {
                url: String::new(),
                status: None,
                detail: "noauth has no token".to_owned(),
            });
        };
        let failed = |status: Option<u16>, detail: String| ApiError::Auth {
            url: url.clone(),
            status,
            detail,
        };
        let response = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| failed(None, e.to_string()))?;
        let status = response.status().as_u16();
        let subject = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response
            .text()
            .await
            .map_err(|e| failed(None, e.to_string()))?;
        if !(200..300).contains(&status) {
            return Err(failed(Some(status), server_message(&text)));
        }
        let subject = subject.ok_or_else(|| {
            failed(
                Some(status),
                "the answer has no X-Subject-Token header".to_owned(),
            )
        })?;
        parse_token(subject, &text).map_err(|detail| failed(Some(status), detail))
    }

    /// Send one request with the session's identity; a 401 re-issues the token and sends once
    /// more. Any status is an [`Answer`]; only no answer at all is an error.
    pub async fn send(
        &self,
        method: Method,
        url: String,
        body: Option<&Value>,
    ) -> Result<Answer, ApiError> {
        let mut reissued = false;
        loop {
            let mut request = self.http.request(method.clone(), &url);
            let token = match &self.credentials {
                Credentials::NoAuth { project_id } => {
                    request = request.header("X-Project-Id", project_id);
                    None
                }
                _ => {
                    let token = self.token().await?;
                    request = request.header("X-Auth-Token", &token.value);
                    Some(token.value)
                }
            };
            if let Some(body) = body {
                request = request.json(body);
            }
            let transport = |source| ApiError::Transport {
                method: method.clone(),
                url: url.clone(),
                source,
            };
            let response = request.send().await.map_err(transport)?;
            let status = response.status().as_u16();
            let text = response.text().await.map_err(transport)?;
            if status == 401
                && let Some(stale) = token
                && !reissued
            {
                tracing::info!(%method, %url, "token refused (401); issuing a new one");
                self.forget(&stale).await;
                reissued = true;
                continue;
            }
            return Ok(Answer {
                method,
                url,
                status,
                body: text,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_an_encoded_query() {
        assert_eq!(with_query("ports", &[]), "ports");
        assert_eq!(
            with_query("ports", &[("device_id", "a b"), ("tags", "k8s/x")]),
            "ports?device_id=a%20b&tags=k8s%2Fx"
        );
    }

    #[test]
    fn an_answer_unwraps_its_object_or_names_what_is_missing() {
        let answer = Answer {
            method: Method::GET,
            url: "http://n/v2.0/ports/p".to_owned(),
            status: 200,
            body: r#"{"port": {"id": "p"}}"#.to_owned(),
        };
        let port: Value = answer.field("port").unwrap();
        assert_eq!(port["id"], "p");
        let missing = answer.field::<Value>("network").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "GET http://n/v2.0/ports/p: unexpected answer: no \"network\" in the answer"
        );
        let refused = Answer {
            status: 404,
            body: r#"{"NeutronError": {"type": "PortNotFound", "message": "Port p could not be found.", "detail": ""}}"#.to_owned(),
            ..answer
        };
        let error = refused.success().unwrap_err();
        assert!(error.is_not_found());
        assert_eq!(
            error.to_string(),
            "GET http://n/v2.0/ports/p: 404 Port p could not be found."
        );
        assert!(absent_is_none::<()>(Err(error)).unwrap().is_none());
    }
}
