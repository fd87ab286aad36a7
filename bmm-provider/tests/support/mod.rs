//! Test support: a simulator on a free port and a contract proxy in front of it that checks
//! every request and response against `openapi.yaml`.

#![allow(dead_code)]

pub mod capi;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use nephrite_bmm_provider::client::{BmmClient, ClientConfig, RetryPolicy, Token};
use nephrite_bmm_provider::openapi;
use nephrite_bmm_provider::sim::{Sim, SimConfig, auth};
use serde_json::Value;

pub const ORG: &str = "acme";
pub const SECRET: &str = "test-secret";

/// A running simulator behind a contract-checking proxy.
pub struct Harness {
    pub sim: Sim,
    /// The simulator's own address.
    pub sim_url: String,
    /// The proxy's address: point clients here.
    pub url: String,
    pub violations: Arc<Mutex<Vec<String>>>,
    pub operations: Arc<Mutex<Vec<String>>>,
    crash: Crash,
}

/// A contract-checking proxy in front of a simulator.
pub struct Front {
    /// Point clients here.
    pub url: String,
    pub violations: Arc<Mutex<Vec<String>>>,
    pub operations: Arc<Mutex<Vec<String>>>,
    crash: Crash,
}

impl Front {
    async fn start(target: &str) -> Front {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let operations = Arc::new(Mutex::new(Vec::new()));
        let crash: Crash = Arc::new(Mutex::new(None));
        let proxy = Proxy {
            target: target.to_string(),
            http: reqwest::Client::new(),
            violations: violations.clone(),
            operations: operations.clone(),
            crash: crash.clone(),
        };
        let app = axum::Router::new()
            .fallback(forward)
            .with_state(Arc::new(proxy));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Front {
            url,
            violations,
            operations,
            crash,
        }
    }

    /// Operations this proxy forwarded.
    pub fn operations_seen(&self) -> Vec<String> {
        self.operations.lock().expect("lock").clone()
    }

    /// Fails the test if a request or response through this proxy broke the contract.
    pub fn assert_contract_held(&self) {
        let v = self.violations.lock().expect("lock");
        assert!(v.is_empty(), "contract violations:\n{}", v.join("\n"));
    }
}

/// `(operation, signal)`: after the simulator has processed the next such operation, the signal
/// fires and the answer never comes (the caller "crashed" before it saw it).
type Crash = Arc<Mutex<Option<(String, tokio::sync::oneshot::Sender<()>)>>>;

pub fn fast_config() -> SimConfig {
    SimConfig {
        jwt_secret: SECRET.into(),
        provision_delay: Duration::from_millis(300),
        network_delay: Duration::from_millis(100),
        ..SimConfig::default()
    }
}

pub fn token() -> Token {
    let now = jiff::Timestamp::now().as_second() as u64;
    Token::new(auth::issue(SECRET, ORG, now, Duration::from_secs(3600)).expect("token"))
}

pub fn client(url: &str) -> BmmClient {
    let mut config = ClientConfig::new(url, ORG, token());
    config.retry = RetryPolicy {
        max_attempts: 12,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(50),
    };
    config.timeout = Duration::from_secs(10);
    BmmClient::new(config).expect("client")
}

impl Harness {
    pub async fn start(config: SimConfig) -> Harness {
        let sim = Sim::new(config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let sim_url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(sim.clone().serve(listener, std::future::pending()));
        let front = Front::start(&sim_url).await;
        Harness {
            sim,
            sim_url,
            url: front.url,
            violations: front.violations,
            operations: front.operations,
            crash: front.crash,
        }
    }

    /// Another contract-checking proxy in front of the same simulator (to tell apart who
    /// called); its violations are not part of [`Harness::assert_contract_held`].
    pub async fn front(&self) -> Front {
        Front::start(&self.sim_url).await
    }

    /// After the simulator processes the next `operation` (`"POST instance"`), the returned
    /// signal fires and the answer is held back forever.
    pub fn crash_after(&self, operation: &str) -> tokio::sync::oneshot::Receiver<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *self.crash.lock().expect("lock") = Some((operation.to_string(), tx));
        rx
    }

    pub fn client(&self) -> BmmClient {
        client(&self.url)
    }

    /// Fails the test if any request or response broke the contract.
    pub fn assert_contract_held(&self) {
        let v = self.violations.lock().expect("lock");
        assert!(v.is_empty(), "contract violations:\n{}", v.join("\n"));
    }

    pub fn operations_seen(&self) -> Vec<String> {
        self.operations.lock().expect("lock").clone()
    }
}

struct Proxy {
    target: String,
    http: reqwest::Client,
    violations: Arc<Mutex<Vec<String>>>,
    operations: Arc<Mutex<Vec<String>>>,
    crash: Crash,
}

/// Statuses the platform answers that the spec does not declare for an operation; their bodies
/// must still be `CarbideAPIError`s.
const UNDECLARED_ERRORS: &[u16] = &[400, 401, 403, 404, 409, 429, 502, 503, 504];

/// The spec's path template matching a concrete path below the base path.
pub fn template_for(rest: &str) -> Option<String> {
    let doc = openapi::document().ok()?;
    let paths = doc.get("paths")?.as_object()?;
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

fn check(violations: &Mutex<Vec<String>>, what: String, schema: &Value, instance: &Value) {
    match openapi::violations(schema, instance) {
        Ok(problems) if problems.is_empty() => {}
        Ok(problems) => violations
            .lock()
            .expect("lock")
            .push(format!("{what}: {}", problems.join("; "))),
        Err(e) => violations
            .lock()
            .expect("lock")
            .push(format!("{what}: {e}")),
    }
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let headers = request.headers().clone();
    let body: Bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let path = uri.path().to_string();
    let rest = path.splitn(6, '/').nth(5).unwrap_or_default().to_string();
    let template = template_for(&rest);
    let m = method.as_str().to_ascii_lowercase();
    match &template {
        None => proxy
            .violations
            .lock()
            .expect("lock")
            .push(format!("{method} {path}: not an operation of openapi.yaml")),
        Some(t) => {
            proxy
                .operations
                .lock()
                .expect("lock")
                .push(format!("{} {t}", method.as_str()));
            if !body.is_empty() {
                match (
                    serde_json::from_slice::<Value>(&body),
                    openapi::request_schema(&m, t),
                ) {
                    (Ok(v), Ok(schema)) => check(
                        &proxy.violations,
                        format!("request {method} {t}"),
                        schema,
                        &v,
                    ),
                    (Err(e), _) => proxy
                        .violations
                        .lock()
                        .expect("lock")
                        .push(format!("request {method} {t}: not JSON: {e}")),
                    (_, Err(_)) if m == "delete" => {}
                    (_, Err(e)) => proxy
                        .violations
                        .lock()
                        .expect("lock")
                        .push(format!("request {method} {t}: {e}")),
                }
            }
        }
    }
    let url = format!(
        "{}{}",
        proxy.target,
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
    );
    let mut forwarded = proxy.http.request(method.clone(), &url).body(body.to_vec());
    for (k, v) in headers.iter() {
        if k != http::header::HOST && k != http::header::CONTENT_LENGTH {
            forwarded = forwarded.header(k, v);
        }
    }
    let answer = match forwarded.send().await {
        Ok(a) => a,
        Err(e) => return (http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let crashed = {
        let mut crash = proxy.crash.lock().expect("lock");
        match (crash.take(), &template) {
            (Some((op, tx)), Some(t)) if op == format!("{} {t}", method.as_str()) => Some(tx),
            (other, _) => {
                *crash = other;
                None
            }
        }
    };
    if let Some(tx) = crashed {
        let _ = tx.send(());
        std::future::pending::<()>().await;
    }
    let status = answer.status();
    let paging = answer.headers().get("X-Pagination").cloned();
    let retry_after = answer.headers().get(http::header::RETRY_AFTER).cloned();
    let bytes = answer.bytes().await.unwrap_or_default();
    if let Some(t) = &template {
        let what = format!("response {status} to {method} {t}");
        let parsed: Option<Value> = if bytes.is_empty() {
            None
        } else {
            serde_json::from_slice(&bytes).ok()
        };
        match openapi::response_schema(&m, t, status.as_u16()) {
            Ok(Some(schema)) => match &parsed {
                Some(v) => check(&proxy.violations, what.clone(), schema, v),
                None => proxy
                    .violations
                    .lock()
                    .expect("lock")
                    .push(format!("{what}: body missing or not JSON")),
            },
            Ok(None) => {
                if !bytes.is_empty() {
                    proxy
                        .violations
                        .lock()
                        .expect("lock")
                        .push(format!("{what}: the spec declares no body"));
                }
            }
            Err(_) if UNDECLARED_ERRORS.contains(&status.as_u16()) => match &parsed {
                Some(v) => check(
                    &proxy.violations,
                    what.clone(),
                    &openapi::component("CarbideAPIError"),
                    v,
                ),
                None => proxy
                    .violations
                    .lock()
                    .expect("lock")
                    .push(format!("{what}: error without a CarbideAPIError body")),
            },
            Err(e) => proxy
                .violations
                .lock()
                .expect("lock")
                .push(format!("{what}: {e}")),
        }
        if status.is_success()
            && m == "get"
            && parsed.as_ref().is_some_and(Value::is_array)
            && paging.is_none()
        {
            proxy
                .violations
                .lock()
                .expect("lock")
                .push(format!("{what}: list without X-Pagination"));
        }
    }
    let mut response = (status, bytes).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Some(p) = paging {
        response.headers_mut().insert("X-Pagination", p);
    }
    if let Some(r) = retry_after {
        response.headers_mut().insert(http::header::RETRY_AFTER, r);
    }
    response
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Ready instance named `name` in a fresh network of its own (IP block `block`/23).
pub async fn ready_instance(
    client: &BmmClient,
    name: &str,
    block: &str,
) -> nephrite_bmm_provider::client::types::Instance {
    let tenant = client.current_tenant().await.expect("tenant").id;
    let site = client
        .site_named("sim-site")
        .await
        .expect("sites")
        .expect("site")
        .id;
    let block = client
        .create_ip_block(
            &nephrite_bmm_provider::client::types::IpBlockCreateRequest {
                name: format!("{name}-block"),
                site_id: site.clone(),
                routing_type: "Datacenter Only".into(),
                prefix: block.into(),
                prefix_length: 23,
                protocol_version: "IPv4".into(),
            },
        )
        .await
        .expect("ip block");
    let vpc = client
        .create_vpc(&nephrite_bmm_provider::client::types::VpcCreateRequest {
            id: None,
            name: format!("{name}-vpc"),
            site_id: site.clone(),
            network_virtualization_type: None,
            labels: None,
        })
        .await
        .expect("vpc");
    let subnet = client
        .create_subnet(&nephrite_bmm_provider::client::types::SubnetCreateRequest {
            name: format!("{name}-net"),
            vpc_id: vpc.id.clone(),
            ipv4_block_id: block.id,
            prefix_length: 24,
        })
        .await
        .expect("subnet");
    let types = client.instance_types(&site).await.expect("types");
    let instance = client
        .create_instance(
            &nephrite_bmm_provider::client::types::InstanceCreateRequest {
                name: name.into(),
                tenant_id: tenant,
                instance_type_id: Some(types[0].id.clone()),
                machine_id: None,
                vpc_id: vpc.id,
                user_data: None,
                operating_system_id: None,
                labels: None,
                interfaces: vec![
                    nephrite_bmm_provider::client::types::InterfaceCreateRequest {
                        subnet_id: subnet.id,
                        is_physical: true,
                        virtual_function_id: None,
                    },
                ],
                ssh_key_group_ids: vec![],
                allow_unhealthy_machine: None,
            },
        )
        .await
        .expect("instance");
    eventually(Duration::from_secs(10), || async {
        client
            .instance(&instance.id)
            .await
            .ok()
            .flatten()
            .filter(|i| i.status.as_deref() == Some("Ready"))
    })
    .await
}
