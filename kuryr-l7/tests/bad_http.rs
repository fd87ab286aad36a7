//! Malformed HTTP from clients: 400, and the router keeps serving. The corpus in
//! `tests/corpus/bad-requests.txt` holds hand-picked nasty inputs; a property test throws
//! generated request lines, headers and paths at it.

mod support;

use std::net::SocketAddr;

use nephrite_kuryr_l7::router::RouterConfig;
use proptest::prelude::*;
use support::*;

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
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i, namespace: ns}\nspec:\n  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n";
    std::fs::write(
        dir.path().join("all.yaml"),
        format!("{}{ingress}", service_yaml("ns", "web", &[web])),
    )
    .unwrap();
    let (_router, http, _) = router(dir.path(), RouterConfig::default()).await;
    (dir, http)
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
