//! Requests for objects: the verb from the method and path, request counting and injected
//! faults, then the store operation. Bodies (objects and patches) are read and decoded before
//! the store lock is taken.

use std::sync::{Arc, MutexGuard};

use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};

use super::path::ResourcePath;
use super::request::{
    delete_options, filter_from, flag, params, parse_object_body, patch_kind, read_body,
};
use super::watch::start_watch;
use super::{Shared, served};
use crate::error::{ApiError, json_response};
use crate::resources::ResourceType;
use crate::selector::FieldSelector;
use crate::store::{FieldValidation, Patch, PatchKind, Store, Subresource, WriteOptions, Written};

pub(super) async fn resource(
    shared: &Arc<Shared>,
    rp: ResourcePath,
    req: Request,
) -> Result<Response, ApiError> {
    let path = req.uri().path().to_string();
    let params = params(&req)?;
    let rt = served(&shared.store(), &rp, &path)?;
    let sub = match rp.sub.as_deref() {
        None => Subresource::Main,
        Some("status") if rt.status_subresource => Subresource::Status,
        Some(_) => return Err(ApiError::no_route(&path)),
    };
    let method = req.method().clone();
    let watching = rp.legacy_watch || flag(&params, "watch");
    let verb = match (&method, rp.name.is_some()) {
        (&Method::GET, _) if watching => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => return Err(ApiError::method_not_allowed(method.as_str(), &path)),
    };
    if sub == Subresource::Status && !matches!(verb, "get" | "update" | "patch") {
        return Err(ApiError::method_not_allowed(method.as_str(), &path));
    }
    let counted = match rp.sub.as_deref() {
        Some(s) => format!("{}/{s}", rt.plural),
        None => rt.plural.clone(),
    };
    shared.requests.record(verb, &counted);
    let decision = shared.faults.decide(verb, &counted);
    if let Some(latency) = decision.latency {
        tokio::time::sleep(latency).await;
    }
    if let Some(code) = decision.fail {
        return Err(ApiError::new(
            code,
            ApiError::reason_for_code(code),
            format!("injected fault: {verb} {counted} fails with {code}"),
        ));
    }
    if params.contains_key("dryRun") {
        return Err(ApiError::bad_request(
            "dryRun is not supported by this test server",
        ));
    }
    let ns = rp.namespace.as_deref();
    let name = rp.name.as_deref().unwrap_or("");
    // Every store operation resolves the type again under the same lock: the CRD behind it
    // may have been deleted while this request slept in injected latency or read its body.
    let locked = || -> Result<(MutexGuard<'_, Store>, ResourceType), ApiError> {
        let store = shared.store();
        let rt = served(&store, &rp, &path)?;
        Ok((store, rt))
    };
    let manager = field_manager(&params, &req);
    let write_options = || -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            validation: FieldValidation::parse(params.get("fieldValidation").map(String::as_str))?,
            manager: manager.clone(),
            force: flag(&params, "force"),
        })
    };
    match verb {
        "get" => {
            let (store, rt) = locked()?;
            Ok(json_response(StatusCode::OK, &store.get(&rt, ns, name)?))
        }
        "list" => {
            let filter = filter_from(&params, rp.namespace.clone())?;
            let limit = match params.get("limit").filter(|l| !l.is_empty()) {
                Some(l) => Some(l.parse::<usize>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "invalid limit {l:?}: must be a non-negative integer"
                    ))
                })?),
                None => None,
            };
            let cont = params.get("continue").map(String::as_str);
            let (store, rt) = locked()?;
            Ok(json_response(
                StatusCode::OK,
                &store.list(&rt, &filter, limit, cont)?,
            ))
        }
        "watch" => {
            let mut filter = filter_from(&params, rp.namespace.clone())?;
            if let Some(n) = &rp.name {
                filter.fields = filter.fields.and(FieldSelector::for_name(n));
            }
            start_watch(shared, &rp, &path, filter, &params, decision.expire_watch)
        }
        "create" => {
            let opts = write_options()?;
            let (ct, bytes) = read_body(req).await?;
            let body = parse_object_body(ct.as_deref(), &bytes)?;
            let (mut store, rt) = locked()?;
            Ok(written(store.create_with(&rt, ns, body, &opts)?))
        }
        "update" => {
            let opts = write_options()?;
            let (ct, bytes) = read_body(req).await?;
            let body = parse_object_body(ct.as_deref(), &bytes)?;
            let (mut store, rt) = locked()?;
            Ok(written(store.replace(&rt, ns, name, body, sub, &opts)?))
        }
        "patch" => {
            let opts = write_options()?;
            let (ct, bytes) = read_body(req).await?;
            let kind = patch_kind(ct.as_deref())?;
            if kind == PatchKind::Apply && params.get("fieldManager").is_none_or(|f| f.is_empty()) {
                return Err(ApiError::bad_request(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            let patch = Patch::decode(kind, &bytes)?;
            let (mut store, rt) = locked()?;
            Ok(written(store.patch(&rt, ns, name, &patch, sub, &opts)?))
        }
        "delete" => {
            let (_, bytes) = read_body(req).await?;
            let opts = delete_options(&params, &bytes)?;
            let (mut store, rt) = locked()?;
            Ok(json_response(
                StatusCode::OK,
                &store.delete(&rt, ns, name, &opts)?,
            ))
        }
        "deletecollection" => {
            let filter = filter_from(&params, rp.namespace.clone())?;
            let (_, bytes) = read_body(req).await?;
            let opts = delete_options(&params, &bytes)?;
            let (mut store, rt) = locked()?;
            Ok(json_response(
                StatusCode::OK,
                &store.delete_collection(&rt, &filter, &opts)?,
            ))
        }
        _ => Err(ApiError::method_not_allowed(method.as_str(), &path)),
    }
}

/// The write's field manager: the `fieldManager` parameter, or else the User-Agent's product
/// name (what precedes its first `/`), as Kubernetes picks it.
fn field_manager(params: &super::request::Params, req: &Request) -> String {
    if let Some(name) = params.get("fieldManager").filter(|m| !m.is_empty()) {
        return name.clone();
    }
    let agent = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    agent.split('/').next().unwrap_or("").to_string()
}

/// 201 for a created object, 200 otherwise, with a `Warning` header per warning.
fn written(w: Written) -> Response {
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = json_response(code, &w.object);
    for warning in &w.warnings {
        // RFC 7234 warn-code 299 ("miscellaneous persistent warning"), as Kubernetes sends.
        let text = format!("299 - {}", serde_json::Value::String(warning.clone()));
        if let Ok(value) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(http::header::WARNING, value);
        }
    }
    resp
}
