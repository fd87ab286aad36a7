//! Test support: echo backends on loopback, an in-process router, and HTTP clients.
#![allow(dead_code)]

pub mod cloud;
pub mod cluster;
pub mod conformance;
pub mod daemon;
pub mod events;
pub mod gateway_cases;
pub mod openstack;
pub mod proxy;
pub mod tls_conformance;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nephrite_kuryr_l7::router::{Router, RouterConfig};
use nephrite_kuryr_l7::source::snapshot_dir;
use nephrite_l7::Options;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An echo backend: answers `name path=<target> xff=<> proto=<> xfh=<> host=<>`; a path
/// starting with `/status/NNN` answers NNN, `/slow` waits 400 ms.
pub async fn echo(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| async move {
                    let header = |n: &str| {
                        request
                            .headers()
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("-")
                            .to_owned()
                    };
                    let target = request
                        .uri()
                        .path_and_query()
                        .map_or("/", |p| p.as_str())
                        .to_owned();
                    if target.starts_with("/slow") {
                        tokio::time::sleep(Duration::from_millis(400)).await;
                    }
                    let status = target
                        .strip_prefix("/status/")
                        .and_then(|s| s.get(..3))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(200);
                    let body = format!(
                        "{name} path={target} xff={} proto={} xfh={} host={}",
                        header("x-forwarded-for"),
                        header("x-forwarded-proto"),
                        header("x-forwarded-host"),
                        header("host")
                    );
                    let mut response = Response::new(Full::new(Bytes::from(body)));
                    *response.status_mut() = StatusCode::from_u16(status).unwrap();
                    response
                        .headers_mut()
                        .insert("x-backend", name.parse().unwrap());
                    Ok::<_, Infallible>(response)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

/// A member that holds every request until released: its address, a channel that receives a
/// message for each request it holds, and the semaphore that releases them (a permit each).
pub async fn held_member() -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    Arc<tokio::sync::Semaphore>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (held, holding) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let permits = release.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (held, permits) = (held.clone(), permits.clone());
            tokio::spawn(async move {
                let service = service_fn(move |_request: Request<Incoming>| {
                    let (held, permits) = (held.clone(), permits.clone());
                    async move {
                        let _ = held.send(());
                        permits.acquire().await.unwrap().forget();
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from("released"))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (address, holding, release)
}

/// An HTTP/1.0 backend that closes every connection after one answer.
pub async fn http10(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                let mut read = 0;
                while !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                }
                let body = format!("{name} http/1.0");
                let _ = stream
                    .write_all(
                        format!("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}")
                            .as_bytes(),
                    )
                    .await;
                let _ = stream.shutdown().await;
            });
        }
    });
    address
}

/// A free loopback address nothing listens on.
pub fn dead_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Service + EndpointSlice YAML for `service` in `ns` with `members`, port name `http`.
pub fn service_yaml(ns: &str, service: &str, members: &[SocketAddr]) -> String {
    let mut out = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {service}, namespace: {ns}}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\n"
    );
    for (i, member) in members.iter().enumerate() {
        out.push_str(&format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-{i}\n  namespace: {ns}\n  labels: {{kubernetes.io/service-name: {service}}}\naddressType: IPv4\nports: [{{name: http, port: {}}}]\nendpoints:\n- addresses: [\"{}\"]\n---\n",
            member.port(),
            member.ip()
        ));
    }
    out
}

/// Starts an in-process router on loopback for the YAML in `dir`: (router, http, https).
pub async fn router(dir: &Path, config: RouterConfig) -> (Arc<Router>, SocketAddr, SocketAddr) {
    let snapshot = snapshot_dir(dir, &Options::default()).unwrap();
    let router = Router::new(config, snapshot.table.clone()).unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let https = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addresses = (http.local_addr().unwrap(), https.local_addr().unwrap());
    tokio::spawn(router.clone().serve_http(http));
    tokio::spawn(router.clone().serve_https(https));
    (router, addresses.0, addresses.1)
}

/// A reply: status, headers, body.
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

/// One HTTP/1.1 request with `Host: host` over a fresh connection.
pub async fn get(router: SocketAddr, host: &str, target: &str) -> Reply {
    send(
        router,
        Request::get(target)
            .header("host", host)
            .body(Empty::<Bytes>::new())
            .unwrap(),
    )
    .await
}

/// Sends `request` over a fresh HTTP/1.1 connection to `router`.
pub async fn send(router: SocketAddr, request: Request<Empty<Bytes>>) -> Reply {
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    reply(sender.send_request(request).await.unwrap()).await
}

pub async fn reply(response: Response<Incoming>) -> Reply {
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Raw bytes in, the status line's code out (0 when the connection closed without an answer).
pub async fn raw(router: SocketAddr, bytes: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(router).await.unwrap();
    let _ = stream.write_all(bytes).await;
    let mut out = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => {
                out.extend_from_slice(&buffer[..n]);
                if out.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&out);
    text.strip_prefix("HTTP/1.1 ")
        .or_else(|| text.strip_prefix("HTTP/1.0 "))
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A self-signed certificate for `hosts`: (cert PEM, key PEM).
pub fn certificate(hosts: &[&str]) -> (String, String) {
    let cert =
        rcgen::generate_simple_self_signed(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
            .unwrap();
    (cert.cert.pem(), cert.signing_key.serialize_pem())
}

pub fn executor() -> TokioExecutor {
    TokioExecutor::new()
}

/// Polls `router` until its answer to `host` + `path` satisfies `want` (15 s at most); the time
/// it took.
pub async fn wait_for_answer(
    router: SocketAddr,
    host: &str,
    path: &str,
    want: impl Fn(&Reply) -> bool,
) -> Duration {
    let start = std::time::Instant::now();
    loop {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(router)).await
        {
            drop(stream);
            if want(&get(router, host, path).await) {
                return start.elapsed();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "router {router} never answered {host}{path} as wanted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A member that switches to h2c when asked (`101` to `Upgrade: h2c`, as a smuggling-prone
/// backend would) and answers `200` otherwise: what reaches it tells whether a proxy let the
/// upgrade through.
pub async fn h2c_member() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let answer: &[u8] = if text.contains("\r\nupgrade: h2c") {
                    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
                };
                let _ = stream.write_all(answer).await;
            });
        }
    });
    address
}

/// An HTTP/1.1 request asking to upgrade to h2c (as `curl --http2` sends over plain HTTP).
pub const H2C_UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: h2c.example.com\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
