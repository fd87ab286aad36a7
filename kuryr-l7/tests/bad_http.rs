//! Malformed HTTP from clients: 400, and the router keeps serving. The corpus in
//! `tests/corpus/bad-requests.txt` holds hand-picked nasty inputs; a property test throws
//! generated request lines, headers and paths at it.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nephrite_kuryr_l7::router::RouterConfig;
use proptest::prelude::*;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

fn unescape(line: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    out.push(u8::from_str_radix(&line[i + 2..i + 4], 16).unwrap());
                    i += 2;
                }
                other => panic!("unknown escape \\{}", other as char),
            }
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

async fn start() -> (tempfile::TempDir, SocketAddr) {
    start_with(RouterConfig::default()).await
}

async fn start_with(config: RouterConfig) -> (tempfile::TempDir, SocketAddr) {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i, namespace: ns}\nspec:\n  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n";
    std::fs::write(
        dir.path().join("all.yaml"),
        format!("{}{ingress}", service_yaml("ns", "web", &[web])),
    )
    .unwrap();
    let (_router, http, _) = router(dir.path(), config).await;
    (dir, http)
}

/// Reads until the router closes the connection (or `limit` passes): when it closed, from now.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buffer = [0u8; 4096];
    while start.elapsed() < limit {
        match tokio::time::timeout(limit, stream.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
            Err(_) => return None,
        }
    }
    None
}

const HEAD_TIMEOUT: Duration = Duration::from_millis(400);

fn short_timeouts() -> RouterConfig {
    RouterConfig {
        head_timeout: HEAD_TIMEOUT,
        ..RouterConfig::default()
    }
}

#[tokio::test]
async fn a_head_dripped_byte_by_byte_is_cut_at_the_timeout_from_its_first_byte() {
    let (_dir, http) = start_with(short_timeouts()).await;
    let mut stream = TcpStream::connect(http).await.unwrap();
    let start = Instant::now();
    stream.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    // One header byte every 50 ms: each read alone is well within the timeout.
    let mut closed = false;
    for byte in b"X-Slow: ".iter().cycle().take(60) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if stream.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
    }
    if !closed {
        closed = closed_within(&mut stream, Duration::from_secs(1))
            .await
            .is_some();
    }
    let elapsed = start.elapsed();
    assert!(
        closed,
        "the dripping connection is still open after {elapsed:?}"
    );
    assert!(elapsed >= HEAD_TIMEOUT, "closed after {elapsed:?}");
    assert!(elapsed < HEAD_TIMEOUT * 4, "closed only after {elapsed:?}");
}

#[tokio::test]
async fn idle_connections_are_closed_before_and_between_requests() {
    let (_dir, http) = start_with(short_timeouts()).await;
    let mut silent = TcpStream::connect(http).await.unwrap();
    let closed = closed_within(&mut silent, Duration::from_secs(2)).await;
    assert!(
        closed.is_some_and(|after| after >= HEAD_TIMEOUT),
        "{closed:?}"
    );

    let mut kept = TcpStream::connect(http).await.unwrap();
    kept.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 4096];
    let n = kept.read(&mut answer).await.unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
    let closed = closed_within(&mut kept, Duration::from_secs(2)).await;
    assert!(closed.is_some(), "an idle keep-alive connection stays open");
}

#[tokio::test]
async fn connections_over_the_per_client_cap_are_closed_and_a_freed_slot_serves_again() {
    let (_dir, http) = start_with(RouterConfig {
        max_connections_per_client: Some(2),
        ..RouterConfig::default()
    })
    .await;
    let request = b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n";
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(http).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = [0u8; 4096];
        let n = stream.read(&mut answer).await.unwrap();
        assert!(answer[..n].starts_with(b"HTTP/1.1 200"));
        open.push(stream);
    }
    let mut third = TcpStream::connect(http).await.unwrap();
    let _ = third.write_all(request).await;
    let closed = closed_within(&mut third, Duration::from_secs(2)).await;
    assert!(
        closed.is_some(),
        "a third connection from the same address is served"
    );
    drop(open.pop());
    // The freed slot is given back once the router saw the close.
    let mut status = 0;
    for _ in 0..50 {
        status = raw(http, request).await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
}

#[tokio::test]
async fn an_absolute_form_target_routes_and_forwards_by_its_authority() {
    let (_dir, http) = start().await;
    let mut stream = TcpStream::connect(http).await.unwrap();
    stream
        .write_all(b"GET http://shop.example.com/x HTTP/1.1\r\nHost: other.example\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains("host=") {
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buffer[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("host=shop.example.com"), "{text}");
    assert!(text.contains("xfh=shop.example.com"), "{text}");
}

#[tokio::test]
async fn an_h2c_upgrade_is_not_forwarded_to_the_member() {
    let member = h2c_member().await;
    let dir = tempfile::tempdir().unwrap();
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i, namespace: ns}\nspec:\n  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: h2c, port: {number: 80}}}}\n";
    std::fs::write(
        dir.path().join("all.yaml"),
        format!("{}{ingress}", service_yaml("ns", "h2c", &[member])),
    )
    .unwrap();
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    assert_eq!(raw(http, H2C_UPGRADE).await, 200);
}

#[tokio::test]
async fn every_corpus_input_gets_400_and_the_router_keeps_serving() {
    let (_dir, http) = start().await;
    let corpus = include_str!("corpus/bad-requests.txt");
    let mut wrong = Vec::new();
    for line in corpus
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let status = raw(http, &unescape(line)).await;
        if status != 400 {
            wrong.push(format!("{status} for {line}"));
        }
        assert_eq!(
            get(http, "x", "/").await.status,
            200,
            "still serving after {line}"
        );
    }
    assert!(wrong.is_empty(), "not 400:\n{}", wrong.join("\n"));
}

fn request_line() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec!["GET", "POST", "G\0T", "", "get", "PUT\t"]),
        prop::collection::vec(any::<u8>(), 0..24),
        prop::sample::select(vec![
            "HTTP/1.1",
            "HTTP/1.0",
            "HTTP/2",
            "HTTP/1.1 ",
            "",
            "http/1.1",
        ]),
        prop::collection::vec(
            (
                prop::collection::vec(any::<u8>(), 0..12),
                prop::collection::vec(any::<u8>(), 0..12),
            ),
            0..4,
        ),
        any::<bool>(),
    )
        .prop_map(|(method, path, version, headers, host)| {
            let mut out = Vec::new();
            out.extend_from_slice(method.as_bytes());
            out.push(b' ');
            out.push(b'/');
            out.extend(path);
            out.push(b' ');
            out.extend_from_slice(version.as_bytes());
            out.extend_from_slice(b"\r\n");
            if host {
                out.extend_from_slice(b"Host: x\r\n");
            }
            for (name, value) in headers {
                out.extend(name);
                out.extend_from_slice(b": ");
                out.extend(value);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"\r\n");
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn generated_requests_never_break_the_router(cases in prop::collection::vec(request_line(), 1..8)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let (_dir, http) = start().await;
            for case in cases {
                let status = raw(http, &case).await;
                // A request that parses is routed (200); anything else is refused with 400
                // (or 431 for oversized headers, never a crash or a hang).
                assert!(matches!(status, 200 | 400 | 431), "{status} for {:?}", String::from_utf8_lossy(&case));
                assert_eq!(get(http, "x", "/").await.status, 200);
            }
        });
    }
}
