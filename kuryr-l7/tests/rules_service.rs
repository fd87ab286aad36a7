//! The rules service end to end with the real binary: controllers serving a directory's rules,
//! routers following them (failover, restart, two routers), and `rules --rules URL`.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::daemon::Daemon;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

fn ingress(name: &str, path: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  rules:\n  - http:\n      paths:\n      - {{path: {path}, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n"
    )
}

fn controller(dir: &Path) -> (Daemon, SocketAddr) {
    let listen = dead_address();
    (controller_on(dir, listen), listen)
}

fn controller_on(dir: &Path, listen: SocketAddr) -> Daemon {
    Daemon(
        Command::new(BIN)
            .args(["controller", "--driver", "embedded", "--listen"])
            .arg(listen.to_string())
            .arg("--source")
            .arg(format!("dir:{}", dir.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn router(name: &str, controllers: &[SocketAddr], extra: &[&str]) -> (Daemon, SocketAddr) {
    let listen = dead_address();
    let urls: Vec<String> = controllers.iter().map(ToString::to_string).collect();
    let daemon = Daemon(
        Command::new(BIN)
            .args(["router", "--threads", "1", "--name", name, "--listen"])
            .arg(listen.to_string())
            .arg("--rules")
            .arg(urls.join(","))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (daemon, listen)
}

fn rules(url: SocketAddr, output: &str) -> Option<String> {
    let out = Command::new(BIN)
        .args(["rules", "-o", output, "--rules"])
        .arg(url.to_string())
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < Duration::from_secs(15), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn version(url: SocketAddr) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(&rules(url, "json")?).ok()?;
    json["version"].as_str().map(str::to_owned)
}

async fn setup() -> (tempfile::TempDir, SocketAddr) {
    let web = echo("web").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("services.yaml"),
        service_yaml("shop", "web", &[web]),
    )
    .unwrap();
    std::fs::write(dir.path().join("a.yaml"), ingress("a", "/a")).unwrap();
    (dir, web)
}

#[tokio::test]
async fn routers_follow_fail_over_and_keep_their_last_version() {
    let (dir, _web) = setup().await;
    let (mut first, url1) = controller(dir.path());
    let (_second, url2) = controller(dir.path());
    wait_until("both controllers answer", || {
        version(url1).is_some() && version(url2).is_some()
    })
    .await;
    // Both controllers compute the same version from the same source.
    assert_eq!(version(url1), version(url2));

    let (_router, listen) = router("r1", &[url1, url2], &[]);
    wait_for_answer(listen, "x", "/a", |r| r.status == 200).await;
    let table = rules(url1, "table").unwrap();
    assert!(table.starts_with("VERSION "), "{table}");
    wait_until("r1 acknowledged the current version", || {
        rules(url1, "table").is_some_and(|t| t.contains("  r1  ") && t.contains("  current  "))
    })
    .await;

    // The first controller dies: the router fails over and follows the second.
    first.0.kill().unwrap();
    let _ = first.0.wait();
    std::fs::write(dir.path().join("b.yaml"), ingress("b", "/b")).unwrap();
    wait_for_answer(listen, "x", "/b", |r| r.status == 200).await;
    let current = version(url2).unwrap();
    wait_until("r1 acknowledged the new version to the second", || {
        rules(url2, "json").is_some_and(|t| {
            let json: serde_json::Value = serde_json::from_str(&t).unwrap();
            json["routers"][0]["version"] == current.as_str()
        })
    })
    .await;

    // No controller answers: the router keeps serving its last version.
    drop(_second);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(listen, "x", "/a").await.status, 200);
    assert_eq!(get(listen, "x", "/b").await.status, 200);
    // A controller comes back with new content: the router follows it again.
    std::fs::write(dir.path().join("c.yaml"), ingress("c", "/c")).unwrap();
    let _back = controller_on(dir.path(), url2);
    wait_for_answer(listen, "x", "/c", |r| r.status == 200).await;
}

#[tokio::test]
async fn a_restarted_router_serves_the_current_version_at_once_and_two_routers_serve_alone() {
    let (dir, _web) = setup().await;
    let (_controller, url) = controller(dir.path());
    wait_until("the controller answers", || version(url).is_some()).await;
    let (mut r1, listen1) = router("r1", &[url], &[]);
    let (r2, listen2) = router("r2", &[url], &[]);
    wait_for_answer(listen1, "x", "/a", |r| r.status == 200).await;
    wait_for_answer(listen2, "x", "/a", |r| r.status == 200).await;

    // Losing one router loses nothing on the other.
    drop(r2);
    for _ in 0..20 {
        assert_eq!(get(listen1, "x", "/a").await.status, 200);
    }

    // Restart r1 after a change: it serves the current version as soon as it listens.
    r1.0.kill().unwrap();
    let _ = r1.0.wait();
    std::fs::write(dir.path().join("b.yaml"), ingress("b", "/b")).unwrap();
    let current = {
        let before = version(url).unwrap();
        let mut now = before.clone();
        let start = Instant::now();
        while now == before && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            now = version(url).unwrap();
        }
        now
    };
    let start = Instant::now();
    let _r1 = Daemon(
        Command::new(BIN)
            .args(["router", "--threads", "1", "--name", "r1", "--listen"])
            .arg(listen1.to_string())
            .arg("--rules")
            .arg(url.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_answer(listen1, "x", "/b", |r| r.status != 0).await;
    // The first answer it gives is already the current version's.
    assert_eq!(get(listen1, "x", "/b").await.status, 200);
    eprintln!(
        "restarted router served version {} after {:?}",
        &current[..12],
        start.elapsed()
    );
}

#[tokio::test]
async fn a_router_restarted_while_no_controller_answers_serves_its_cached_rules() {
    let (dir, _web) = setup().await;
    let cache = dir.path().join("rules.cache");
    let cache_arg = cache.to_string_lossy().into_owned();
    let (controller_daemon, url) = controller(dir.path());
    wait_until("the controller answers", || version(url).is_some()).await;
    let (router1, listen) = router("r1", &[url], &["--rules-cache", &cache_arg]);
    wait_for_answer(listen, "x", "/a", |r| r.status == 200).await;
    drop(router1);
    drop(controller_daemon);
    let listen2 = dead_address();
    let _router2 = Daemon(
        Command::new(BIN)
            .args([
                "router",
                "--name",
                "r1",
                "--rules-wait",
                "100ms",
                "--listen",
            ])
            .arg(listen2.to_string())
            .arg("--rules")
            .arg(url.to_string())
            .args(["--rules-cache", &cache_arg])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_answer(listen2, "x", "/a", |r| r.status == 200).await;
}

#[test]
fn the_neutron_driver_without_credentials_is_refused_naming_what_is_missing() {
    let output = Command::new(BIN)
        .args([
            "controller",
            "--listen",
            "127.0.0.1:0",
            "--source",
            "dir:/tmp",
            "--driver",
            "neutron_l7_policy",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the octavia driver needs credentials")
            && stderr.contains("--os-auth-type"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_restarted_controller_names_the_same_rules_with_the_same_version() {
    let (dir, _web) = setup().await;
    let (first, url) = controller(dir.path());
    wait_until("the controller answers", || version(url).is_some()).await;
    let before = version(url).unwrap();
    drop(first);
    let (_again, url2) = controller(dir.path());
    wait_until("the controller answers", || version(url2).is_some()).await;
    assert_eq!(version(url2).unwrap(), before);
}

#[tokio::test]
async fn a_router_leaves_a_controller_that_hangs() {
    let (dir, _web) = setup().await;
    let (hung, url1) = controller(dir.path());
    let (_second, url2) = controller(dir.path());
    wait_until("both controllers answer", || {
        version(url1).is_some() && version(url2).is_some()
    })
    .await;
    let (_router, listen) = router("r1", &[url1, url2], &[]);
    wait_for_answer(listen, "x", "/a", |r| r.status == 200).await;
    // The first controller stops answering without closing its connections.
    Command::new("kill")
        .args(["-STOP", &hung.0.id().to_string()])
        .status()
        .unwrap();
    std::fs::write(dir.path().join("b.yaml"), ingress("b", "/b")).unwrap();
    let took = wait_for_answer(listen, "x", "/b", |r| r.status == 200).await;
    eprintln!("router left the hung controller and served the new version after {took:?}");
    Command::new("kill")
        .args(["-CONT", &hung.0.id().to_string()])
        .status()
        .unwrap();
}
