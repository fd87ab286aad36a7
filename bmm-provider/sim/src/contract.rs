//! A contract-checking proxy: put it between a BMM client and a BMM API server (the simulator)
//! and it checks every request and every response against `api/openapi.yaml`, so a test of a
//! client proves the client speaks the published API, and a test of the simulator proves the
//! simulator answers as the API says, without either trusting the other.
//!
//! What it checks: the path is an operation of the document; a request body matches the
//! operation's request schema; a response matches the schema declared for its status, an
//! undeclared error status (the platform answers 401, 404, 429, 5xx where the document does
//! not say so) carries a `CarbideAPIError`, a status without a declared body has none, and a
//! successful list has `X-Pagination`. Problems are recorded, never answered, so the caller
//! sees exactly what the server said.

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::openapi;

/// Statuses the platform answers that the document does not declare for an operation; their
/// bodies must still be `CarbideAPIError`s.
const UNDECLARED_ERRORS: &[u16] = &[400, 401, 403, 404, 409, 429, 502, 503, 504];

/// A running proxy in front of one server.
pub struct ContractProxy {
    url: String,
    record: Arc<Record>,
}

/// What the proxy saw, shared with its handler.
#[derive(Default)]
struct Record {
    /// Broken rules, one line each (`request POST vpc: …`).
    violations: Mutex<Vec<String>>,
    /// `METHOD template` of every operation forwarded.
    operations: Mutex<Vec<String>>,
    /// `(operation, signal)`: once the server has answered the next such operation, the
    /// signal fires and the answer is held back forever (the caller "crashed" before it saw
    /// it).
    crash: Mutex<Option<(String, oneshot::Sender<()>)>>,
}

/// The state of the proxy's handler.
struct Proxy {
    target: String,
    http: reqwest::Client,
    record: Arc<Record>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ContractProxy {
    /// Starts a proxy on a free loopback port that forwards to `target`
    /// (`http://127.0.0.1:8099`), serving until the runtime stops.
    pub async fn start(target: &str) -> std::io::Result<ContractProxy> {
        let record = Arc::new(Record::default());
        let proxy = Proxy {
            target: target.trim_end_matches('/').to_string(),
            http: reqwest::Client::new(),
            record: record.clone(),
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(Arc::new(proxy));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(ContractProxy { url, record })
    }

    /// The proxy's address: point clients here.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every broken rule so far, one line each naming the operation and the problem.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.record.violations).clone()
    }

    /// `METHOD template` (`POST instance`) of every operation forwarded so far, in order.
    pub fn operations_seen(&self) -> Vec<String> {
        lock(&self.record.operations).clone()
    }

    /// After the server answers the next `operation` (`"POST instance"`), the returned signal
    /// fires and the answer is held back forever: a caller that crashed after the server acted.
    pub fn crash_after(&self, operation: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        *lock(&self.record.crash) = Some((operation.to_string(), tx));
        rx
    }
}

/// The document's path template (`instance/{instanceId}`) matching a concrete path below the
/// base path (`instance/4f…`): the one with the most literal segments.
pub fn template_for(rest: &str) -> Option<String> {
    let paths = openapi::document().ok()?.get("paths")?.as_object()?;
    let segments: Vec<&str> = rest.split('/').collect();
    let mut best: Option<(usize, String)> = None;
    for key in paths.keys() {
        let Some(t) = key.strip_prefix("/v2/org/{org}/carbide/") else {
            continue;
        };
        let ts: Vec<&str> = t.split('/').collect();
        if ts.len() != segments.len() {
            continue;
        }
        let mut literal = 0;
        let fits = ts.iter().zip(&segments).all(|(t, s)| {
            if t.starts_with('{') {
                true
            } else {
                literal += 1;
                t == s
            }
        });
        if fits && best.as_ref().is_none_or(|(l, _)| literal > *l) {
            best = Some((literal, t.to_string()));
        }
    }
    best.map(|(_, t)| t)
}

impl Record {
    fn violation(&self, line: String) {
        lock(&self.violations).push(line);
    }

    /// Records what `instance` breaks of `schema`, as `what: problem; problem`.
    fn check(&self, what: &str, schema: &Value, instance: &Value) {
        match openapi::violations(schema, instance) {
            Ok(problems) if problems.is_empty() => {}
            Ok(problems) => self.violation(format!("{what}: {}", problems.join("; "))),
            Err(e) => self.violation(format!("{what}: {e}")),
        }
    }

    /// Checks a request body against operation `m` (lower-case method) `t` (template).
    fn check_request(&self, m: &str, t: &str, body: &[u8]) {
        let what = format!("request {} {t}", m.to_ascii_uppercase());
        match (
            serde_json::from_slice::<Value>(body),
            openapi::request_schema(m, t),
        ) {
            (Ok(v), Ok(schema)) => self.check(&what, schema, &v),
            (Err(e), _) => self.violation(format!("{what}: not JSON: {e}")),
            (_, Err(_)) if m == "delete" => {}
            (_, Err(e)) => self.violation(format!("{what}: {e}")),
        }
    }

    /// Checks an answer with `status`, `body` and whether it had `X-Pagination`.
    fn check_response(&self, m: &str, t: &str, status: u16, body: &[u8], paged: bool) {
        let what = format!("response {status} to {} {t}", m.to_ascii_uppercase());
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        match openapi::response_schema(m, t, status) {
            Ok(Some(schema)) => match &parsed {
                Some(v) => self.check(&what, schema, v),
                None => self.violation(format!("{what}: body missing or not JSON")),
            },
            Ok(None) if !body.is_empty() => {
                self.violation(format!("{what}: the spec declares no body"));
            }
            Ok(None) => {}
            Err(_) if UNDECLARED_ERRORS.contains(&status) => match &parsed {
                Some(v) => self.check(&what, &openapi::component("CarbideAPIError"), v),
                None => self.violation(format!("{what}: error without a CarbideAPIError body")),
            },
            Err(e) => self.violation(format!("{what}: {e}")),
        }
        let list = parsed.as_ref().is_some_and(Value::is_array);
        if (200..300).contains(&status) && m == "get" && list && !paged {
            self.violation(format!("{what}: list without X-Pagination"));
        }
    }

    /// Whether the answer to `operation` is the one to hold back; fires the signal if so.
    fn crashes_on(&self, operation: &str) -> bool {
        let mut crash = lock(&self.crash);
        match crash.take() {
            Some((op, tx)) if op == operation => {
                let _ = tx.send(());
                true
            }
            other => {
                *crash = other;
                false
            }
        }
    }
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body: Bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let method = parts.method;
    let path = parts.uri.path().to_string();
    let rest = path.splitn(6, '/').nth(5).unwrap_or_default();
    let template = template_for(rest);
    let m = method.as_str().to_ascii_lowercase();
    let record = &proxy.record;
    match &template {
        None => record.violation(format!("{method} {path}: not an operation of openapi.yaml")),
        Some(t) => {
            lock(&record.operations).push(format!("{method} {t}"));
            if !body.is_empty() {
                record.check_request(&m, t, &body);
            }
        }
    }
    let url = format!(
        "{}{}",
        proxy.target,
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut forwarded = proxy.http.request(method.clone(), &url).body(body);
    for (k, v) in &parts.headers {
        if k != http::header::HOST && k != http::header::CONTENT_LENGTH {
            forwarded = forwarded.header(k, v);
        }
    }
    let answer = match forwarded.send().await {
        Ok(a) => a,
        Err(e) => return (http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    if let Some(t) = &template
        && record.crashes_on(&format!("{method} {t}"))
    {
        std::future::pending::<()>().await;
    }
    let status = answer.status();
    let paging = answer.headers().get("X-Pagination").cloned();
    let retry_after = answer.headers().get(http::header::RETRY_AFTER).cloned();
    let bytes = answer.bytes().await.unwrap_or_default();
    if let Some(t) = &template {
        record.check_response(&m, t, status.as_u16(), &bytes, paging.is_some());
    }
    let mut response = (status, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Some(p) = paging {
        headers.insert("X-Pagination", p);
    }
    if let Some(r) = retry_after {
        headers.insert(http::header::RETRY_AFTER, r);
    }
    response
}
