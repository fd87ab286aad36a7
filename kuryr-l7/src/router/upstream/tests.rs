use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use http_body_util::{BodyExt, Empty, Full};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::head::{
    Forwarding, RequestFraming, ResponseFraming, parse_response_head, strip_hop_by_hop,
    write_request_head,
};
use super::{UpstreamError, member, request_framing};

/// What a scripted member does after each answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    KeepOpen,
    Close,
}

/// A member that answers the n-th request on any connection with `answers[n % len]`, each
/// written in the given pieces (with a short pause between pieces), and records the requests.
struct Scripted {
    address: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

/// Reads one request (head, then a Content-Length or chunked body) off `stream`.
async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let chunked = head.contains("transfer-encoding: chunked");
    loop {
        let body = &data[head_end..];
        let complete = if chunked {
            body.ends_with(b"0\r\n\r\n")
        } else {
            body.len() >= length
        };
        if complete {
            return Some(data);
        }
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    }
}

async fn scripted(answers: Vec<Vec<&'static str>>, after: After) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (count, seen) = (connections.clone(), requests.clone());
    let answers = Arc::new(answers);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let (seen, answers) = (seen.clone(), answers.clone());
            tokio::spawn(async move {
                while let Some(request) = read_request(&mut stream).await {
                    let n = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(String::from_utf8_lossy(&request).into_owned());
                        seen.len() - 1
                    };
                    for piece in &answers[n % answers.len()] {
                        if stream.write_all(piece.as_bytes()).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    if after == After::Close {
                        return;
                    }
                }
            });
        }
    });
    Scripted {
        address,
        connections,
        requests,
    }
}

fn get_head(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nhost: m\r\n\r\n").into_bytes()
}

/// One GET exchange: (status, body).
async fn get(pool: &Arc<super::MemberConnections>, method: Method) -> (u16, Bytes) {
    let response = pool
        .exchange(
            method == Method::HEAD,
            &get_head("/"),
            Empty::<Bytes>::new(),
            RequestFraming::Empty,
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

#[tokio::test]
async fn content_length_answers_reuse_one_connection() {
    let m = scripted(
        vec![vec!["HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"]],
        After::KeepOpen,
    )
    .await;
    let pool = member(m.address);
    for _ in 0..3 {
        assert_eq!(get(&pool, Method::GET).await, (200, Bytes::from("hello")));
    }
    assert_eq!(m.connections.load(Ordering::SeqCst), 1);
    assert_eq!(pool.idle_count(), 1);
}

#[tokio::test]
async fn chunked_answer_split_across_reads_is_decoded_and_the_connection_reused() {
    let m = scripted(
        vec![vec![
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
            "lo\r\n6;ext=1\r",
            "\n world\r\n0\r\nX-Trailer: 1\r\n",
            "\r\n",
        ]],
        After::KeepOpen,
    )
    .await;
    let pool = member(m.address);
    assert_eq!(
        get(&pool, Method::GET).await,
        (200, Bytes::from("hello world"))
    );
    assert_eq!(
        get(&pool, Method::GET).await,
        (200, Bytes::from("hello world"))
    );
    assert_eq!(m.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn http10_answer_until_close_is_read_whole_and_not_pooled() {
    let m = scripted(
        vec![vec![
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nold ",
            "member",
        ]],
        After::Close,
    )
    .await;
    let pool = member(m.address);
    assert_eq!(
        get(&pool, Method::GET).await,
        (200, Bytes::from("old member"))
    );
    assert_eq!(pool.idle_count(), 0);
    assert_eq!(
        get(&pool, Method::GET).await,
        (200, Bytes::from("old member"))
    );
    assert_eq!(m.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connection_close_answers_are_not_pooled() {
    let m = scripted(
        vec![vec![
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        ]],
        After::Close,
    )
    .await;
    let pool = member(m.address);
    assert_eq!(get(&pool, Method::GET).await, (200, Bytes::from("ok")));
    assert_eq!(pool.idle_count(), 0);
}

#[tokio::test]
async fn head_204_and_interim_answers_have_no_body() {
    let m = scripted(
        vec![
            vec!["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"],
            vec!["HTTP/1.1 204 No Content\r\n\r\n"],
            vec![
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
            ],
        ],
        After::KeepOpen,
    )
    .await;
    let pool = member(m.address);
    assert_eq!(get(&pool, Method::HEAD).await, (200, Bytes::new()));
    assert_eq!(get(&pool, Method::GET).await, (204, Bytes::new()));
    assert_eq!(get(&pool, Method::GET).await, (201, Bytes::from("ok")));
    assert_eq!(m.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_pooled_connection_the_member_closed_is_replaced() {
    // The member answers as if it kept the connection, then closes it anyway.
    let m = scripted(
        vec![vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]],
        After::Close,
    )
    .await;
    let pool = member(m.address);
    assert_eq!(get(&pool, Method::GET).await, (200, Bytes::from("ok")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Without a body: sent again on a fresh connection.
    assert_eq!(get(&pool, Method::GET).await, (200, Bytes::from("ok")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    // With a body: the dead connection is noticed before the body is spent on it.
    let head = b"POST / HTTP/1.1\r\nhost: m\r\ncontent-length: 4\r\n\r\n";
    let response = pool
        .exchange(
            false,
            head,
            Full::new(Bytes::from("data")),
            RequestFraming::Length,
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(m.connections.load(Ordering::SeqCst), 3);
    assert!(m.requests.lock().unwrap()[2].ends_with("\r\n\r\ndata"));
}

#[tokio::test]
async fn request_bodies_go_by_length_or_chunked() {
    let m = scripted(
        vec![vec!["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]],
        After::KeepOpen,
    )
    .await;
    let pool = member(m.address);
    let mut headers = HeaderMap::new();
    let body = Full::new(Bytes::from("hello"));
    assert_eq!(request_framing(&headers, &body), RequestFraming::Chunked);
    let mut head = Vec::new();
    let forwarding = Forwarding {
        rewrite_host: None,
        client: IpAddr::from([10, 0, 0, 1]),
        https: false,
        host: Some("h"),
        upgrade: None,
    };
    write_request_head(
        &mut head,
        &Method::POST,
        "/up",
        &headers,
        &forwarding,
        RequestFraming::Chunked,
    );
    let response = pool
        .exchange(false, &head, body, RequestFraming::Chunked)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    headers.insert("content-length", HeaderValue::from_static("5"));
    let body = Full::new(Bytes::from("hello"));
    assert_eq!(request_framing(&headers, &body), RequestFraming::Length);
    head.clear();
    write_request_head(
        &mut head,
        &Method::PUT,
        "/up",
        &headers,
        &forwarding,
        RequestFraming::Length,
    );
    let response = pool
        .exchange(false, &head, body, RequestFraming::Length)
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let requests = m.requests.lock().unwrap();
    assert!(
        requests[0].contains("transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        requests[1].ends_with("content-length: 5\r\nhost: h\r\nx-forwarded-host: h\r\nx-forwarded-for: 10.0.0.1\r\nx-forwarded-proto: http\r\n\r\nhello"),
        "{}",
        requests[1]
    );
    assert_eq!(m.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_member_closing_inside_the_body_fails_the_body() {
    let m = scripted(
        vec![vec!["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"]],
        After::Close,
    )
    .await;
    let pool = member(m.address);
    let response = pool
        .exchange(
            false,
            &get_head("/"),
            Empty::<Bytes>::new(),
            RequestFraming::Empty,
        )
        .await
        .unwrap();
    assert!(response.into_body().collect().await.is_err());
    assert_eq!(pool.idle_count(), 0);
}

#[tokio::test]
async fn unreachable_members_and_silent_closes_are_errors() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = member(dead)
        .exchange(
            false,
            &get_head("/"),
            Empty::<Bytes>::new(),
            RequestFraming::Empty,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Connect { .. }), "{err}");
    let m = scripted(vec![vec![]], After::Close).await;
    let err = member(m.address)
        .exchange(
            false,
            &get_head("/"),
            Empty::<Bytes>::new(),
            RequestFraming::Empty,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::NoAnswer(_)), "{err}");
}

#[test]
fn the_request_head_drops_hop_by_hop_headers_and_appends_x_forwarded_for() {
    let mut headers = HeaderMap::new();
    headers.insert("host", HeaderValue::from_static("shop:81"));
    headers.insert(
        "connection",
        HeaderValue::from_static("keep-alive, X-Secret"),
    );
    headers.insert("x-secret", HeaderValue::from_static("1"));
    headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
    headers.insert("te", HeaderValue::from_static("trailers"));
    headers.insert("upgrade", HeaderValue::from_static("h2c"));
    headers.insert("expect", HeaderValue::from_static("100-continue"));
    headers.insert("x-forwarded-for", HeaderValue::from_static("1.1.1.1"));
    headers.append("x-forwarded-for", HeaderValue::from_static("2.2.2.2"));
    headers.insert("x-forwarded-proto", HeaderValue::from_static("gopher"));
    headers.insert("x-forwarded-host", HeaderValue::from_static("evil"));
    headers.insert("accept", HeaderValue::from_static("*/*"));
    let mut head = Vec::new();
    write_request_head(
        &mut head,
        &Method::GET,
        "/a/../b?x=%2F",
        &headers,
        &Forwarding {
            rewrite_host: None,
            client: IpAddr::from([127, 0, 0, 1]),
            https: true,
            host: Some("shop:81"),
            upgrade: None,
        },
        RequestFraming::Empty,
    );
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "GET /a/../b?x=%2F HTTP/1.1\r\nhost: shop:81\r\naccept: */*\r\nx-forwarded-host: shop:81\r\nx-forwarded-for: 1.1.1.1, 127.0.0.1\r\nx-forwarded-proto: https\r\n\r\n"
    );
    // HTTP/2 requests carry no Host: it comes from the authority.
    let mut head = Vec::new();
    write_request_head(
        &mut head,
        &Method::GET,
        "/",
        &HeaderMap::new(),
        &Forwarding {
            rewrite_host: None,
            client: "::1".parse().unwrap(),
            https: false,
            host: Some("h2.example"),
            upgrade: None,
        },
        RequestFraming::Empty,
    );
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "GET / HTTP/1.1\r\nhost: h2.example\r\nx-forwarded-host: h2.example\r\nx-forwarded-for: ::1\r\nx-forwarded-proto: http\r\n\r\n"
    );
}

#[test]
fn response_heads_are_framed_as_rfc_9112_says() {
    let parse = |text: &str| parse_response_head(text.as_bytes(), false);
    let head =
        parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n")
            .unwrap()
            .unwrap();
    assert_eq!(head.framing, ResponseFraming::Chunked);
    assert!(!head.headers.contains_key("content-length"));
    assert!(head.keep_alive);
    let head = parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(head.framing, ResponseFraming::UntilClose);
    assert!(!head.keep_alive);
    let head = parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(head.framing, ResponseFraming::Length(2));
    assert!(head.keep_alive);
    assert!(
        parse("HTTP/1.1 200 OK\r\nContent-Length: 2")
            .unwrap()
            .is_none()
    );
    for bad in [
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n",
        "HTTP/1.1 999x OK\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
    let many: String = (0..100).map(|i| format!("X-{i}: {i}\r\n")).collect();
    let head = parse(&format!(
        "HTTP/1.1 200 OK\r\n{many}Content-Length: 1\r\n\r\n"
    ))
    .unwrap()
    .unwrap();
    assert_eq!(head.headers.len(), 101);
    assert!(parse(&format!("HTTP/1.1 200 OK\r\n{}", "X: y\r\n".repeat(20_000))).is_err());
}

#[test]
fn strip_hop_by_hop_removes_listed_headers() {
    let mut headers = HeaderMap::new();
    headers.insert("connection", HeaderValue::from_static("close, x-a"));
    headers.insert("x-a", HeaderValue::from_static("1"));
    headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
    headers.insert("content-type", HeaderValue::from_static("text/plain"));
    strip_hop_by_hop(&mut headers);
    assert_eq!(headers.len(), 1);
    assert!(headers.contains_key("content-type"));
}
