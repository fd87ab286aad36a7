//! Protocol upgrades (the WebSocket handshake's `Connection: upgrade` + `Upgrade`) through the
//! router: over plain HTTP/1.1, served by the router's own codec, and over TLS terminated at
//! the router, served by hyper. A member switching to an uppercasing echo shows the tunnel
//! carries bytes both ways, including those sent right behind each side's head.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use nephrite_kuryr_l7::router::RouterConfig;
use support::*;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A member that switches to an uppercasing echo when asked with `Upgrade: echo`, or unasked
/// for `/switch-anyway` (answering `101` with `hello\n` right behind its head), and answers
/// `426` otherwise; every request head it reads goes to the channel, lowercased.
async fn upgrade_member() -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (heads, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let heads = heads.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let end = loop {
                    if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                let asked = head.contains("\r\nupgrade: echo\r\n")
                    || head.starts_with("get /switch-anyway ");
                let _ = heads.send(head);
                if !asked {
                    let refusal = b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n";
                    let _ = stream.write_all(refusal).await;
                    return;
                }
                let switched =
                    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nhello\n";
                if stream.write_all(switched).await.is_err() {
                    return;
                }
                let mut pending = buffer.split_off(end);
                loop {
                    if !pending.is_empty() {
                        pending.make_ascii_uppercase();
                        if stream.write_all(&pending).await.is_err() {
                            return;
                        }
                        pending.clear();
                    }
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (address, received)
}

/// Reads from `stream` until what was read ends with `suffix` (5 s at most): all of it.
async fn read_until<S: AsyncRead + Unpin + ?Sized>(stream: &mut S, suffix: &str) -> String {
    let mut read = Vec::new();
    while !read.ends_with(suffix.as_bytes()) {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "waiting for {suffix:?}, read {:?}",
                    String::from_utf8_lossy(&read)
                )
            })
            .unwrap();
        assert_ne!(n, 0, "closed: {:?}", String::from_utf8_lossy(&read));
        read.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(read).unwrap()
}

/// Asks `stream` to switch to `echo` for `host` (with bytes right behind the request head),
/// checks the answer and that the tunnel carries bytes both ways.
async fn switch_and_echo(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), host: &str) {
    let request = format!(
        "GET /chat HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly "
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let answer = read_until(stream, "hello\nEARLY ").await;
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 101 switching protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nconnection: upgrade"), "{head}");
    assert!(head.contains("\r\nupgrade: echo"), "{head}");
    assert_eq!(rest, "hello\nEARLY ", "what each side sent behind its head");
    for word in ["ping", "pong"] {
        stream.write_all(word.as_bytes()).await.unwrap();
        assert_eq!(
            read_until(stream, &word.to_uppercase()).await,
            word.to_uppercase()
        );
    }
}

#[tokio::test]
async fn upgrades_are_tunnelled_over_plain_http_and_terminated_tls() {
    let (member, mut heads) = upgrade_member().await;
    let (cert, key) = certificate(&["secure.example.com"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("all.yaml"),
        format!(
            "{}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: plain, namespace: shop}}\nspec:\n  rules:\n  - host: plain.example.com\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: ws, port: {{number: 80}}}}}}}}\n---\napiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: secure, namespace: shop}}\nspec:\n  host: secure.example.com\n  to: {{kind: Service, name: ws}}\n  tls:\n    termination: edge\n    certificate: |\n{}    key: |\n{}",
            service_yaml("shop", "ws", &[member]),
            tls_conformance::indent_by(&cert, 6),
            tls_conformance::indent_by(&key, 6),
        ),
    )
    .unwrap();
    let (_router, http, https) = router(dir.path(), RouterConfig::default()).await;

    // Plain HTTP/1.1: the router's codec.
    let mut plain = TcpStream::connect(http).await.unwrap();
    switch_and_echo(&mut plain, "plain.example.com").await;
    let head = heads.recv().await.unwrap();
    for forwarded in [
        "\r\nconnection: upgrade\r\n",
        "\r\nupgrade: echo\r\n",
        "\r\nx-forwarded-for: 127.0.0.1\r\n",
        "\r\nx-forwarded-proto: http\r\n",
    ] {
        assert!(head.contains(forwarded), "{forwarded:?} in {head}");
    }

    // TLS terminated at the router: hyper.
    let (mut secure, _) =
        tls_conformance::connect(https, "secure.example.com", &[b"http/1.1"]).await;
    switch_and_echo(&mut secure, "secure.example.com").await;
    let head = heads.recv().await.unwrap();
    assert!(head.contains("\r\nupgrade: echo\r\n"), "{head}");
    assert!(head.contains("\r\nx-forwarded-proto: https\r\n"), "{head}");

    // Without `Connection: upgrade` the Upgrade header is hop-by-hop like any other: dropped.
    let mut unasked = TcpStream::connect(http).await.unwrap();
    unasked
        .write_all(b"GET / HTTP/1.1\r\nHost: plain.example.com\r\nUpgrade: echo\r\n\r\n")
        .await
        .unwrap();
    let answer = read_until(&mut unasked, "\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 426 "), "{answer}");
    assert!(!heads.recv().await.unwrap().contains("upgrade"));

    // A member switching protocols unasked is a 502, and its connection is not pooled: the
    // next request, on the same client connection, reaches the member afresh.
    let mut plain = TcpStream::connect(http).await.unwrap();
    let (mut secure, _) =
        tls_conformance::connect(https, "secure.example.com", &[b"http/1.1"]).await;
    for (stream, host) in [
        (&mut plain as &mut dyn Duplex, "plain.example.com"),
        (&mut secure, "secure.example.com"),
    ] {
        for (target, status, end) in [
            (
                "/switch-anyway",
                "502",
                "member switched protocols unasked\n",
            ),
            ("/", "426", "\r\n\r\n"),
        ] {
            let request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let answer = read_until(stream, end).await;
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status} ")),
                "{host}{target}: {answer}"
            );
            assert!(
                !answer.contains("connection: close"),
                "{host}{target}: {answer}"
            );
        }
    }
}

/// A client connection of either kind.
trait Duplex: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Duplex for T {}
