//! The Gateway API conformance cases of `core/l7` (`core/l7/tests/gateway/cases/*.yaml`) with
//! real traffic: every endpoint of a case becomes an echo backend on loopback (one per
//! address, the EndpointSlices rewritten to point at them), the driver under test is started on
//! the translated objects, each request is sent over HTTP/1.1 and what the client and the echo
//! observed is checked with the case's own [`Expect::check`]. Weighted splits are counted over
//! one full cycle of the pool's weights; mirrors are the echo backends that received a copy
//! carrying the request's `x-conformance-id`.
//!
//! Requests a driver cannot serve (its [`DriverCapabilities`]) are skipped and listed; a mirror
//! a driver does not send is not expected from it. Requests told apart by listener port alone
//! are a condition of every driver here (one HTTP address serves every HTTP listener), and
//! HTTPS listeners are checked over TLS with SNI.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use nephrite_l7::SourceObject;
use nephrite_l7::gateway::capabilities::{Driver, DriverCapabilities, Feature, Served, explain};
use nephrite_l7::gateway::compiled::Protocol;
use nephrite_l7::gateway::conformance::{Case, Observed, RequestCase};
use nephrite_l7::gateway::{CompiledGateway, build};
use nephrite_l7::{Options, Pool};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

/// The request header that pairs an exchange with the copies its mirrors received.
pub const ID_HEADER: &str = "x-conformance-id";

/// Requests told apart from others by their listener port alone (every HTTP listener is served
/// on one address): case file stem → request names. The same list as `core/l7`'s model test.
pub const PORT_ONLY: &[(&str, &[&str])] = &[
    (
        "core-gateway-listener-allowed-routes",
        &[
            "the Same listener serves routes of the Gateway's namespace",
            "a route of an unlabelled namespace is refused by the Selector listener",
        ],
    ),
    (
        "core-httproute-request-redirect",
        &["without a scheme or port the listener's port is kept when it is not the default"],
    ),
    (
        "core-httproute-simple-same-namespace",
        &["another port has no listener"],
    ),
    (
        "core-gateway-https-listener",
        &[
            "a listener whose certificate is in another namespace without a grant is not programmed",
            "a certificate in another namespace with a grant serves",
        ],
    ),
];

/// The case files, sorted.
pub fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/l7/tests/gateway/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The stem of a case file (`extended-httproute-url-rewrite`).
pub fn stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// What the echo backends saw: per service, the ids of the requests it received.
#[derive(Default)]
struct Seen {
    by_service: Vec<(String, String)>,
    /// Response headers the echo answers a request id with.
    respond: HashMap<String, Vec<(String, String)>>,
}

/// A case ready to run: its objects (endpoints pointing at the echo backends) and what the
/// echo backends see.
pub struct Prepared {
    /// The case.
    pub case: Case,
    /// Its file's stem.
    pub file: String,
    /// The objects to serve.
    pub objects: Vec<SourceObject>,
    seen: Arc<Mutex<Seen>>,
}

async fn echo(service: String, seen: Arc<Mutex<Seen>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let address = listener.local_addr().expect("echo address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (service, seen) = (service.clone(), seen.clone());
            tokio::spawn(async move {
                let handle = move |request: Request<Incoming>| {
                    let (service, seen) = (service.clone(), seen.clone());
                    async move {
                        let headers: Vec<(String, String)> = request
                            .headers()
                            .iter()
                            .map(|(n, v)| {
                                (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())
                            })
                            .collect();
                        let id = request
                            .headers()
                            .get(ID_HEADER)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        let respond = {
                            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                            seen.by_service.push((service.clone(), id.clone()));
                            seen.respond.get(&id).cloned().unwrap_or_default()
                        };
                        let body = json!({
                            "service": service,
                            "host": request.headers().get("host").and_then(|v| v.to_str().ok()),
                            "path": request.uri().path_and_query().map_or("/", |p| p.as_str()),
                            "headers": headers,
                        });
                        let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
                        for (name, value) in respond {
                            if let (Ok(name), Ok(value)) = (
                                http::header::HeaderName::from_bytes(name.as_bytes()),
                                http::header::HeaderValue::from_str(&value),
                            ) {
                                response.headers_mut().append(name, value);
                            }
                        }
                        Ok::<_, Infallible>(response)
                    }
                };
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    });
    address
}

/// Reads `path` and starts an echo backend per endpoint address, each EndpointSlice replaced
/// by one slice per endpoint pointing at its echo.
pub async fn prepare(path: &Path) -> Prepared {
    let text = std::fs::read_to_string(path).expect("case file");
    prepare_text(&stem(path), &text).await
}

/// [`prepare`] for a case given as text, named `file`.
pub async fn prepare_text(file: &str, text: &str) -> Prepared {
    let case = Case::from_yaml(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut objects = Vec::new();
    for object in &case.objects {
        if object.kind != "EndpointSlice" {
            objects.push(object.clone());
            continue;
        }
        let namespace = object.namespace().unwrap_or("default").to_owned();
        let service = object
            .label("kubernetes.io/service-name")
            .unwrap_or_default()
            .to_owned();
        let json = object.to_json();
        let endpoints = json["endpoints"].as_array().cloned().unwrap_or_default();
        let ports = json["ports"].as_array().cloned().unwrap_or_default();
        for (index, endpoint) in endpoints.iter().enumerate() {
            for address in endpoint["addresses"].as_array().into_iter().flatten() {
                let _ = address;
                let echo = echo(format!("{namespace}/{service}"), seen.clone()).await;
                let mut slice = json.clone();
                slice["metadata"]["name"] =
                    Value::from(format!("{}-echo-{index}", object.name().unwrap_or("slice")));
                let mut endpoint = endpoint.clone();
                endpoint["addresses"] = json!([echo.ip().to_string()]);
                slice["endpoints"] = json!([endpoint]);
                slice["ports"] = Value::from(
                    ports
                        .iter()
                        .map(|p| {
                            let mut p = p.clone();
                            p["port"] = Value::from(echo.port());
                            p
                        })
                        .collect::<Vec<_>>(),
                );
                objects.push(nephrite_krm::Object::from_json(slice).expect("slice"));
            }
        }
    }
    Prepared {
        file: file.to_owned(),
        case,
        objects: objects
            .into_iter()
            .map(|object| SourceObject {
                object,
                origin: "case".into(),
            })
            .collect(),
        seen,
    }
}

/// Where the driver under test listens.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    /// Plain HTTP.
    pub http: SocketAddr,
    /// TLS (termination by SNI).
    pub https: SocketAddr,
}

/// A reply: status, headers, body.
struct Reply {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

async fn exchange(
    to: SocketAddr,
    tls_host: Option<&str>,
    request: Request<Empty<Bytes>>,
) -> Result<Reply, String> {
    let stream = TcpStream::connect(to)
        .await
        .map_err(|e| format!("connect {to}: {e}"))?;
    let response = match tls_host {
        None => {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            sender
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?
        }
        Some(host) => {
            drop(stream);
            let (tls, _) = super::tls_conformance::connect(to, host, &[b"http/1.1"]).await;
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            sender
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?
        }
    };
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn observed(reply: &Reply) -> Observed {
    let response_headers: Vec<(String, String)> = reply
        .headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let echo: Option<Value> = serde_json::from_str(&reply.body).ok();
    let text = |field: &str| {
        echo.as_ref()
            .and_then(|e| e[field].as_str())
            .map(str::to_owned)
    };
    Observed {
        status: reply.status,
        backend: text("service"),
        location: reply
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        host: text("host"),
        path: text("path"),
        headers: echo
            .as_ref()
            .and_then(|e| e["headers"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|pair| {
                Some((
                    pair.get(0)?.as_str()?.to_owned(),
                    pair.get(1)?.as_str()?.to_owned(),
                ))
            })
            .collect(),
        response_headers,
        mirrors: Vec::new(),
    }
}

/// How a driver serves one request of a case.
fn served(
    gateway: &CompiledGateway,
    request: &RequestCase,
    driver: Driver,
) -> (Served, Vec<Feature>) {
    let http = request.request.to_request();
    let capabilities = DriverCapabilities::of(driver);
    let served = nephrite_l7::gateway::conformance::support_for(gateway, &http, &capabilities);
    let host = nephrite_l7::normalize_host(&http.host).unwrap_or_default();
    let gaps = gateway
        .listener(http.port, &host)
        .and_then(|listener| {
            let entry = listener.decisive_entry(&host, &http)?;
            explain(listener, &capabilities)
                .get(entry.action)
                .map(|rule| rule.gaps.iter().map(|g| g.feature).collect())
        })
        .unwrap_or_default();
    (served, gaps)
}

/// The outcome of one case on one driver.
#[derive(Debug, Default)]
pub struct CaseResult {
    /// Requests sent and passing.
    pub passed: Vec<String>,
    /// Failures, each naming the request.
    pub failures: Vec<String>,
    /// Requests not sent, with why.
    pub skipped: Vec<(String, String)>,
}

/// Sends every request of `prepared` to `addresses` (the `driver` serving `prepared.objects`)
/// and checks what was observed; `cycle` is the number of picks one cycle of a pool's weights
/// takes on the driver.
pub async fn check(
    prepared: &Prepared,
    driver: Driver,
    addresses: Addresses,
    cycle: fn(&Pool) -> u64,
) -> CaseResult {
    let case = &prepared.case;
    let objects: Vec<nephrite_krm::Object> =
        prepared.objects.iter().map(|o| o.object.clone()).collect();
    let model = build(&objects, &Default::default());
    let translation = nephrite_l7::translate(&prepared.objects, &Options::default());
    let mut result = CaseResult::default();
    let Some(gateway) = model.compiled_gateway(&case.spec.gateway.key()) else {
        result.failures.push(format!(
            "Gateway {} is not compiled",
            case.spec.gateway.key()
        ));
        return result;
    };
    let port_only = PORT_ONLY
        .iter()
        .find(|(f, _)| *f == prepared.file)
        .map_or(&[][..], |(_, names)| *names);
    for (index, request) in case.spec.requests.iter().enumerate() {
        let name = request.name.clone();
        if port_only.contains(&name.as_str()) {
            result
                .skipped
                .push((name, "told apart by listener port alone".into()));
            continue;
        }
        let (support, gaps) = served(gateway, request, driver);
        if support == Served::Not {
            result
                .skipped
                .push((name, format!("not served by {driver:?}: {gaps:?}")));
            continue;
        }
        let spec = &request.request;
        let host = nephrite_l7::normalize_host(&spec.host).unwrap_or_default();
        let https = gateway
            .listener(spec.port, &host)
            .is_some_and(|l| l.protocol == Protocol::Https);
        let id = format!("{}-{index}", prepared.file);
        {
            let mut seen = prepared.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.respond.insert(
                id.clone(),
                request
                    .backend_response_headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
        }
        let build_request = |n: usize| {
            let mut builder = Request::builder()
                .method(spec.method.as_str())
                .uri(spec.path.as_str())
                .header("host", spec.host.as_str())
                .header(ID_HEADER, format!("{id}-{n}"));
            for (header, value) in &spec.headers {
                builder = builder.header(header.as_str(), value.as_str());
            }
            builder.body(Empty::<Bytes>::new())
        };
        let (to, tls_host) = if https {
            (addresses.https, Some(host.as_ref()))
        } else {
            (addresses.http, None)
        };
        let mut failures = Vec::new();
        if let Some(expect) = &request.expect {
            {
                let mut seen = prepared.seen.lock().unwrap_or_else(|e| e.into_inner());
                let headers = seen.respond.get(&id).cloned().unwrap_or_default();
                seen.respond.insert(format!("{id}-0"), headers);
            }
            match build_request(0) {
                Err(e) => failures.push(format!("request: {e}")),
                Ok(http_request) => match exchange(to, tls_host, http_request).await {
                    Err(e) => failures.push(e),
                    Ok(reply) => {
                        let mut observed = observed(&reply);
                        let mut expect = expect.clone();
                        if gaps.contains(&Feature::Mirror) {
                            expect.mirrors.clear();
                        } else {
                            observed.mirrors =
                                mirrors(prepared, &format!("{id}-0"), expect.mirrors.len()).await;
                        }
                        observed.headers.retain(|(n, _)| n != ID_HEADER);
                        failures.extend(expect.check(&observed));
                    }
                },
            }
        }
        if !request.split.is_empty() {
            failures.extend(
                split(
                    prepared,
                    &translation,
                    request,
                    to,
                    tls_host,
                    cycle,
                    &build_request,
                )
                .await,
            );
        }
        if failures.is_empty() {
            result.passed.push(name);
        } else {
            result
                .failures
                .extend(failures.into_iter().map(|f| format!("{name:?}: {f}")));
        }
    }
    result
}

/// The services that received a copy of request `id` other than the one that answered: waits
/// (at most 10 s) until `expected` copies arrived.
async fn mirrors(prepared: &Prepared, id: &str, expected: usize) -> Vec<String> {
    let copies = || {
        let seen = prepared.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut received: Vec<String> = seen
            .by_service
            .iter()
            .filter(|(_, i)| i == id)
            .map(|(s, _)| s.clone())
            .collect();
        // The first to arrive of the answering service is the request itself.
        received.sort();
        received
    };
    // Copies travel on their own: wait for the expected ones (a copy nobody expected that
    // arrives later goes unnoticed; one already there counts).
    for _ in 0..200 {
        if expected == 0 || copies().len() > expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut received = copies();
    let answered = {
        let seen = prepared.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.by_service
            .iter()
            .find(|(_, i)| i == id)
            .map(|(s, _)| s.clone())
    };
    // Remove the answering exchange once (a mirror to the same service stays).
    if let Some(answered) = answered
        && let Some(at) = received.iter().position(|s| *s == answered)
    {
        received.remove(at);
    }
    received
}

/// Sends one cycle of the pool's weights and compares the counts with the split's shares.
async fn split(
    prepared: &Prepared,
    translation: &nephrite_l7::Translation,
    request: &RequestCase,
    to: SocketAddr,
    tls_host: Option<&str>,
    cycle: fn(&Pool) -> u64,
    build_request: &dyn Fn(usize) -> Result<Request<Empty<Bytes>>, http::Error>,
) -> Vec<String> {
    let _ = prepared;
    // One cycle of the pool the request is routed to.
    let table = nephrite_l7::RouteTable::compile(&translation.config);
    let spec = &request.request;
    let host = nephrite_l7::normalize_host(&spec.host).unwrap_or_default();
    let path = nephrite_l7::normalize_path(&spec.path);
    let headers: Vec<(String, String)> = spec
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let view = nephrite_l7::WithMethod {
        method: &spec.method,
        headers: &headers,
    };
    let l7 = nephrite_l7::Request {
        host: &host,
        path: &path,
        target: &spec.path,
        headers: &view,
        client_cert: None,
    };
    let listener = if tls_host.is_some() {
        &table.https
    } else {
        &table.http
    };
    let rounds = match listener.lookup(&l7) {
        nephrite_l7::Outcome::Pool(pool) => table.pool(pool).map_or(1, cycle),
        _ => 1,
    }
    .max(1);
    let total_share: u64 = request.split.values().sum();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for n in 0..rounds as usize {
        let reply = match build_request(1000 + n) {
            Err(e) => return vec![format!("request: {e}")],
            Ok(r) => match exchange(to, tls_host, r).await {
                Ok(reply) => reply,
                Err(e) => return vec![e],
            },
        };
        let observed = observed(&reply);
        let who = observed
            .backend
            .unwrap_or_else(|| format!("status {}", observed.status));
        *counts.entry(who).or_default() += 1;
    }
    let want: BTreeMap<&String, u64> = request
        .split
        .iter()
        .filter(|(_, share)| **share > 0)
        .map(|(who, share)| (who, *share))
        .collect();
    let exact = want.len() == counts.len()
        && want.iter().all(|(who, share)| {
            counts
                .get(*who)
                .is_some_and(|got| got * total_share == share * rounds)
        });
    if exact {
        Vec::new()
    } else {
        vec![format!(
            "split over {rounds} requests: expected shares {want:?} of {total_share}, got {counts:?}"
        )]
    }
}
