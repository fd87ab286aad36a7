//! The `kuryr-l7` binary: `rules` and `router` with a directory source.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::daemon::Daemon;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

const GOOD: &str = "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: shop}
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /cart, pathType: ImplementationSpecific, backend: {service: {name: cart, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: broken, namespace: shop}
spec:
  rules:
  - http:
      paths:
      - {path: /x, pathType: Regex, backend: {service: {name: cart, port: {number: 80}}}}
---
apiVersion: v1
kind: Service
metadata: {name: cart
";

#[test]
fn rules_prints_policies_pools_rejections_and_read_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shop.yaml"), GOOD).unwrap();
    let output = Command::new(BIN)
        .args(["rules", "--source"])
        .arg(format!("dir:{}", dir.path().display()))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("LISTENER http: 1 policies"), "{text}");
    assert!(
        text.contains("ingress/shop/shop#1  REDIRECT_TO_POOL shop/cart:80"),
        "{text}"
    );
    assert!(
        text.contains("/cart (ImplementationSpecific, as Prefix)"),
        "{text}"
    );
    assert!(
        text.contains("HOST_NAME EQUAL_TO \"shop.example.com\""),
        "{text}"
    );
    assert!(
        text.contains("shop/cart:80  []  (no live member: 503)"),
        "{text}"
    );
    assert!(text.contains("REJECTED Ingress shop/broken"), "{text}");
    assert!(text.contains("unknown pathType \"Regex\""), "{text}");
    assert!(text.contains("WARNING Ingress shop/shop"), "{text}");
    let error = text
        .lines()
        .find(|l| l.starts_with("ERROR "))
        .expect("a read error");
    assert!(error.contains("shop.yaml: line 2"), "{error}");

    let output = Command::new(BIN)
        .args(["rules", "-o", "json", "--source"])
        .arg(format!("dir:{}", dir.path().display()))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["config"]["http"]["policies"][0]["position"], 1);
    assert_eq!(
        json["config"]["http"]["policies"][0]["action"],
        "REDIRECT_TO_POOL"
    );
    assert_eq!(json["rejections"][0]["object"], "Ingress shop/broken");
    assert!(
        json["read_errors"][0]
            .as_str()
            .unwrap()
            .contains("shop.yaml")
    );
}

#[test]
fn rules_refuses_an_unknown_source() {
    let output = Command::new(BIN)
        .args(["rules", "--source", "etcd:x"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("expected dir:PATH or kube"));
}

/// `GET /metrics` from `address`: the body.
async fn scrape(address: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
    reply
}

#[tokio::test]
async fn router_binary_loads_before_binding_and_follows_the_directory() {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    let ingress = |name: &str, path: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  rules:\n  - http:\n      paths:\n      - {{path: {path}, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n"
        )
    };
    std::fs::write(
        dir.path().join("services.yaml"),
        service_yaml("shop", "web", &[web]),
    )
    .unwrap();
    std::fs::write(dir.path().join("a.yaml"), ingress("a", "/a")).unwrap();
    let (listen, metrics) = (dead_address(), dead_address());
    let _daemon = Daemon(
        Command::new(BIN)
            .args([
                "router",
                "--threads",
                "1",
                "--listen",
                &listen.to_string(),
                "--metrics-listen",
                &metrics.to_string(),
                "--source",
            ])
            .arg(format!("dir:{}", dir.path().display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Loaded before binding: the first answer already routes.
    wait_for_answer(listen, "x", "/a", |r| r.status == 200).await;

    // Created.
    std::fs::write(dir.path().join("b.yml"), ingress("b", "/b")).unwrap();
    let took = wait_for_answer(listen, "x", "/b", |r| r.status == 200).await;
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // Changed.
    std::fs::write(dir.path().join("b.yml"), ingress("b", "/c")).unwrap();
    wait_for_answer(listen, "x", "/c", |r| r.status == 200).await;
    assert_eq!(get(listen, "x", "/b").await.status, 404);
    // Renamed away from *.yaml.
    std::fs::rename(dir.path().join("b.yml"), dir.path().join("b.yml.off")).unwrap();
    wait_for_answer(listen, "x", "/c", |r| r.status == 404).await;
    // A malformed file: its good documents still apply; the rest keeps serving.
    std::fs::write(
        dir.path().join("bad.yaml"),
        format!("{}---\nkind: [\n", ingress("d", "/d")),
    )
    .unwrap();
    wait_for_answer(listen, "x", "/d", |r| r.status == 200).await;
    assert_eq!(get(listen, "x", "/a").await.status, 200);
    // Removed.
    std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
    wait_for_answer(listen, "x", "/a", |r| r.status == 404).await;

    // What it served, on --metrics-listen.
    let text = scrape(metrics).await;
    let value = |series: &str| {
        text.lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        })
    };
    assert!(
        value("kuryr_l7_router_table_updates_total").is_some_and(|n| n >= 4.0),
        "{text}"
    );
    assert_eq!(value("kuryr_l7_router_pools"), Some(1.0), "{text}");
    assert!(
        value("kuryr_l7_router_responses_total{pool=\"\",code=\"4xx\"}").is_some_and(|n| n >= 2.0),
        "404s answered without a pool: {text}"
    );
    assert!(text.contains("code=\"2xx\"} "), "{text}");
}

/// Waits (15 s at most) until connecting to `address` succeeds or fails, as `want`.
async fn until_connect(address: std::net::SocketAddr, want: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while tokio::net::TcpStream::connect(address).await.is_ok() != want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{address}: connecting never {}",
            if want { "succeeded" } else { "failed" }
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn router_binary_drains_on_sigterm() {
    let (member, mut held, release) = held_member().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("all.yaml"),
        format!(
            "{}---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i, namespace: shop}}\nspec:\n  defaultBackend: {{service: {{name: web, port: {{number: 80}}}}}}\n",
            service_yaml("shop", "web", &[member])
        ),
    )
    .unwrap();
    let listen = dead_address();
    let mut daemon = Daemon(
        Command::new(BIN)
            .args(["router", "--threads", "1", "--shutdown-grace", "30s"])
            .arg("--listen")
            .arg(listen.to_string())
            .arg("--source")
            .arg(format!("dir:{}", dir.path().display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    until_connect(listen, true).await;
    let request = tokio::spawn(get(listen, "x", "/in-flight"));
    held.recv().await.unwrap();

    let pid = nix::unistd::Pid::from_raw(i32::try_from(daemon.0.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    until_connect(listen, false).await;
    assert!(
        daemon.0.try_wait().unwrap().is_none(),
        "still running: a request is in flight"
    );
    release.add_permits(1);
    let reply = request.await.unwrap();
    assert_eq!((reply.status, reply.body.as_str()), (200, "released"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = daemon.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no exit after the drain"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status}");
}

#[test]
fn router_binary_refuses_a_missing_directory() {
    let output = Command::new(BIN)
        .args([
            "router",
            "--listen",
            "127.0.0.1:0",
            "--source",
            "dir:/nonexistent/kuryr-l7",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("cannot read directory /nonexistent/kuryr-l7")
    );
}
