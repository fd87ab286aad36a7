//! The `haproxy` driver: a controller with `--driver haproxy` configures and reloads a real
//! HAProxy 2.6 (Debian); the routing and TLS conformance cases answer the same as on the
//! embedded router, and reloads under load lose no connection.

mod support;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_kuryr_l7::haproxy::{Haproxy, HaproxySettings};
use nephrite_kuryr_l7::source::{Snapshot, read_file};
use nephrite_l7::{CompareType, Options, Rule, RuleType};
use nephrite_test_services::process::runs;
use nephrite_test_services::{Tool, tool};
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

/// A controller, and the state directory of the HAProxy it drives.
struct Daemon(Child, PathBuf);

impl Drop for Daemon {
    fn drop(&mut self) {
        // SIGTERM: the controller stops HAProxy on its way out.
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        // Longer than the driver's own bound on HAProxy's soft stop (10 s), so that the
        // controller is not killed half way through stopping it.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) && !matches!(self.0.try_wait(), Ok(Some(_)))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        // Whatever happened, the test's HAProxy must not outlive the test; say so when it
        // would have (a controller that did not stop its HAProxy is a bug to see).
        if let Some(pid) = std::fs::read_to_string(self.1.join("haproxy.pid"))
            .ok()
            .and_then(|pid| pid.trim().parse::<u32>().ok())
            && runs(pid)
        {
            eprintln!("haproxy (pid {pid}) outlived its controller: killing it");
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// A controller driving HAProxy on `source`, with `extra` arguments; HAProxy's HTTP address.
fn controller(
    haproxy: &Path,
    source: &Path,
    work: &Path,
    extra: &[String],
) -> (Daemon, SocketAddr) {
    let listen = dead_address();
    let daemon = Daemon(
        Command::new(BIN)
            .args(["controller", "--driver", "haproxy", "--listen"])
            .arg(dead_address().to_string())
            .args(extra)
            .arg("--haproxy-listen")
            .arg(listen.to_string())
            .arg("--haproxy-bin")
            .arg(haproxy)
            .arg("--haproxy-dir")
            .arg(work)
            .arg("--source")
            .arg(format!("dir:{}", source.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        work.to_owned(),
    );
    (daemon, listen)
}

fn haproxy_or_skip(test: &str) -> Option<PathBuf> {
    match tool(Tool::Haproxy) {
        Ok(path) => Some(path),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

#[tokio::test]
async fn routing_conformance_cases_through_haproxy() {
    let Some(haproxy) = haproxy_or_skip("routing_conformance_cases_through_haproxy") else {
        return;
    };
    let source = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    conformance::write_objects(source.path()).await;
    let (_controller, http) = controller(&haproxy, source.path(), work.path(), &[]);
    wait_for_answer(http, "shop.example.com", "/api", |r| r.status == 200).await;
    conformance::check(http).await;
    let config = std::fs::read_to_string(work.path().join("haproxy.cfg")).unwrap();
    assert!(config.contains("master-worker") && config.contains("expose-fd listeners"));
}

#[tokio::test]
async fn tls_conformance_cases_through_haproxy() {
    let Some(haproxy) = haproxy_or_skip("tls_conformance_cases_through_haproxy") else {
        return;
    };
    let source = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let fixture = tls_conformance::write_objects(source.path()).await;
    let (cert, key) = (
        secrets.path().join("tls.crt"),
        secrets.path().join("tls.key"),
    );
    std::fs::write(&cert, &fixture.default_cert).unwrap();
    std::fs::write(&key, &fixture.default_key).unwrap();
    let https = dead_address();
    let extra = [
        "--haproxy-listen-tls".to_owned(),
        https.to_string(),
        "--default-cert".to_owned(),
        cert.display().to_string(),
        "--default-key".to_owned(),
        key.display().to_string(),
    ];
    let (_controller, http) = controller(&haproxy, source.path(), work.path(), &extra);
    wait_for_answer(http, "allow.example.com", "/", |r| r.status == 200).await;
    tls_conformance::check(http, https, &fixture).await;

    // Certificates and their keys are written for the owner only; the crt-list names them.
    let list = std::fs::read_to_string(work.path().join("crt-list")).unwrap();
    assert!(
        list.contains("shop.example.com") && list.contains("edge.example.com"),
        "{list}"
    );
    let mut keys = 0;
    for entry in std::fs::read_dir(work.path()).unwrap() {
        let entry = entry.unwrap();
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if text.contains("PRIVATE KEY") {
            keys += 1;
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", entry.path().display());
        }
    }
    assert_eq!(keys, 3, "default, shop and edge certificates");
    // The configuration is not only valid but free of warnings.
    let check = Command::new(&haproxy)
        .arg("-c")
        .arg("-f")
        .arg(work.path().join("haproxy.cfg"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stderr);
    assert!(
        check.status.success() && !said.contains("WARNING"),
        "{said}"
    );
}

#[tokio::test]
async fn twenty_reloads_under_wrk_give_no_socket_error() {
    // Plain HTTP and TLS alike.
    let Some(haproxy) = haproxy_or_skip("twenty_reloads_under_wrk_give_no_socket_error") else {
        return;
    };
    let wrk = match tool(Tool::Wrk) {
        Ok(path) => path,
        Err(e) => return e.skip("twenty_reloads_under_wrk_give_no_socket_error"),
    };
    let web = echo("web").await;
    let work = tempfile::tempdir().unwrap();
    let snapshot = |i: usize| {
        let yaml = format!(
            "{}apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: moving, namespace: shop}}\nspec:\n  rules:\n  - host: load.example.com\n    http:\n      paths:\n      - {{path: /stable, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n      - {{path: /p{i}, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n",
            service_yaml("shop", "web", &[web])
        );
        let mut objects = Vec::new();
        let mut errors = Vec::new();
        read_file(Path::new("load.yaml"), &yaml, &mut objects, &mut errors);
        Snapshot::build(&objects, errors, &Options::default())
    };
    let (http, https) = (dead_address(), dead_address());
    let driver = Haproxy::start(
        HaproxySettings {
            binary: haproxy,
            listen: http,
            listen_tls: Some(https),
            dir: work.path().to_owned(),
            default_certificate: Some(certificate(&["load.example.com"])),
        },
        &snapshot(0),
    )
    .await
    .unwrap();
    wait_for_answer(http, "load.example.com", "/stable", |r| r.status == 200).await;

    let script = work.path().join("host.lua");
    std::fs::write(&script, "wrk.headers[\"Host\"] = \"load.example.com\"\n").unwrap();
    // Plain HTTP and TLS (terminated with the default certificate) under load at once.
    let loads: Vec<Child> = [
        format!("http://{http}/stable"),
        format!("https://{https}/stable"),
    ]
    .iter()
    .map(|url| {
        std::process::Command::new(&wrk)
            .args(["-t1", "-c8", "-d60s", "-s"])
            .arg(&script)
            .arg(url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    })
    .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    for i in 1..=20 {
        assert!(driver.apply(&snapshot(i)).await.unwrap(), "reload {i}");
        wait_for_answer(http, "load.example.com", &format!("/p{i}"), |r| {
            r.status == 200
        })
        .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reloading = start.elapsed();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for load in loads {
        // wrk stops on SIGINT and prints its report.
        let _ = Command::new("kill")
            .args(["-INT", &load.id().to_string()])
            .status();
        let output = load.wait_with_output().unwrap();
        let report = String::from_utf8_lossy(&output.stdout);
        eprintln!("20 reloads in {reloading:?} under wrk:\n{report}");
        assert!(output.status.success(), "{report}");
        assert!(report.contains("requests in"), "{report}");
        assert!(!report.contains("Socket errors"), "{report}");
        assert!(!report.contains("Non-2xx"), "{report}");
    }
    // The same content again is no reload.
    assert!(!driver.apply(&snapshot(20)).await.unwrap());

    // A rule Rust's regex accepts but HAProxy's PCRE refuses: `haproxy -c` stops it, the
    // running configuration keeps serving.
    let mut bad = snapshot(21);
    let listener = &mut bad.translation.config.http;
    let name = listener.policies()[0].name.clone();
    let mut policy = listener.remove_policy(&name).unwrap();
    policy
        .rules
        .push(Rule::new(RuleType::Header, CompareType::Regex, "(?-u:\\w)").with_key("X-Mode"));
    listener.insert_policy(policy, Some(1)).unwrap();
    let err = driver.apply(&bad).await.unwrap_err();
    assert!(err.to_string().contains("haproxy -c refused"), "{err}");
    assert_eq!(get(http, "load.example.com", "/p20").await.status, 200);
    driver.stop().await;
}

#[tokio::test]
async fn a_restart_takes_over_from_a_haproxy_its_predecessor_left_running() {
    let Some(haproxy) =
        haproxy_or_skip("a_restart_takes_over_from_a_haproxy_its_predecessor_left_running")
    else {
        return;
    };
    let (web, cart) = (echo("web").await, echo("cart").await);
    let work = tempfile::tempdir().unwrap();
    // The same Ingress, its backend moved from `web` to `cart` between the two starts.
    let snapshot = |service: &str| {
        let yaml = format!(
            "{}{}apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: shop, namespace: shop}}\nspec:\n  rules:\n  - host: take.example.com\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: {service}, port: {{number: 80}}}}}}}}\n",
            service_yaml("shop", "web", &[web]),
            service_yaml("shop", "cart", &[cart]),
        );
        let mut objects = Vec::new();
        let mut errors = Vec::new();
        read_file(Path::new("shop.yaml"), &yaml, &mut objects, &mut errors);
        Snapshot::build(&objects, errors, &Options::default())
    };
    let settings = HaproxySettings {
        binary: haproxy,
        listen: dead_address(),
        listen_tls: None,
        dir: work.path().to_owned(),
        default_certificate: None,
    };
    let http = settings.listen;
    let first = Haproxy::start(settings.clone(), &snapshot("web"))
        .await
        .unwrap();
    wait_for_answer(http, "take.example.com", "/", |r| r.body.starts_with("web")).await;
    let pidfile = work.path().join("haproxy.pid");
    let stale: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    // The controller dies without stopping HAProxy, as under SIGKILL: its handle is never
    // dropped, and that HAProxy keeps serving the old rules.
    std::mem::forget(first);
    assert!(runs(stale));

    let second = Haproxy::start(settings, &snapshot("cart")).await.unwrap();
    let start = Instant::now();
    while runs(stale) {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the earlier haproxy (pid {stale}) is still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let own: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(own, stale, "the new master records its own pid");
    for _ in 0..20 {
        let reply = get(http, "take.example.com", "/").await;
        assert!(reply.body.starts_with("cart"), "{}", reply.body);
    }
    // The HAProxy that took over reloads as any other (its own master, not the old pid).
    assert!(second.apply(&snapshot("web")).await.unwrap());
    wait_for_answer(http, "take.example.com", "/", |r| r.body.starts_with("web")).await;
    second.stop().await;
    assert!(!runs(own), "stopping the new haproxy stops it");
}

#[tokio::test]
async fn haproxy_refuses_h2c_upgrades_and_serves_the_request_as_http_1_1() {
    let Some(haproxy) =
        haproxy_or_skip("haproxy_refuses_h2c_upgrades_and_serves_the_request_as_http_1_1")
    else {
        return;
    };
    let member = h2c_member().await;
    let work = tempfile::tempdir().unwrap();
    let yaml = format!(
        "{}apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: i, namespace: ns}}\nspec:\n  rules:\n  - http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: h2c, port: {{number: 80}}}}}}}}\n",
        service_yaml("ns", "h2c", &[member])
    );
    let mut objects = Vec::new();
    let mut errors = Vec::new();
    read_file(Path::new("h2c.yaml"), &yaml, &mut objects, &mut errors);
    let settings = HaproxySettings {
        binary: haproxy,
        listen: dead_address(),
        listen_tls: None,
        dir: work.path().to_owned(),
        default_certificate: None,
    };
    let http = settings.listen;
    let driver = Haproxy::start(
        settings,
        &Snapshot::build(&objects, errors, &Options::default()),
    )
    .await
    .unwrap();
    // The member would switch to h2c (101) if the upgrade reached it.
    assert_eq!(raw(http, H2C_UPGRADE).await, 200);
    driver.stop().await;
}
