//! Reading a request: query parameters, the body (at most [`BODY_LIMIT`] bytes, as a real
//! apiserver allows), object and patch bodies, and DeleteOptions.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, Request};
use futures::StreamExt;
use http::header;
use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{DeleteOptions, Filter, PatchKind, Propagation};

/// The largest request body accepted: 3 MiB, Kubernetes' `MaxRequestBodyBytes`. A larger one
/// is answered with 413 RequestEntityTooLarge.
pub(crate) const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// How much of an oversized body is read (and dropped) before answering 413, so that the
/// client, still sending, reads the answer instead of a reset connection.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// Query parameters, decoded.
pub(super) type Params = HashMap<String, String>;

pub(super) fn params(req: &Request) -> Result<Params, ApiError> {
    Query::<Params>::try_from_uri(req.uri())
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
}

pub(super) fn flag(params: &Params, name: &str) -> bool {
    params.get(name).is_some_and(|v| v == "true" || v == "1")
}

pub(super) fn filter_from(params: &Params, namespace: Option<String>) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(params.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
    let fields = FieldSelector::parse(params.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse fieldSelector: {e}")))?;
    Ok(Filter {
        namespace,
        labels,
        fields,
    })
}

/// The Content-Type and the body, refused with 413 when it is over [`BODY_LIMIT`].
pub(super) async fn read_body(req: Request) -> Result<(Option<String>, Bytes), ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > DRAIN_LIMIT) {
        return Err(ApiError::too_large(BODY_LIMIT));
    }
    let mut stream = req.into_body().into_data_stream();
    let mut body = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
        seen += chunk.len();
        if seen > DRAIN_LIMIT {
            break;
        }
        if seen <= BODY_LIMIT {
            body.extend_from_slice(&chunk);
        }
    }
    if seen > BODY_LIMIT {
        return Err(ApiError::too_large(BODY_LIMIT));
    }
    Ok((content_type, Bytes::from(body)))
}

/// Parses a create/update body: JSON, or YAML when the Content-Type says so.
pub(super) fn parse_object_body(
    content_type: Option<&str>,
    bytes: &[u8],
) -> Result<Value, ApiError> {
    if let Some(ct) = content_type
        && !ct.contains("json")
        && !ct.contains("yaml")
    {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct:?})"
            ),
        ));
    }
    if content_type.is_some_and(|c| c.contains("yaml")) {
        return serde_norway::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("invalid YAML body: {e}")));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteBody {
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    preconditions: Option<Preconditions>,
    dry_run: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

pub(super) fn delete_options(params: &Params, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let parsed: DeleteBody = if body.iter().all(u8::is_ascii_whitespace) {
        DeleteBody::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions body: {e}")))?
    };
    if parsed.dry_run.is_some_and(|d| !d.is_empty()) {
        return Err(ApiError::bad_request(
            "dryRun is not supported by this test server",
        ));
    }
    let policy = params
        .get("propagationPolicy")
        .cloned()
        .or(parsed.propagation_policy)
        .or_else(|| {
            parsed
                .orphan_dependents
                .or_else(|| params.get("orphanDependents").map(|v| v == "true"))
                .map(|o| if o { "Orphan" } else { "Background" }.to_string())
        });
    let propagation = match policy.as_deref() {
        None | Some("") | Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unsupported propagationPolicy {other:?}: use Background, Foreground or Orphan"
            )));
        }
    };
    let pre = parsed.preconditions.unwrap_or_default();
    Ok(DeleteOptions {
        propagation,
        precondition_uid: pre.uid.filter(|s| !s.is_empty()),
        precondition_rv: pre.resource_version.filter(|s| !s.is_empty()),
    })
}

pub(super) fn patch_kind(content_type: Option<&str>) -> Result<PatchKind, ApiError> {
    let ct = content_type.unwrap_or("");
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        "application/merge-patch+json" => Ok(PatchKind::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchKind::StrategicAsMerge),
        "application/json-patch+json" => Ok(PatchKind::Json),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
        _ => Err(ApiError::unsupported_media_type(ct)),
    }
}
