//! The HTTP side: path routing in the Kubernetes REST layout, verbs, watch streams, discovery
//! and the `/_test/` admin endpoints.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::error::{ApiError, json_response};
use crate::faults::{Faults, Requests};
use crate::resources::{self, ResourceType};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{
    DeleteOptions, Filter, PatchKind, Propagation, Store, Subresource, WatchItem, WatchStart,
};

/// The largest request body accepted.
const BODY_LIMIT: usize = 16 * 1024 * 1024;

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct Shared {
    pub store: Mutex<Store>,
    pub faults: Faults,
    pub requests: Requests,
    pub bookmark_interval: Duration,
    pub shutdown: watch::Receiver<bool>,
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

/// A request for objects: `/api/v1/...` or `/apis/<group>/<version>/...`.
#[derive(Debug, Clone, PartialEq)]
struct ResourcePath {
    group: String,
    version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    sub: Option<String>,
    legacy_watch: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Target {
    Version,
    CoreVersions,
    GroupList,
    Group(String),
    ResourceList(String, String),
    Resource(ResourcePath),
    Admin(String),
}

fn parse_path(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Some(Target::Version),
        ["api"] => Some(Target::CoreVersions),
        ["apis"] => Some(Target::GroupList),
        ["_test", what] => Some(Target::Admin((*what).to_string())),
        ["api", version, rest @ ..] => resource_path("", version, rest),
        ["apis", group] => Some(Target::Group((*group).to_string())),
        ["apis", group, version, rest @ ..] => resource_path(group, version, rest),
        _ => None,
    }
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    if rest.is_empty() {
        return Some(Target::ResourceList(group.into(), version.into()));
    }
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let (namespace, tail) = match rest {
        // `/api/v1/namespaces/<name>/status` addresses the Namespace itself.
        ["namespaces", _, sub] if group.is_empty() && matches!(*sub, "status" | "finalize") => {
            (None, rest)
        }
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some((*ns).to_string()), tail),
        _ => (None, rest),
    };
    match tail {
        [plural, more @ ..] if more.len() <= 2 => Some(Target::Resource(ResourcePath {
            group: group.into(),
            version: version.into(),
            namespace,
            plural: (*plural).to_string(),
            name: more.first().map(|s| (*s).to_string()),
            sub: more.get(1).map(|s| (*s).to_string()),
            legacy_watch,
        })),
        _ => None,
    }
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
        Target::ResourceList(group, version) => {
            let doc = resources::api_resource_list(shared.store().types(), &group, &version);
            discovery(doc)
        }
        Target::Admin(what) => admin(shared, &what, req).await,
        Target::Resource(rp) => resource(shared, rp, req).await,
    }
}

/// Query parameters, decoded.
type Params = HashMap<String, String>;

fn params(req: &Request) -> Result<Params, ApiError> {
    Query::<Params>::try_from_uri(req.uri())
        .map(|q| q.0)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
}

fn flag(params: &Params, name: &str) -> bool {
    params.get(name).is_some_and(|v| v == "true" || v == "1")
}

fn filter_from(params: &Params, namespace: Option<String>) -> Result<Filter, ApiError> {
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

async fn read_body(req: Request) -> Result<(Option<String>, Bytes), ApiError> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bytes = axum::body::to_bytes(req.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| ApiError::bad_request(format!("cannot read the request body: {e}")))?;
    Ok((content_type, bytes))
}

/// Parses a create/update body: JSON, or YAML when the Content-Type says so.
fn parse_object_body(content_type: Option<&str>, bytes: &[u8]) -> Result<Value, ApiError> {
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

fn delete_options(params: &Params, body: &[u8]) -> Result<DeleteOptions, ApiError> {
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

fn patch_kind(content_type: Option<&str>) -> Result<PatchKind, ApiError> {
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

async fn resource(
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
    let ok = |body: Value| Ok(json_response(StatusCode::OK, &body));
    // Every store operation resolves the type again under the same lock: the CRD behind it
    // may have been deleted while this request slept in injected latency or read its body.
    let locked = || -> Result<(MutexGuard<'_, Store>, ResourceType), ApiError> {
        let store = shared.store();
        let rt = served(&store, &rp, &path)?;
        Ok((store, rt))
    };
    match verb {
        "get" => {
            let (store, rt) = locked()?;
            ok(store.get(&rt, ns, name)?)
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
            ok(store.list(&rt, &filter, limit, cont)?)
        }
        "watch" => {
            let mut filter = filter_from(&params, rp.namespace.clone())?;
            if let Some(n) = &rp.name {
                filter.fields = filter.fields.and(FieldSelector::for_name(n));
            }
            start_watch(shared, &rp, &path, filter, &params, decision.expire_watch)
        }
        "create" => {
            let (ct, bytes) = read_body(req).await?;
            let body = parse_object_body(ct.as_deref(), &bytes)?;
            let (mut store, rt) = locked()?;
            let created = store.create(&rt, ns, body)?;
            Ok(json_response(StatusCode::CREATED, &created))
        }
        "update" => {
            let (ct, bytes) = read_body(req).await?;
            let body = parse_object_body(ct.as_deref(), &bytes)?;
            let (mut store, rt) = locked()?;
            let (obj, created) = store.replace(&rt, ns, name, body, sub)?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(code, &obj))
        }
        "patch" => {
            let (ct, bytes) = read_body(req).await?;
            let kind = patch_kind(ct.as_deref())?;
            if kind == PatchKind::Apply && params.get("fieldManager").is_none_or(|f| f.is_empty()) {
                return Err(ApiError::bad_request(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            let (mut store, rt) = locked()?;
            let (obj, created) = store.patch(&rt, ns, name, kind, &bytes, sub)?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(json_response(code, &obj))
        }
        "delete" => {
            let (_, bytes) = read_body(req).await?;
            let opts = delete_options(&params, &bytes)?;
            let (mut store, rt) = locked()?;
            ok(store.delete(&rt, ns, name, &opts)?)
        }
        "deletecollection" => {
            let filter = filter_from(&params, rp.namespace.clone())?;
            let (_, bytes) = read_body(req).await?;
            let opts = delete_options(&params, &bytes)?;
            let (mut store, rt) = locked()?;
            ok(store.delete_collection(&rt, &filter, &opts)?)
        }
        _ => Err(ApiError::method_not_allowed(method.as_str(), &path)),
    }
}

/// One line of a watch stream.
fn watch_line(rt: &ResourceType, item: &WatchItem) -> Value {
    match item {
        WatchItem::Event(ty, obj) => json!({"type": ty, "object": Store::present(rt, obj)}),
        WatchItem::Bookmark { rv, initial_end } => {
            let mut metadata = json!({"resourceVersion": rv.to_string()});
            if *initial_end && let Some(m) = metadata.as_object_mut() {
                m.insert(
                    "annotations".into(),
                    json!({"k8s.io/initial-events-end": "true"}),
                );
            }
            json!({"type": "BOOKMARK", "object": {
                "kind": rt.kind,
                "apiVersion": rt.api_version(),
                "metadata": metadata,
            }})
        }
        WatchItem::Error(err) => json!({"type": "ERROR", "object": err.to_status()}),
        WatchItem::Close => Value::Null,
    }
}

struct WatchStream {
    shared: Arc<Shared>,
    rt: ResourceType,
    rx: mpsc::UnboundedReceiver<WatchItem>,
    tx: mpsc::UnboundedSender<WatchItem>,
    bookmarks: Option<tokio::time::Interval>,
    /// The resourceVersion the watch started from (no bookmark below it).
    floor: u64,
    deadline: Option<tokio::time::Instant>,
    shutdown: watch::Receiver<bool>,
    done: bool,
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl WatchStream {
    /// The next line to send, or `None` when the stream ends.
    async fn next_line(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            tokio::select! {
                biased;
                item = self.rx.recv() => {
                    let item = item?;
                    if matches!(item, WatchItem::Close) {
                        return None;
                    }
                    if matches!(item, WatchItem::Error(_)) {
                        self.done = true;
                    }
                    let mut line = serde_json::to_vec(&watch_line(&self.rt, &item)).unwrap_or_default();
                    line.push(b'\n');
                    return Some(Bytes::from(line));
                }
                _ = tick(&mut self.bookmarks) => {
                    self.shared.store().bookmark(&self.tx, self.floor);
                }
                _ = until(self.deadline) => return None,
                _ = self.shutdown.wait_for(|stop| *stop) => return None,
            }
        }
    }
}

fn start_watch(
    shared: &Arc<Shared>,
    rp: &ResourcePath,
    path: &str,
    filter: Filter,
    params: &Params,
    expire: bool,
) -> Result<Response, ApiError> {
    let bookmarks = flag(params, "allowWatchBookmarks");
    let rv = params
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or("");
    let send_initial = params.get("sendInitialEvents").map(String::as_str);
    let (tx, rx) = mpsc::unbounded_channel();
    let mut store = shared.store();
    let rt = served(&store, rp, path)?;
    let mut floor = 0;
    if expire {
        let _ = tx.send(WatchItem::Error(ApiError::expired(format!(
            "too old resource version: {rv} (injected fault)"
        ))));
    } else {
        let start = match (send_initial, rv) {
            (Some("true"), _) => WatchStart::Current,
            (Some("false"), "" | "0") => WatchStart::After(store.current_rv()),
            (_, "" | "0") => WatchStart::Current,
            (_, rv) => WatchStart::After(rv.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid resourceVersion {rv:?}: must be an unsigned 64-bit integer"
                ))
            })?),
        };
        if let WatchStart::After(after) = start {
            floor = after;
        }
        let initial_end = send_initial == Some("true") && bookmarks;
        store.watch(&rt, filter, start, initial_end, tx.clone());
    }
    drop(store);
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0);
    let interval = shared.bookmark_interval.max(Duration::from_millis(1));
    let stream = WatchStream {
        shared: shared.clone(),
        rt,
        rx,
        tx,
        floor,
        bookmarks: bookmarks.then(|| {
            let mut i = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        }),
        deadline: timeout.map(|t| tokio::time::Instant::now() + Duration::from_secs(t)),
        shutdown: shared.shutdown.clone(),
        done: false,
    };
    let body = futures::stream::unfold(stream, |mut s| async move {
        s.next_line()
            .await
            .map(|line| (Ok::<_, Infallible>(line), s))
    });
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

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

async fn admin(shared: &Arc<Shared>, what: &str, req: Request) -> Result<Response, ApiError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn res(ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>) -> Target {
        Target::Resource(ResourcePath {
            group: String::new(),
            version: "v1".into(),
            namespace: ns.map(Into::into),
            plural: plural.into(),
            name: name.map(Into::into),
            sub: sub.map(Into::into),
            legacy_watch: false,
        })
    }

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("/api/v1/pods"),
            Some(res(None, "pods", None, None))
        );
        assert_eq!(
            parse_path("/api/v1/namespaces/a/pods/b/status"),
            Some(res(Some("a"), "pods", Some("b"), Some("status")))
        );
        assert_eq!(
            parse_path("/api/v1/namespaces/a"),
            Some(res(None, "namespaces", Some("a"), None))
        );
        assert_eq!(
            parse_path("/api/v1/namespaces/a/status"),
            Some(res(None, "namespaces", Some("a"), Some("status")))
        );
        assert_eq!(
            parse_path("/apis/example.com/v1"),
            Some(Target::ResourceList("example.com".into(), "v1".into()))
        );
        assert_eq!(parse_path("/api/v1/namespaces/a/pods/b/status/x"), None);
        assert_eq!(parse_path("/openapi/v2"), None);
    }
}
