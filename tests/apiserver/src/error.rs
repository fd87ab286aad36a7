//! Errors: the Kubernetes `Status` failures the server answers with, and the crate's own errors.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// A failed API request, answered with a Kubernetes `Status` body (`kind: Status`,
/// `status: Failure`) and the matching HTTP status code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code, also carried in the body's `code`.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...).
    pub reason: String,
    /// Human-readable message naming what was wrong.
    pub message: String,
    /// Optional `details` (name, group, kind, causes).
    pub details: Option<Box<Value>>,
}

impl ApiError {
    /// An error with the given code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for `<resource> "<name>" not found`.
    pub fn not_found(group_resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{group_resource} \"{name}\" not found"),
        )
        .with_details(json!({"name": name, "kind": group_resource}))
    }

    /// 404 NotFound for a path the server does not serve.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow method {method} on {what}"),
        )
    }

    /// 403 Forbidden for a create in a namespace that is being deleted.
    pub fn namespace_terminating(namespace: &str) -> Self {
        let message = format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        );
        Self::new(403, "Forbidden", message.clone()).with_details(json!({
            "name": namespace,
            "kind": "namespaces",
            "causes": [{"reason": "NamespaceTerminating", "message": message, "field": "metadata.namespace"}],
        }))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{group_resource} \"{name}\" already exists"),
        )
        .with_details(json!({"name": name, "kind": group_resource}))
    }

    /// 409 Conflict on a stale resourceVersion or failed precondition.
    pub fn conflict(group_resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {group_resource} \"{name}\": {why}"),
        )
        .with_details(json!({"name": name, "kind": group_resource}))
    }

    /// 422 Invalid: `<Kind> "<name>" is invalid: <field>: <problem>`.
    pub fn invalid(kind: &str, name: &str, field: &str, problem: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {problem}"),
        )
        .with_details(json!({
            "name": name,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": problem, "field": field}],
        }))
    }

    /// 410 Gone with reason Expired (a resourceVersion older than the retained history).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The conventional reason for an HTTP status code (used for injected faults).
    pub fn reason_for_code(code: u16) -> &'static str {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// The `Status` object this error is reported as.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(details), Some(map)) = (&self.details, status.as_object_mut()) {
            map.insert("details".into(), (**details).clone());
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// A JSON response with `content-type: application/json`.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = (code, bytes).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Errors from starting, using or stopping the server (not request failures).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the listen address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// Reading the bound socket's address failed.
    #[error("cannot read the listening address: {0}")]
    LocalAddr(#[source] std::io::Error),
    /// The server task failed while serving.
    #[error("server failed: {0}")]
    Serve(#[source] std::io::Error),
    /// The server task panicked or was cancelled.
    #[error("server task ended abnormally: {0}")]
    Join(#[source] tokio::task::JoinError),
    /// Building a `kube::Client` for the server failed.
    #[error("cannot build a kube client for {url}: {source}")]
    Client {
        /// The server URL.
        url: String,
        /// The kube error.
        #[source]
        source: kube::Error,
    },
    /// The server URL did not parse as a URI (should not happen for a socket address).
    #[error("invalid server url {url}: {source}")]
    Url {
        /// The URL.
        url: String,
        /// The parse error.
        #[source]
        source: http::uri::InvalidUri,
    },
}
