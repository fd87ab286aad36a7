use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use nephrite_krm::Package;
use nephrite_l7::{Options, RouteTable, SourceObject, translate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::request::{self, BodyFraming, Refusal};
use crate::router::{Router, RouterConfig};

/// A member answering `method target body=<request body>`; `/chunked` answers in two chunks
/// without a length.
async fn member() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|request: Request<Incoming>| async move {
                    let (parts, body) = request.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let text = format!(
                        "{} {} body={}",
                        parts.method,
                        parts.uri,
                        String::from_utf8_lossy(&body)
                    );
                    let body = if parts.uri.path() == "/chunked" {
                        let pieces = vec![
                            Ok::<_, Infallible>(Frame::data(Bytes::from("one,"))),
                            Ok(Frame::data(Bytes::from(text))),
                        ];
                        StreamBody::new(futures::stream::iter(pieces)).boxed()
                    } else {
                        Full::new(Bytes::from(text))
                            .map_err(|never| match never {})
                            .boxed()
                    };
                    Ok::<_, Infallible>(Response::new(body))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    address
}

fn compile(yaml: &str) -> Arc<RouteTable> {
    let objects: Vec<SourceObject> = Package::from_yaml(yaml)
        .unwrap()
        .into_objects()
        .into_iter()
        .map(|object| SourceObject {
            object,
            origin: "test".into(),
        })
        .collect();
    Arc::new(RouteTable::compile(
        &translate(&objects, &Options::default()).config,
    ))
}

fn service(name: &str, member: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: ns}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: ns\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: http, port: {}}}]\nendpoints:\n- addresses: [\"127.0.0.1\"]\n---\n",
        member.port()
    )
}

/// A TLS member (self-signed) answering like [`member`].
async fn tls_member() -> SocketAddr {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let certified = crate::router::tls::certified_key(&cert.pem(), &key.serialize_pem()).unwrap();
    let config = crate::router::tls::server_config(crate::router::tls::CertificateResolver::new(
        &[],
        Some(certified),
    ));
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let plain = member().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                // Relay the decrypted bytes to the plain member.
                let Ok(mut inner) = TcpStream::connect(plain).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut inner).await;
            });
        }
    });
    address
}

fn table(member: SocketAddr) -> Arc<RouteTable> {
    let yaml = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: ns}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web\n  namespace: ns\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{name: http, port: {}}}]\nendpoints:\n- addresses: [\"127.0.0.1\"]\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i, namespace: ns}}\nspec:\n  rules:\n  - host: a.example\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n",
        member.port()
    );
    compile(&yaml)
}

/// A router on loopback in front of one [`member`].
async fn router() -> SocketAddr {
    let router = Router::new(RouterConfig::default(), table(member().await)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(router.serve_http(listener));
    address
}

/// Reads until the connection closes or `until` is seen or 2 s pass.
async fn read_until(stream: &mut TcpStream, until: Option<&str>) -> String {
    let mut out = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buffer[..n]),
        }
        let text = String::from_utf8_lossy(&out);
        if until.is_some_and(|u| text.contains(u)) {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn exchange(router: SocketAddr, bytes: &str) -> String {
    let mut stream = TcpStream::connect(router).await.unwrap();
    stream.write_all(bytes.as_bytes()).await.unwrap();
    read_until(&mut stream, None).await
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_and_close_ends_the_connection() {
    let router = router().await;
    let text = exchange(
        router,
        "GET /1 HTTP/1.1\r\nHost: a.example\r\n\r\nGET /2 HTTP/1.1\r\nHost: a.example\r\n\r\nGET /3 HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    let one = text.find("GET /1 body=").expect(&text);
    let two = text.find("GET /2 body=").expect(&text);
    let three = text.find("GET /3 body=").expect(&text);
    assert!(one < two && two < three, "{text}");
    assert_eq!(text.matches("HTTP/1.1 200 OK\r\n").count(), 3, "{text}");
    assert_eq!(text.matches("connection: close\r\n").count(), 1, "{text}");
    assert_eq!(text.matches("date: ").count(), 3, "{text}");
}

#[tokio::test]
async fn expect_100_continue_is_answered_before_the_body_is_read() {
    let router = router().await;
    let mut stream = TcpStream::connect(router).await.unwrap();
    stream
        .write_all(b"POST /up HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        .await
        .unwrap();
    let interim = read_until(&mut stream, Some("\r\n\r\n")).await;
    assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    stream.write_all(b"hello").await.unwrap();
    let text = read_until(&mut stream, Some("body=hello")).await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with("POST /up body=hello"), "{text}");
}

#[tokio::test]
async fn chunked_bodies_both_ways() {
    let router = router().await;
    let text = exchange(
        router,
        "POST /chunked HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
    )
    .await;
    assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n4\r\none,\r\n18\r\nPOST /chunked body=abcde\r\n0\r\n\r\n"),
        "{text}"
    );
}

#[tokio::test]
async fn http10_clients_get_http10_answers_and_keep_alive_only_when_asked() {
    let router = router().await;
    // Unknown length to an HTTP/1.0 client: the body ends with the connection.
    let text = exchange(router, "GET /chunked HTTP/1.0\r\nHost: a.example\r\n\r\n").await;
    assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "{text}");
    assert!(!text.contains("transfer-encoding"), "{text}");
    assert!(text.ends_with("\r\n\r\none,GET /chunked body="), "{text}");
    // Keep-alive asked for: answered with it, and the connection serves a second request.
    let mut stream = TcpStream::connect(router).await.unwrap();
    stream
        .write_all(b"GET /1 HTTP/1.0\r\nHost: a.example\r\nConnection: keep-alive\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut stream, Some("body=")).await;
    assert!(text.contains("connection: keep-alive\r\n"), "{text}");
    stream
        .write_all(b"GET /2 HTTP/1.0\r\nHost: a.example\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut stream, None).await;
    assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "{text}");
    assert!(text.ends_with("GET /2 body="), "{text}");
}

#[tokio::test]
async fn own_answers_and_refusals() {
    let router = router().await;
    let text = exchange(
        router,
        "GET / HTTP/1.1\r\nHost: nowhere.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
    assert!(text.contains("content-length: 9\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\nno route\n"), "{text}");
    let text = exchange(router, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").await;
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    let text = exchange(router, "GET / HTTP/1.1\r\nHost: a\r\nX: \0\r\n\r\n").await;
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    // A body the router did not read closes the connection after the answer.
    let text = exchange(
        router,
        "POST / HTTP/1.1\r\nHost: nowhere.example\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
    )
    .await;
    assert_eq!(text.matches("HTTP/1.1").count(), 1, "{text}");
}

#[tokio::test]
async fn h2c_prior_knowledge_goes_to_hyper() {
    let router = router().await;
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let request = Request::get("http://a.example/h2")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "GET /h2 body=");
}

#[tokio::test]
async fn reencrypt_members_get_the_body_through_hyper_tls_client() {
    let yaml = format!(
        "{}apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: re, namespace: ns}}\nspec:\n  host: re.example\n  to: {{kind: Service, name: secure}}\n  tls: {{termination: reencrypt, insecureEdgeTerminationPolicy: Allow}}\n",
        service("secure", tls_member().await)
    );
    let router = Router::new(RouterConfig::default(), compile(&yaml)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(router.serve_http(listener));
    let text = exchange(
        address,
        "POST /re HTTP/1.1\r\nHost: re.example\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with("POST /re body=abc"), "{text}");
    let text = exchange(
        address,
        "GET /re2 HTTP/1.1\r\nHost: re.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(text.ends_with("GET /re2 body="), "{text}");
}

fn parse(text: &str) -> Result<Option<request::RequestHead>, Refusal> {
    let mut buffer = BytesMut::from(text.as_bytes());
    request::parse(&mut buffer, &mut Vec::new())
}

#[test]
fn request_heads_parse_in_place_and_refuse_like_hyper() {
    assert!(parse("GET / HTTP/1.1\r\nHost: a").unwrap().is_none());
    let head = parse("POST /x?y HTTP/1.1\r\nHOST: a\r\ncontent-length: 7\r\n\r\nbody")
        .unwrap()
        .unwrap();
    assert_eq!(head.method(), "POST");
    assert_eq!(head.header("host"), Some(&b"a"[..]));
    assert_eq!(head.body, BodyFraming::Length(7));
    assert!(head.keep_alive && head.http11);
    let head = parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(head.body, BodyFraming::Chunked);
    assert!(!head.keep_alive);
    let head = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(head.keep_alive && !head.http11);
    for bad in [
        "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
        "GET /\u{7f} HTTP/1.1\r\n\r\n",
        "GET http://[::1 HTTP/1.1\r\n\r\n",
    ] {
        assert_eq!(parse(bad).unwrap_err(), Refusal::BadRequest, "{bad:?}");
    }
    let many = format!("GET / HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(101));
    assert_eq!(parse(&many).unwrap_err(), Refusal::TooLarge);
    let long = format!("GET / HTTP/1.1\r\nX: {}", "y".repeat(request::MAX_HEAD));
    assert_eq!(parse(&long).unwrap_err(), Refusal::TooLarge);
}

#[test]
fn an_upgrade_is_an_http11_request_without_a_body_listing_upgrade_in_connection() {
    let upgrade = |text: &str| parse(text).unwrap().unwrap().upgrade;
    assert!(upgrade(
        "GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n"
    ));
    assert!(upgrade(
        "GET / HTTP/1.1\r\nUpgrade: echo\r\nConnection: upgrade\r\nContent-Length: 0\r\n\r\n"
    ));
    for not in [
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        "POST / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\n",
        "POST / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert!(!upgrade(not), "{not:?}");
    }
}
