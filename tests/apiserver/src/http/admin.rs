//! The `/_test/` endpoints: fault injection and request counts over HTTP.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Shared;
use super::request::read_body;
use crate::error::{ApiError, json_response};

/// A fault to inject through `POST /_test/faults`.
#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
enum FaultRequest {
    /// Fail the next `times` matching requests with `code`.
    Fail {
        verb: String,
        resource: String,
        times: usize,
        code: u16,
    },
    /// Delay matching requests.
    Latency {
        verb: String,
        resource: String,
        millis: u64,
    },
    /// Expire the next watch of `resource`.
    ExpireWatch { resource: String },
}

pub(super) async fn admin(
    shared: &Arc<Shared>,
    what: &str,
    req: Request,
) -> Result<Response, ApiError> {
    let method = req.method().clone();
    match (what, method) {
        ("requests", Method::GET) => {
            let rows: Vec<Value> = shared
                .requests
                .snapshot()
                .into_iter()
                .map(|((verb, resource), count)| {
                    json!({"verb": verb, "resource": resource, "count": count})
                })
                .collect();
            Ok(json_response(StatusCode::OK, &json!({"requests": rows})))
        }
        ("requests", Method::DELETE) => {
            shared.requests.reset();
            Ok(json_response(StatusCode::OK, &json!({})))
        }
        ("faults", Method::POST) => {
            let (_, bytes) = read_body(req).await?;
            let fault: FaultRequest = serde_json::from_slice(&bytes).map_err(|e| {
                ApiError::bad_request(format!(
                    "invalid fault (want {{\"type\": \"fail\"|\"latency\"|\"expireWatch\", ...}}): {e}"
                ))
            })?;
            match fault {
                FaultRequest::Fail {
                    verb,
                    resource,
                    times,
                    code,
                } => {
                    if StatusCode::from_u16(code).is_err() {
                        return Err(ApiError::bad_request(format!("invalid status code {code}")));
                    }
                    shared.faults.fail_next(&verb, &resource, times, code);
                }
                FaultRequest::Latency {
                    verb,
                    resource,
                    millis,
                } => shared
                    .faults
                    .add_latency(&verb, &resource, Duration::from_millis(millis)),
                FaultRequest::ExpireWatch { resource } => {
                    shared.faults.expire_next_watch(&resource)
                }
            }
            Ok(json_response(StatusCode::OK, &json!({})))
        }
        ("faults", Method::DELETE) => {
            shared.faults.clear();
            Ok(json_response(StatusCode::OK, &json!({})))
        }
        (_, method) => Err(ApiError::method_not_allowed(
            method.as_str(),
            &format!("/_test/{what}"),
        )),
    }
}
