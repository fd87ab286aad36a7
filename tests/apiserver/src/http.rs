//! The HTTP side: routing in the Kubernetes REST layout, discovery (including `/openapi/v3`),
//! and the handlers of each kind of request.
//!
//! | module | what |
//! |---|---|
//! | `path` | which document or resource a path addresses |
//! | `request` | query parameters, bodies (with the 3 MiB limit), DeleteOptions, patch types |
//! | `resource` | verbs on objects, request counts and injected faults |
//! | `watch` | watch streams and bookmarks |
//! | `admin` | the `/_test/` fault and request-count endpoints |

mod admin;
mod path;
mod request;
mod resource;
mod watch;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::watch as signal;

use crate::error::{ApiError, json_response};
use crate::faults::{Faults, Requests};
use crate::openapi;
use crate::resources::{self, ResourceType};
use crate::store::Store;
use path::{ResourcePath, Target, parse_path};

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub faults: Faults,
    pub requests: Requests,
    pub bookmark_interval: Duration,
    pub shutdown: signal::Receiver<bool>,
}

impl Shared {
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The router: every path goes through one handler that parses the Kubernetes layout.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let uri = req.uri().clone();
    let resp = match route(&shared, req).await {
        Ok(resp) => resp,
        Err(err) => err.into_response(),
    };
    tracing::info!(
        %method,
        %uri,
        status = resp.status().as_u16(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "request"
    );
    resp
}

async fn route(shared: &Arc<Shared>, req: Request) -> Result<Response, ApiError> {
    let path = req.uri().path().to_string();
    let target = parse_path(&path).ok_or_else(|| ApiError::no_route(&path))?;
    let method = req.method().clone();
    let discovery = |body: Option<Value>| -> Result<Response, ApiError> {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed(method.as_str(), &path));
        }
        body.map(|b| json_response(StatusCode::OK, &b))
            .ok_or_else(|| ApiError::no_route(&path))
    };
    match target {
        Target::Version => discovery(Some(resources::version_info())),
        Target::CoreVersions => {
            let addr = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1")
                .to_string();
            discovery(Some(json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
            })))
        }
        Target::GroupList => {
            let doc = resources::api_group_list(shared.store().types());
            discovery(Some(doc))
        }
        Target::Group(group) => {
            let doc = resources::groups(shared.store().types())
                .into_iter()
                .find(|(g, _)| *g == group && !g.is_empty())
                .map(|(g, versions)| resources::api_group(&g, &versions));
            discovery(doc)
        }
        Target::ResourceList(gv) => {
            let store = shared.store();
            discovery(resources::api_resource_list(
                store.types(),
                &gv.group,
                &gv.version,
            ))
        }
        Target::OpenApiRoot => discovery(Some(openapi::root(shared.store().types()))),
        Target::OpenApi(gv) => {
            let store = shared.store();
            discovery(openapi::group_version(
                store.types(),
                &gv.group,
                &gv.version,
            ))
        }
        Target::Admin(what) => admin::admin(shared, &what, req).await,
        Target::Resource(rp) => resource::resource(shared, rp, req).await,
    }
}

/// The type a resource path addresses, if it is served (and the path fits its scope).
fn served(store: &Store, rp: &ResourcePath, path: &str) -> Result<ResourceType, ApiError> {
    let rt = store
        .resolve(&rp.group, &rp.version, &rp.plural)
        .ok_or_else(|| ApiError::no_route(path))?;
    if !rt.namespaced && rp.namespace.is_some() {
        return Err(ApiError::no_route(path));
    }
    if rt.namespaced && rp.namespace.is_none() && rp.name.is_some() {
        return Err(ApiError::no_route(path));
    }
    Ok(rt)
}
