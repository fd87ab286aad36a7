//! Errors: the Kubernetes `Status` failures the server answers with (built on
//! [`kube::core::Status`], the type kube clients decode them into), and the crate's own errors.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails, StatusSummary, reason};
use serde_json::{Value, json};

/// One field a write got wrong: the field's path (`metadata.name`, `spec.parts[1].id`) and
/// the problem, worded as Kubernetes words it (`Required value`, `Invalid value: "x": ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldProblem {
    /// The field's path.
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl FieldProblem {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// A failed API request, answered with a Kubernetes `Status` body (`kind: Status`,
/// `status: Failure`) and the matching HTTP status code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError(Box<Status>);

impl ApiError {
    /// An error with the given code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self(Box::new(Status {
            status: Some(StatusSummary::Failure),
            code,
            message: message.into(),
            metadata: None,
            reason: reason.to_string(),
            details: None,
        }))
    }

    /// The HTTP status code, also carried in the body's `code`.
    pub fn code(&self) -> u16 {
        self.0.code
    }

    /// The machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...).
    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// The human-readable message naming what was wrong.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The `Status` this error is answered with.
    pub fn status(&self) -> &Status {
        &self.0
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, reason::BAD_REQUEST, message)
    }

    /// 404 NotFound for `<resource> "<name>" not found`.
    pub fn not_found(group_resource: &str, name: &str) -> Self {
        Self::new(
            404,
            reason::NOT_FOUND,
            format!("{group_resource} \"{name}\" not found"),
        )
        .with_details(name, group_resource, Vec::new())
    }

    /// 404 NotFound for a path the server does not serve.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            reason::NOT_FOUND,
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(
            405,
            reason::METHOD_NOT_ALLOWED,
            format!("the server does not allow method {method} on {what}"),
        )
    }

    /// 403 Forbidden for a create in a namespace that is being deleted.
    pub fn namespace_terminating(namespace: &str) -> Self {
        let message = format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        );
        let cause = StatusCause {
            reason: "NamespaceTerminating".into(),
            message: message.clone(),
            field: "metadata.namespace".into(),
        };
        Self::new(403, reason::FORBIDDEN, message).with_details(
            namespace,
            "namespaces",
            vec![cause],
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        Self::new(
            409,
            reason::ALREADY_EXISTS,
            format!("{group_resource} \"{name}\" already exists"),
        )
        .with_details(name, group_resource, Vec::new())
    }

    /// 409 Conflict on a stale resourceVersion or failed precondition.
    pub fn conflict(group_resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            reason::CONFLICT,
            format!("Operation cannot be fulfilled on {group_resource} \"{name}\": {why}"),
        )
        .with_details(name, group_resource, Vec::new())
    }

    /// 409 Conflict with field causes and no object details (what a server-side apply
    /// conflict answers with): each cause is a message and a field.
    pub(crate) fn conflict_with_causes(
        message: String,
        cause_reason: &str,
        causes: Vec<(String, String)>,
    ) -> Self {
        let causes = causes
            .into_iter()
            .map(|(message, field)| StatusCause {
                reason: cause_reason.into(),
                message,
                field,
            })
            .collect();
        let mut err = Self::new(409, reason::CONFLICT, message);
        err.0.details = Some(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        });
        err
    }

    /// 422 Invalid: `<Kind> "<name>" is invalid: <field>: <problem>`.
    pub fn invalid(kind: &str, name: &str, field: &str, problem: &str) -> Self {
        Self::invalid_fields(kind, name, &[FieldProblem::new(field, problem)])
    }

    /// 422 Invalid naming every problem, as Kubernetes aggregates them:
    /// `<Kind> "<name>" is invalid: [<field>: <problem>, <field>: <problem>]`.
    pub(crate) fn invalid_fields(kind: &str, name: &str, problems: &[FieldProblem]) -> Self {
        let listed: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.problem))
            .collect();
        let what = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes = problems
            .iter()
            .map(|p| StatusCause {
                reason: cause_reason(&p.problem).into(),
                message: p.problem.clone(),
                field: p.field.clone(),
            })
            .collect();
        // Details name the kind and group apart: `Ingress.networking.k8s.io` is kind
        // `Ingress` of group `networking.k8s.io`.
        let (bare_kind, group) = kind.split_once('.').unwrap_or((kind, ""));
        let mut err = Self::new(
            422,
            reason::INVALID,
            format!("{kind} \"{name}\" is invalid: {what}"),
        )
        .with_details(name, bare_kind, causes);
        if let Some(details) = err.0.details.as_mut() {
            details.group = group.to_string();
        }
        err
    }

    /// 410 Gone with reason Expired (a resourceVersion older than the retained history).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, reason::EXPIRED, message)
    }

    /// 413 RequestEntityTooLarge, for a body over `limit` bytes.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            reason::REQUEST_ENTITY_TOO_LARGE,
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            reason::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, reason::INTERNAL_ERROR, message)
    }

    /// The conventional reason for an HTTP status code (used for injected faults).
    pub fn reason_for_code(code: u16) -> &'static str {
        match code {
            400 => reason::BAD_REQUEST,
            401 => reason::UNAUTHORIZED,
            403 => reason::FORBIDDEN,
            404 => reason::NOT_FOUND,
            405 => reason::METHOD_NOT_ALLOWED,
            409 => reason::CONFLICT,
            410 => reason::EXPIRED,
            413 => reason::REQUEST_ENTITY_TOO_LARGE,
            415 => reason::UNSUPPORTED_MEDIA_TYPE,
            422 => reason::INVALID,
            429 => reason::TOO_MANY_REQUESTS,
            500 => reason::INTERNAL_ERROR,
            503 => reason::SERVICE_UNAVAILABLE,
            504 => reason::TIMEOUT,
            _ => "Unknown",
        }
    }

    fn with_details(mut self, name: &str, kind: &str, causes: Vec<StatusCause>) -> Self {
        self.0.details = Some(StatusDetails {
            name: name.to_string(),
            group: String::new(),
            kind: kind.to_string(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        });
        self
    }

    /// The `Status` object this error is reported as, with its `kind` and `apiVersion`.
    pub fn to_status(&self) -> Value {
        let mut status = serde_json::to_value(&*self.0).unwrap_or_default();
        if let Some(map) = status.as_object_mut() {
            map.insert("kind".into(), json!("Status"));
            map.insert("apiVersion".into(), json!("v1"));
            map.insert("metadata".into(), json!({}));
        }
        status
    }
}

/// The `StatusCause` reason Kubernetes gives a field problem (`field.ErrorType`'s name).
fn cause_reason(problem: &str) -> &'static str {
    if problem.starts_with("Required value") {
        "FieldValueRequired"
    } else if problem.starts_with("Unsupported value") {
        "FieldValueNotSupported"
    } else if problem.starts_with("Too long") {
        "FieldValueTooLong"
    } else if problem.starts_with("Too many") {
        "FieldValueTooMany"
    } else if problem.starts_with("Forbidden") {
        "FieldValueForbidden"
    } else if problem.starts_with("Duplicate value") {
        "FieldValueDuplicate"
    } else {
        "FieldValueInvalid"
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code(), self.reason(), self.message())
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// A JSON response with `content-type: application/json`.
pub(crate) fn json_response(code: StatusCode, body: &impl serde::Serialize) -> Response {
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
