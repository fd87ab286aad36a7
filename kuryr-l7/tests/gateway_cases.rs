//! The Gateway API conformance cases of `core/l7` with real traffic through the embedded router
//! and through a real HAProxy 2.6 (Debian), each fed the translation of the case's objects
//! (`tests/support/gateway_cases.rs`). Every request a driver serves must pass; what a driver
//! cannot serve is skipped by its capabilities and listed (the README's table).

mod support;

use nephrite_kuryr_l7::haproxy::{Haproxy, HaproxySettings};
use nephrite_kuryr_l7::router::{Router, RouterConfig};
use nephrite_kuryr_l7::source::Snapshot;
use nephrite_l7::gateway::capabilities::Driver;
use nephrite_l7::{Options, Pool};
use nephrite_test_services::{Tool, tool};
use support::gateway_cases::{
    Addresses, CaseResult, Prepared, case_files, check, prepare, prepare_text, stem,
};
use support::{certificate, dead_address};
use tokio::net::TcpListener;

fn router_cycle(pool: &Pool) -> u64 {
    pool.members
        .iter()
        .map(|m| u64::from(m.weight))
        .sum::<u64>()
        + u64::from(pool.unavailable_weight)
}

fn haproxy_cycle(pool: &Pool) -> u64 {
    nephrite_l7::haproxy::weights(pool)
        .iter()
        .map(|w| u64::from(*w))
        .sum()
}

fn report(driver: &str, results: &[(String, CaseResult)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (file, result) in results {
        println!(
            "{driver} {file}: {} passed, {} failed, {} skipped {:?}",
            result.passed.len(),
            result.failures.len(),
            result.skipped.len(),
            result.skipped
        );
        failures.extend(result.failures.iter().map(|f| format!("{file}: {f}")));
    }
    failures
}

async fn start_router(prepared: &Prepared) -> Addresses {
    let (cert, key) = certificate(&["default.invalid"]);
    let snapshot = Snapshot::build(&prepared.objects, Vec::new(), &Options::default());
    let config = RouterConfig {
        default_certificate: Some((cert, key)),
        ..RouterConfig::default()
    };
    let router = Router::new(config, snapshot.table.clone()).expect("router");
    let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let https = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addresses = Addresses {
        http: http.local_addr().expect("address"),
        https: https.local_addr().expect("address"),
    };
    tokio::spawn(router.clone().serve_http(http));
    tokio::spawn(router.clone().serve_https(https));
    addresses
}

#[tokio::test]
async fn a_wrong_expectation_fails_with_real_traffic() {
    // The runner must be able to fail: the rewrite case expecting the path unchanged, and the
    // mirror case expecting a copy the route does not send.
    for (file, from, to, failure) in [
        (
            "extended-httproute-url-rewrite",
            "path: /one/x/y}",
            "path: /prefix/x/y}",
            "path: expected \"/prefix/x/y\"",
        ),
        (
            "extended-httproute-request-mirror",
            "mirrors: []}",
            "mirrors: [infra/mirror]}",
            "mirrors: expected [\"infra/mirror\"], got []",
        ),
    ] {
        let path = case_files()
            .into_iter()
            .find(|p| stem(p) == file)
            .expect("case file");
        let text = std::fs::read_to_string(&path)
            .expect("case")
            .replacen(from, to, 1);
        assert!(text.contains(to), "{file}: {from:?} not found");
        let prepared = prepare_text(file, &text).await;
        let addresses = start_router(&prepared).await;
        let result = check(&prepared, Driver::Router, addresses, router_cycle).await;
        assert_eq!(result.failures.len(), 1, "{file}: {:?}", result.failures);
        assert!(
            result.failures[0].contains(failure),
            "{:?}",
            result.failures
        );
    }
}

#[tokio::test]
async fn every_case_passes_on_the_embedded_router() {
    let mut results = Vec::new();
    for path in case_files() {
        let prepared = prepare(&path).await;
        let addresses = start_router(&prepared).await;
        let result = check(&prepared, Driver::Router, addresses, router_cycle).await;
        assert!(
            result
                .skipped
                .iter()
                .all(|(_, why)| why.contains("listener port")),
            "{}: the router skips only port-only requests: {:?}",
            prepared.file,
            result.skipped
        );
        results.push((prepared.file.clone(), result));
    }
    let failures = report("router", &results);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let passed: usize = results.iter().map(|(_, r)| r.passed.len()).sum();
    assert!(passed >= 60, "only {passed} requests passed");
}

#[tokio::test]
async fn every_case_passes_on_haproxy_but_mirrors() {
    let haproxy = match tool(Tool::Haproxy) {
        Ok(path) => path,
        Err(e) => {
            e.skip("every_case_passes_on_haproxy_but_mirrors");
            return;
        }
    };
    let (cert, key) = certificate(&["default.invalid"]);
    let mut results = Vec::new();
    for path in case_files() {
        let prepared = prepare(&path).await;
        let snapshot = Snapshot::build(&prepared.objects, Vec::new(), &Options::default());
        let work = tempfile::tempdir().expect("tempdir");
        let settings = HaproxySettings {
            binary: haproxy.clone(),
            listen: dead_address(),
            listen_tls: Some(dead_address()),
            dir: work.path().to_owned(),
            default_certificate: Some((cert.clone(), key.clone())),
        };
        let addresses = Addresses {
            http: settings.listen,
            https: settings.listen_tls.expect("TLS address"),
        };
        let driver = Haproxy::start(settings, &snapshot)
            .await
            .unwrap_or_else(|e| panic!("{}: HAProxy: {e}", prepared.file));
        support::wait_for_answer(addresses.http, "ready.invalid", "/", |r| r.status != 0).await;
        let result = check(&prepared, Driver::Haproxy, addresses, haproxy_cycle).await;
        driver.stop().await;
        results.push((prepared.file.clone(), result));
    }
    let failures = report("haproxy", &results);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
