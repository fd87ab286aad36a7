//! The Gateway API conformance cases (`tests/gateway/cases/*.yaml`) run against the pure
//! evaluator: every request's decision, every weighted split exactly, and every expected
//! status condition. The drivers run the same files (see `gateway::conformance`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use nephrite_l7::gateway::capabilities::{Driver, DriverCapabilities, Served};
use nephrite_l7::gateway::conformance::{
    Case, Observed, RequestCase, StatusExpectation, SupportLevel, support_for,
};
use nephrite_l7::gateway::status::{GatewayAddress, decide};
use nephrite_l7::gateway::{CompiledGateway, ObjectKey, Settings, build};
use serde_json::Value;

/// Every pick in `0..PICKS` is tried for a split: a multiple of every total weight up to 12 and
/// of 100, so each backend's count is exactly its share.
const PICKS: u64 = 277_200;
const NOW: &str = "2026-06-01T00:00:00Z";

fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gateway/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn load(path: &Path) -> Case {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    Case::from_yaml(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn check_request(gateway: &CompiledGateway, request: &RequestCase) -> Vec<String> {
    let http = request.request.to_request();
    let backend_headers: Vec<(String, String)> = request
        .backend_response_headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut failures = Vec::new();
    if let Some(expect) = &request.expect {
        let observed = Observed::from_decision(&gateway.route(&http, 0), &backend_headers);
        failures.extend(expect.check(&observed));
    }
    if !request.split.is_empty() {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for pick in 0..PICKS {
            let observed = Observed::from_decision(&gateway.route(&http, pick), &backend_headers);
            let who = observed
                .backend
                .unwrap_or_else(|| format!("status {}", observed.status));
            *counts.entry(who).or_default() += 1;
        }
        let total: u64 = request.split.values().sum();
        let expected: BTreeMap<String, u64> = request
            .split
            .iter()
            .filter(|(_, share)| **share > 0)
            .map(|(who, share)| (who.clone(), PICKS * share / total))
            .collect();
        if counts != expected {
            failures.push(format!(
                "split over {PICKS} picks: expected {expected:?}, got {counts:?}"
            ));
        }
    }
    failures
        .into_iter()
        .map(|f| format!("request {:?}: {f}", request.name))
        .collect()
}

fn conditions_of(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c.get("type")?.as_str()?.to_owned(),
                format!(
                    "{}/{}",
                    c.get("status")?.as_str()?,
                    c.get("reason")?.as_str()?
                ),
            ))
        })
        .collect()
}

fn check_status(
    expectation: &StatusExpectation,
    statuses: &BTreeMap<(String, String, String), Value>,
) -> Vec<String> {
    let who = format!(
        "{} {}/{}",
        expectation.kind,
        expectation.namespace.as_deref().unwrap_or(""),
        expectation.name
    );
    let key = (
        expectation.kind.clone(),
        expectation.namespace.clone().unwrap_or_default(),
        expectation.name.clone(),
    );
    let Some(status) = statuses.get(&key) else {
        return vec![format!("{who}: no status written")];
    };
    let (scope, holder) = if let Some(listener) = &expectation.listener {
        let found = status["listeners"]
            .as_array()
            .and_then(|ls| ls.iter().find(|l| l["name"] == listener.as_str()));
        (format!("{who} listener {listener}"), found)
    } else if expectation.kind == "HTTPRoute" {
        let parents = status["parents"].as_array();
        let found = parents.and_then(|ps| match &expectation.parent {
            Some(parent) => ps
                .iter()
                .find(|p| p["parentRef"]["name"] == parent.as_str()),
            None => ps.first(),
        });
        (format!("{who} parent {:?}", expectation.parent), found)
    } else {
        (who.clone(), Some(status))
    };
    let Some(holder) = holder else {
        return vec![format!("{scope}: not in status {status}")];
    };
    let mut failures = Vec::new();
    let got = conditions_of(holder.get("conditions"));
    for (type_, want) in &expectation.conditions {
        if got.get(type_) != Some(want) {
            failures.push(format!(
                "{scope}: condition {type_}: expected {want}, got {:?}",
                got.get(type_)
            ));
        }
    }
    if let Some(want) = expectation.attached_routes
        && holder["attachedRoutes"] != want
    {
        failures.push(format!(
            "{scope}: attachedRoutes: expected {want}, got {}",
            holder["attachedRoutes"]
        ));
    }
    failures
}

fn run(case: &Case) -> Vec<String> {
    let settings = Settings::default();
    let model = build(&case.objects, &settings);
    let mut failures: Vec<String> = model
        .errors
        .iter()
        .map(|e| format!("object error: {e}"))
        .collect();
    let key = case.spec.gateway.key();
    match model.compiled_gateway(&key) {
        Some(gateway) => {
            for request in &case.spec.requests {
                failures.extend(check_request(gateway, request));
            }
        }
        None => failures.push(format!("Gateway {key} is not compiled")),
    }
    let addresses: BTreeMap<ObjectKey, Vec<GatewayAddress>> = model
        .gateways
        .iter()
        .map(|g| (g.gateway.clone(), vec![GatewayAddress::new("192.0.2.10")]))
        .collect();
    let statuses: BTreeMap<(String, String, String), Value> =
        decide(&case.objects, &model, &settings, &addresses, NOW)
            .into_iter()
            .map(|u| ((u.kind, u.namespace, u.name), u.status))
            .collect();
    for expectation in &case.spec.status {
        failures.extend(check_status(expectation, &statuses));
    }
    failures
}

#[test]
fn every_case_passes_against_the_evaluator() {
    let files = case_files();
    assert!(
        files.len() >= 15,
        "expected the case set, found {} files",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        let case = load(path);
        for failure in run(&case) {
            failures.push(format!(
                "{}: {failure}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The features of the Build 1, by the group upstream conformance puts them in.
const REQUIRED: &[(SupportLevel, &str)] = &[
    (SupportLevel::Core, "HTTPRoute"),
    (SupportLevel::Core, "HTTPRouteHostnameIntersection"),
    (SupportLevel::Core, "HTTPRouteMatchingAcrossRoutes"),
    (SupportLevel::Core, "HTTPRoutePathMatching"),
    (SupportLevel::Core, "HTTPRouteHeaderMatching"),
    (SupportLevel::Core, "HTTPRouteCrossNamespace"),
    (SupportLevel::Core, "GatewayAllowedRoutes"),
    (SupportLevel::Core, "HTTPRouteInvalidBackendRefs"),
    (SupportLevel::Core, "GatewayHTTPSListener"),
    (SupportLevel::Core, "HTTPRouteRequestHeaderModification"),
    (SupportLevel::Core, "HTTPRouteRequestRedirect"),
    (SupportLevel::Core, "HTTPRouteWeight"),
    (SupportLevel::Extended, "HTTPRouteQueryParamMatching"),
    (SupportLevel::Extended, "HTTPRouteMethodMatching"),
    (SupportLevel::Extended, "HTTPRoutePathRegexMatching"),
    (
        SupportLevel::Extended,
        "HTTPRouteResponseHeaderModification",
    ),
    (SupportLevel::Extended, "HTTPRouteSchemeRedirect"),
    (SupportLevel::Extended, "HTTPRoutePortRedirect"),
    (SupportLevel::Extended, "HTTPRoutePathRedirect"),
    (SupportLevel::Extended, "HTTPRouteRedirectStatusCodes"),
    (SupportLevel::Extended, "HTTPRouteHostRewrite"),
    (SupportLevel::Extended, "HTTPRoutePathRewrite"),
    (SupportLevel::Extended, "HTTPRouteRequestMirror"),
];

#[test]
fn the_cases_cover_every_feature_in_its_upstream_group() {
    let covered: BTreeSet<(SupportLevel, String)> = case_files()
        .iter()
        .map(|path| load(path))
        .flat_map(|case| {
            let level = case.spec.support;
            case.spec.features.into_iter().map(move |f| (level, f))
        })
        .collect();
    let missing: Vec<_> = REQUIRED
        .iter()
        .filter(|(level, feature)| !covered.contains(&(*level, (*feature).to_owned())))
        .collect();
    assert!(missing.is_empty(), "features without a case: {missing:?}");
}

#[test]
fn a_wrong_expectation_is_reported() {
    // The runner must be able to fail: the simple case with its backend swapped.
    let path = case_files()
        .into_iter()
        .find(|p| p.ends_with("core-httproute-simple-same-namespace.yaml"))
        .expect("the simple case");
    let text = std::fs::read_to_string(&path).expect("readable");
    let case = Case::from_yaml(&text.replacen("backend: infra/web-v1", "backend: infra/other", 1))
        .expect("case");
    let failures = run(&case);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("backend: expected \"infra/other\", got Some(\"infra/web-v1\")"),
        "{failures:?}"
    );
}

/// What each driver serves of every request of every case: `(file, served)` per request.
fn support(driver: Driver) -> Vec<(String, Served)> {
    let capabilities = DriverCapabilities::of(driver);
    let mut out = Vec::new();
    for path in case_files() {
        let case = load(&path);
        let model = build(&case.objects, &Settings::default());
        let gateway = model
            .compiled_gateway(&case.spec.gateway.key())
            .expect("compiled");
        let file = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        for request in &case.spec.requests {
            let served = support_for(gateway, &request.request.to_request(), &capabilities);
            out.push((file.clone(), served));
        }
    }
    out
}

#[test]
fn the_embedded_router_serves_every_request_of_every_case() {
    let partial: Vec<_> = support(Driver::Router)
        .into_iter()
        .filter(|(_, served)| *served != Served::Fully)
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
}

#[test]
fn an_octavia_runner_skips_what_octavia_cannot_express_and_runs_the_core_matching_cases() {
    let by_file = |file: &str, support: &[(String, Served)]| -> Vec<Served> {
        support
            .iter()
            .filter(|(f, _)| f == file)
            .map(|(_, s)| *s)
            .collect()
    };
    let octavia = support(Driver::Octavia);
    for file in [
        "core-httproute-path-match",
        "core-httproute-header-match",
        "core-httproute-hostname-intersection",
    ] {
        let served = by_file(file, &octavia);
        assert!(
            !served.is_empty() && served.iter().all(|s| *s == Served::Fully),
            "{file}: {served:?}"
        );
    }
    // Rules with query-parameter and method matches, URL rewrites, and redirects whose Location
    // keeps the request's host on an any-host rule (Octavia's redirect URL is fixed), are not
    // served; requests no rule matches (404) stay checkable.
    for (file, not_served) in [
        ("core-httproute-request-redirect", 1),
        ("extended-httproute-query-param-match", 4),
        ("extended-httproute-method-match", 3),
        ("extended-httproute-url-rewrite", 5),
    ] {
        let served = by_file(file, &octavia);
        let count = served.iter().filter(|s| **s == Served::Not).count();
        assert_eq!(count, not_served, "{file}: {served:?}");
    }
    // Header changes and mirrors are dropped, the request still served (the mirror that does
    // not resolve is no mirror at all); a rule whose only backend is refused (no ReferenceGrant)
    // answers 503 from an empty pool instead of the spec's 500.
    for (file, partly, total) in [
        ("core-httproute-cross-namespace", 2, 4),
        ("core-httproute-request-header-modifier", 6, 6),
        ("extended-httproute-request-mirror", 3, 4),
    ] {
        let served = by_file(file, &octavia);
        let count = served.iter().filter(|s| **s == Served::Partly).count();
        assert_eq!((count, served.len()), (partly, total), "{file}: {served:?}");
    }
}

/// The Octavia column of kuryr-l7's README table: per case file, the requests Octavia serves
/// fully, partly (without a header change, mirror, 500 share, or with its PCRE dialect or
/// 0–256 weights) and not at all (left out and reported).
const OCTAVIA_COLUMN: &[(&str, usize, usize, usize)] = &[
    ("core-gateway-https-listener", 3, 0, 0),
    ("core-gateway-listener-allowed-routes", 3, 0, 0),
    ("core-httproute-cross-namespace", 2, 2, 0),
    ("core-httproute-header-match", 5, 0, 0),
    ("core-httproute-hostname-intersection", 8, 0, 0),
    ("core-httproute-invalid-refs", 3, 3, 0),
    ("core-httproute-matching-precedence", 8, 0, 0),
    ("core-httproute-path-match", 9, 0, 0),
    ("core-httproute-request-header-modifier", 0, 6, 0),
    ("core-httproute-request-redirect", 2, 0, 1),
    ("core-httproute-simple-same-namespace", 3, 0, 0),
    ("core-httproute-weight", 2, 2, 0),
    ("extended-httproute-method-match", 1, 0, 3),
    ("extended-httproute-path-regex", 2, 2, 0),
    ("extended-httproute-query-param-match", 2, 0, 4),
    ("extended-httproute-redirect", 1, 0, 10),
    ("extended-httproute-request-mirror", 1, 3, 0),
    ("extended-httproute-response-header-modifier", 0, 1, 0),
    ("extended-httproute-url-rewrite", 0, 0, 5),
];

#[test]
fn the_readme_octavia_column_is_what_octavia_serves() {
    let mut column: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for (file, served) in support(Driver::Octavia) {
        let counts = column.entry(file).or_default();
        match served {
            Served::Fully => counts.0 += 1,
            Served::Partly => counts.1 += 1,
            Served::Not => counts.2 += 1,
        }
    }
    let got: Vec<(String, usize, usize, usize)> = column
        .into_iter()
        .map(|(file, (f, p, n))| (file, f, p, n))
        .collect();
    let want: Vec<(String, usize, usize, usize)> = OCTAVIA_COLUMN
        .iter()
        .map(|(file, f, p, n)| ((*file).to_owned(), *f, *p, *n))
        .collect();
    assert_eq!(got, want, "{got:#?}");
}
