//! The simulator's HTTP surface: routes, request validation, auth, faults, paging.

use std::collections::HashMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use crate::Sim;
use crate::metrics::{KindLabel, RequestLabel};
use crate::openapi;
use crate::world::{Kind, Refusal, World};

type Params = Query<HashMap<String, String>>;

fn error(status: u16, message: impl Into<String>, data: Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        axum::Json(json!({"source": "carbide", "message": message.into(), "data": data})),
    )
        .into_response()
}

fn refusal(r: Refusal) -> Response {
    error(r.status, r.message, r.data)
}

fn fail(status: u16, message: impl Into<String>, data: Value) -> Refusal {
    Refusal {
        status,
        message: message.into(),
        data,
    }
}

fn ok(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn with_world<T>(sim: &Sim, f: impl FnOnce(&mut World) -> T) -> Result<T, Refusal> {
    let mut world = sim.world.lock().map_err(|_| Refusal {
        status: 500,
        message: "Error handling API request".into(),
        data: Value::Null,
    })?;
    world.advance();
    Ok(f(&mut world))
}

/// Parses and validates a request body against the operation's schema in `openapi.yaml`.
fn body_for(method: &str, path: &str, bytes: &Bytes) -> Result<Map<String, Value>, Refusal> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        fail(
            400,
            format!("Error validating request data: body is not JSON: {e}"),
            Value::Null,
        )
    })?;
    let schema =
        openapi::request_schema(method, path).map_err(|e| fail(500, e.to_string(), Value::Null))?;
    let problems =
        openapi::violations(schema, &value).map_err(|e| fail(500, e.to_string(), Value::Null))?;
    if !problems.is_empty() {
        let data: Map<String, Value> = problems
            .iter()
            .map(|p| {
                let (at, what) = p.split_once(": ").unwrap_or(("", p));
                (
                    if at.is_empty() {
                        "body".to_string()
                    } else {
                        at.trim_start_matches('/').replace('/', ".")
                    },
                    json!(what),
                )
            })
            .collect();
        return Err(fail(
            400,
            "Error validating request data",
            Value::Object(data),
        ));
    }
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(fail(
            400,
            "Error validating request data: body must be an object",
            Value::Null,
        )),
    }
}

const UUID_FILTERS: &[&str] = &["siteId", "vpcId", "instanceTypeId", "tenantId"];
const EXACT_FILTERS: &[&str] = &[
    "siteId",
    "vpcId",
    "instanceTypeId",
    "tenantId",
    "status",
    "name",
    "machineId",
    "networkSecurityGroupId",
];

/// A list request's paging and filters, as the API reads them.
struct ListQuery<'a> {
    number: u64,
    size: u64,
    params: &'a HashMap<String, String>,
    query: Option<String>,
    has_instance: Option<bool>,
}

impl<'a> ListQuery<'a> {
    /// Reads the paging and filters; a 400 refusal when they are invalid.
    fn read(params: &'a HashMap<String, String>) -> Result<ListQuery<'a>, Refusal> {
        let number = match params.get("pageNumber").map(|v| v.parse::<u64>()) {
            None => 1,
            Some(Ok(n)) if n >= 1 => n,
            Some(_) => {
                return Err(fail(
                    400,
                    "Error validating request data",
                    json!({"pageNumber": "must be an integer >= 1"}),
                ));
            }
        };
        let size = match params.get("pageSize").map(|v| v.parse::<u64>()) {
            None => 20,
            Some(Ok(n)) if (1..=100).contains(&n) => n,
            Some(_) => {
                return Err(fail(
                    400,
                    "Error validating request data",
                    json!({"pageSize": "must be an integer from 1 to 100"}),
                ));
            }
        };
        for key in UUID_FILTERS {
            if let Some(v) = params.get(*key)
                && uuid::Uuid::parse_str(v).is_err()
            {
                return Err(fail(
                    400,
                    "Error validating request data",
                    json!({*key: "must be a UUID"}),
                ));
            }
        }
        Ok(ListQuery {
            number,
            size,
            params,
            query: params.get("query").map(|q| q.to_lowercase()),
            has_instance: params.get("hasInstance").map(|v| v == "true"),
        })
    }

    /// Whether an item passes the filters.
    fn matches(&self, item: &Map<String, Value>) -> bool {
        let exact = EXACT_FILTERS.iter().all(|key| match self.params.get(*key) {
            Some(want) => item.get(*key).and_then(Value::as_str) == Some(want.as_str()),
            None => true,
        });
        let text = |k: &str| {
            item.get(k)
                .and_then(Value::as_str)
                .map(str::to_lowercase)
                .unwrap_or_default()
        };
        let query = match &self.query {
            Some(q) => {
                text("name").contains(q.as_str())
                    || text("status") == *q
                    || item
                        .get("labels")
                        .and_then(Value::as_object)
                        .is_some_and(|l| {
                            l.values().any(|v| {
                                v.as_str()
                                    .is_some_and(|s| s.to_lowercase().contains(q.as_str()))
                            })
                        })
            }
            None => true,
        };
        let has_instance = match self.has_instance {
            Some(want) => item.get("instanceId").is_some_and(|v| !v.is_null()) == want,
            None => true,
        };
        exact && query && has_instance
    }

    /// The page of the matching items, with the `X-Pagination` header.
    fn page(&self, matching: Vec<Value>) -> Response {
        let total = matching.len();
        let start = ((self.number - 1) * self.size) as usize;
        let slice: Vec<Value> = matching
            .into_iter()
            .skip(start)
            .take(self.size as usize)
            .collect();
        let header = json!({"pageNumber": self.number, "pageSize": self.size, "total": total, "orderBy": "CREATED_ASC"})
            .to_string();
        let mut response = ok(StatusCode::OK, Value::Array(slice));
        if let Ok(v) = HeaderValue::from_str(&header) {
            response.headers_mut().insert("X-Pagination", v);
        }
        response
    }
}

/// Filters and pages a list as the API does.
fn page(items: Vec<Value>, params: &HashMap<String, String>) -> Response {
    let query = match ListQuery::read(params) {
        Ok(q) => q,
        Err(r) => return refusal(r),
    };
    let matching = items
        .into_iter()
        .filter(|item| item.as_object().is_some_and(|o| query.matches(o)))
        .collect();
    query.page(matching)
}

fn tenant_id(world: &mut World, org: &str) -> String {
    world.tenant(org)["id"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn create(sim: Sim, kind: Kind, org: String, bytes: Bytes) -> Response {
    let path = kind.label();
    let body = match body_for("post", path, &bytes) {
        Ok(b) => b,
        Err(r) => return refusal(r),
    };
    let result = with_world(&sim, |w| {
        let tenant = tenant_id(w, &org);
        match kind {
            Kind::IpBlock => w.create_ip_block(&tenant, &body),
            Kind::Vpc => w.create_vpc(&org, &tenant, &body),
            Kind::Subnet => w.create_subnet(&tenant, &body),
            Kind::Nsg => w.create_nsg(&tenant, &body),
            Kind::Instance => w.create_instance(&tenant, &body),
        }
    });
    match result {
        Err(r) => refusal(r),
        Ok(Err(r)) => refusal(r),
        Ok(Ok(created)) => {
            sim.metrics
                .created
                .get_or_create(&KindLabel {
                    kind: kind.label().into(),
                })
                .inc();
            if sim.config.lost_response_rate > 0.0
                && fastrand::f64() < sim.config.lost_response_rate
            {
                sim.metrics.faults.inc();
                return error(503, "Service temporarily unavailable", Value::Null);
            }
            ok(StatusCode::CREATED, created)
        }
    }
}

async fn list(sim: Sim, kind: Kind, org: String, params: HashMap<String, String>) -> Response {
    let query = match ListQuery::read(&params) {
        Ok(q) => q,
        Err(r) => return refusal(r),
    };
    // Filtered under the lock, so only the matching objects are copied.
    match with_world(&sim, |w| {
        let tenant = tenant_id(w, &org);
        w.list_matching(kind, |o| {
            o.get("tenantId").and_then(Value::as_str) == Some(tenant.as_str()) && query.matches(o)
        })
    }) {
        Ok(items) => query.page(items),
        Err(r) => refusal(r),
    }
}

/// Runs `f` once the object `id` of `kind` is known not to belong to another org than `org`
/// (403 otherwise).
fn with_owned<T>(
    sim: &Sim,
    (kind, org, id): (Kind, &str, &str),
    f: impl FnOnce(&mut World) -> T,
) -> Result<T, Refusal> {
    with_world(sim, |w| {
        w.check_owner(kind, id, org)?;
        Ok(f(w))
    })?
}

async fn fetch(sim: Sim, kind: Kind, org: String, id: String) -> Response {
    match with_owned(&sim, (kind, &org, &id), |w| w.get(kind, &id)) {
        Ok(Some(v)) => ok(StatusCode::OK, v),
        Ok(None) => refusal(Refusal::not_found()),
        Err(r) => refusal(r),
    }
}

async fn remove(sim: Sim, kind: Kind, org: String, id: String) -> Response {
    match with_owned(&sim, (kind, &org, &id), |w| w.delete(kind, &id)) {
        Ok(Ok(status)) => StatusCode::from_u16(status)
            .unwrap_or(StatusCode::ACCEPTED)
            .into_response(),
        Ok(Err(r)) => refusal(r),
        Err(r) => refusal(r),
    }
}

fn api(rest: &str) -> String {
    format!("/v2/org/{{org}}/carbide/{rest}")
}

macro_rules! kind_routes {
    ($router:expr, $kind:expr, $path:literal, $id:literal) => {
        $router
            .route(
                &api($path),
                get(
                    |State(s): State<Sim>, Path(org): Path<String>, Query(q): Params| async move {
                        list(s, $kind, org, q).await
                    },
                )
                .post(
                    |State(s): State<Sim>, Path(org): Path<String>, b: Bytes| async move {
                        create(s, $kind, org, b).await
                    },
                ),
            )
            .route(
                &api(concat!($path, "/{", $id, "}")),
                get(
                    |State(s): State<Sim>, Path((org, id)): Path<(String, String)>| async move {
                        fetch(s, $kind, org, id).await
                    },
                )
                .delete(
                    |State(s): State<Sim>, Path((org, id)): Path<(String, String)>| async move {
                        remove(s, $kind, org, id).await
                    },
                ),
            )
    };
}

/// The simulator's router.
pub fn router(sim: Sim) -> Router {
    let mut r: Router<Sim> = Router::new();
    r = kind_routes!(r, Kind::IpBlock, "ipblock", "ipBlockId");
    r = kind_routes!(r, Kind::Subnet, "subnet", "subnetId");
    r = kind_routes!(
        r,
        Kind::Nsg,
        "network-security-group",
        "networkSecurityGroupId"
    );
    r = kind_routes!(r, Kind::Instance, "instance", "instanceId");
    r = r.route(
        &api("instance/{instanceId}"),
        axum::routing::patch(
            |State(s): State<Sim>, Path((org, id)): Path<(String, String)>, b: Bytes| async move {
                update(&s, "instance/{instanceId}", &b, |w, body| {
                    w.check_owner(Kind::Instance, &id, &org)?;
                    w.update_instance(&id, body)
                })
            },
        ),
    );
    r = power_routes(r);
    r = r
        .route(
            &api("vpc"),
            get(|State(s): State<Sim>, Path(org): Path<String>, Query(q): Params| async move { list(s, Kind::Vpc, org, q).await })
                .post(|State(s): State<Sim>, Path(org): Path<String>, b: Bytes| async move { create(s, Kind::Vpc, org, b).await }),
        )
        .route(
            &api("vpc/{vpcId}"),
            get(|State(s): State<Sim>, Path((org, id)): Path<(String, String)>| async move { fetch(s, Kind::Vpc, org, id).await })
                .delete(|State(s): State<Sim>, Path((org, id)): Path<(String, String)>| async move { remove(s, Kind::Vpc, org, id).await })
                .patch(|State(s): State<Sim>, Path((org, id)): Path<(String, String)>, b: Bytes| async move {
                    let body = match body_for("patch", "vpc/{vpcId}", &b) {
                        Ok(b) => b,
                        Err(r) => return refusal(r),
                    };
                    match with_owned(&s, (Kind::Vpc, &org, &id), |w| w.update_vpc(&id, &body)) {
                        Ok(Ok(v)) => ok(StatusCode::OK, v),
                        Ok(Err(e)) => refusal(e),
                        Err(r) => refusal(r),
                    }
                }),
        )
        .route(
            &api("tenant/current"),
            get(|State(s): State<Sim>, Path(org): Path<String>| async move {
                match with_world(&s, |w| w.tenant(&org)) {
                    Ok(t) => ok(StatusCode::OK, t),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("site"),
            get(|State(s): State<Sim>, Query(q): Params| async move {
                match with_world(&s, |w| vec![w.site.clone()]) {
                    Ok(items) => page(items, &q),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("site/{siteId}"),
            get(|State(s): State<Sim>, Path((_o, id)): Path<(String, String)>| async move {
                match with_world(&s, |w| (w.site["id"].as_str() == Some(id.as_str())).then(|| w.site.clone())) {
                    Ok(Some(site)) => ok(StatusCode::OK, site),
                    Ok(None) => refusal(Refusal::not_found()),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("instance/type"),
            get(|State(s): State<Sim>, Query(q): Params| async move {
                match with_world(&s, |w| vec![w.instance_type.clone()]) {
                    Ok(items) => page(items, &q),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("instance/{instanceId}/status-history"),
            get(|State(s): State<Sim>, Path((org, id)): Path<(String, String)>, Query(q): Params| async move {
                match with_owned(&s, (Kind::Instance, &org, &id), |w| w.get(Kind::Instance, &id)) {
                    Ok(Some(i)) => page(i["statusHistory"].as_array().cloned().unwrap_or_default(), &q),
                    Ok(None) => refusal(Refusal::not_found()),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("instance/{instanceId}/interface"),
            get(|State(s): State<Sim>, Path((org, id)): Path<(String, String)>, Query(q): Params| async move {
                match with_owned(&s, (Kind::Instance, &org, &id), |w| w.get(Kind::Instance, &id)) {
                    Ok(Some(i)) => page(i["interfaces"].as_array().cloned().unwrap_or_default(), &q),
                    Ok(None) => refusal(Refusal::not_found()),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("machine"),
            get(|State(s): State<Sim>, Query(q): Params| async move {
                match with_world(&s, |w| w.machines()) {
                    Ok(items) => page(items, &q),
                    Err(r) => refusal(r),
                }
            }),
        )
        .route(
            &api("machine/{machineId}"),
            get(|State(s): State<Sim>, Path((_o, id)): Path<(String, String)>| async move {
                match with_world(&s, |w| w.machines().into_iter().find(|m| m["id"].as_str() == Some(id.as_str()))) {
                    Ok(Some(m)) => ok(StatusCode::OK, m),
                    Ok(None) => refusal(Refusal::not_found()),
                    Err(r) => refusal(r),
                }
            }),
        );
    // Every path but /metrics is authorised before it is routed: an unserved operation is a
    // 401 without a valid token, as on the platform.
    let guarded = r
        .fallback(|| async {
            error(
                404,
                "Could not find resource with specified path",
                Value::Null,
            )
        })
        .layer(middleware::from_fn_with_state(sim.clone(), guard));
    guarded
        .route(
            "/metrics",
            get(|State(s): State<Sim>| async move { s.metrics.encode() }),
        )
        .with_state(sim)
}

/// Validates a PATCH body and applies it; 200 with what `apply` answers.
fn update(
    sim: &Sim,
    path: &str,
    bytes: &Bytes,
    apply: impl FnOnce(&mut World, &Map<String, Value>) -> Result<Value, Refusal>,
) -> Response {
    let body = match body_for("patch", path, bytes) {
        Ok(b) => b,
        Err(r) => return refusal(r),
    };
    match with_world(sim, |w| apply(w, &body)) {
        Ok(Ok(v)) => ok(StatusCode::OK, v),
        Ok(Err(e)) | Err(e) => refusal(e),
    }
}

/// `GET tray` (its `siteId` required; `type`, `componentId` and `name` filter), `GET
/// tray/{id}` and `PATCH tray/{id}/power`.
fn power_routes(r: Router<Sim>) -> Router<Sim> {
    r.route(
        &api("tray"),
        get(|State(s): State<Sim>, Query(q): Params| async move {
            let site = match q.get("siteId") {
                Some(site) => site.clone(),
                None => {
                    return error(
                        400,
                        "Error validating request data",
                        json!({"siteId": "A value is required"}),
                    );
                }
            };
            let mut rest = q.clone();
            rest.remove("siteId");
            let filter = |t: &Value, key: &str| match q.get(key) {
                Some(want) => t[key].as_str() == Some(want.as_str()),
                None => true,
            };
            match with_world(&s, |w| {
                (w.site_id() == site).then(|| {
                    w.trays()
                        .into_iter()
                        .filter(|t| filter(t, "type") && filter(t, "componentId"))
                        .collect::<Vec<_>>()
                })
            }) {
                Ok(Some(trays)) => page(trays, &rest),
                Ok(None) => error(
                    400,
                    format!("Site {site} does not exist"),
                    json!({"siteId": "unknown site"}),
                ),
                Err(r) => refusal(r),
            }
        }),
    )
    .route(
        &api("tray/{id}"),
        get(
            |State(s): State<Sim>, Path((_o, id)): Path<(String, String)>| async move {
                match with_world(&s, |w| {
                    w.trays()
                        .into_iter()
                        .find(|t| t["id"].as_str() == Some(id.as_str()))
                }) {
                    Ok(Some(t)) => ok(StatusCode::OK, t),
                    Ok(None) => refusal(Refusal::not_found()),
                    Err(r) => refusal(r),
                }
            },
        ),
    )
    .route(
        &api("tray/{id}/power"),
        axum::routing::patch(
            |State(s): State<Sim>, Path((_o, id)): Path<(String, String)>, b: Bytes| async move {
                update(&s, "tray/{id}/power", &b, |w, body| {
                    w.set_tray_power(&id, body)
                })
            },
        ),
    )
}

/// The route of a request path, ids replaced: `/v2/org/o/carbide/instance/<uuid>` →
/// `instance/{id}`.
fn route_of(path: &str) -> String {
    let rest = path
        .strip_prefix("/v2/org/")
        .and_then(|p| p.split_once('/'))
        .and_then(|(_, p)| p.strip_prefix("carbide/"))
        .unwrap_or(path);
    rest.split('/')
        .enumerate()
        .map(|(i, segment)| match segment {
            "type" | "status-history" | "interface" | "current" | "power" => segment,
            _ if i > 0 => "{id}",
            _ => segment,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// An injected fault; a 429 or 503 carries `Retry-After` when the simulator is set to send it.
fn injected(sim: &Sim, status: u16) -> Response {
    let mut response = error(status, "Injected fault", Value::Null);
    if let Some(wait) = sim.config.retry_after
        && matches!(status, 429 | 503)
    {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// A request being answered: it leaves the in-flight gauge when dropped, also when the client
/// goes away before the answer.
struct Answering(prometheus_client::metrics::gauge::Gauge);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Latency, injected faults and the bearer check, in that order; counts the answer.
async fn guard(State(sim): State<Sim>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    sim.metrics
        .count_path(&format!("{method} {}", route_of(request.uri().path())));
    sim.metrics.in_flight.inc();
    let _answering = Answering(sim.metrics.in_flight.clone());
    let response = guarded(&sim, request, next).await;
    sim.metrics
        .requests
        .get_or_create(&RequestLabel {
            method: method.to_string(),
            status: response.status().as_u16().to_string(),
        })
        .inc();
    sim.metrics.answered.inc();
    response
}

async fn guarded(sim: &Sim, request: Request, next: Next) -> Response {
    if !sim.config.latency.is_zero() {
        tokio::time::sleep(sim.config.latency).await;
    }
    if let Some(status) = sim.take_refused() {
        sim.metrics.faults.inc();
        return injected(sim, status);
    }
    if sim.config.fault_rate > 0.0 && fastrand::f64() < sim.config.fault_rate {
        sim.metrics.faults.inc();
        return injected(sim, [429u16, 502, 503, 504][fastrand::usize(0..4)]);
    }
    // The org as the handlers see it: percent-decoded (`acm%65` is `acme`).
    let Some(org) = request
        .uri()
        .path()
        .split('/')
        .nth(3)
        .map_or(Some(String::new()), crate::auth::percent_decode)
    else {
        return error(400, "Invalid org in path", Value::Null);
    };
    let header = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok());
    match crate::auth::check(&sim.config.jwt_secret, header, &org) {
        Ok(_) => {}
        Err(e @ crate::auth::TokenError::WrongOrg { .. }) => {
            return error(
                403,
                format!("User is not allowed to perform this action: {e}"),
                Value::Null,
            );
        }
        Err(e) => return error(401, format!("Unauthorized: {e}"), Value::Null),
    }
    if request.method() == Method::OPTIONS {
        return StatusCode::NO_CONTENT.into_response();
    }
    next.run(request).await
}
