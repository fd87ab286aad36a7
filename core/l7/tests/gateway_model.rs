//! The Gateway API conformance cases (`tests/gateway/cases/*.yaml`) run through the rules
//! service's model: each case translated (`nephrite_l7::translate`, which lowers the Gateways),
//! compiled into the [`RouteTable`] a router serves, and every request looked up there, its
//! filters applied and its pool's weights walked, as the embedded router does. So the model
//! carries every feature (method and query matches, redirects keeping the request's host or
//! replacing a prefix, rewrites, header changes, mirrors, the 500 of an invalid backend's
//! share). What it cannot carry is the listener port: kuryr-l7 serves every HTTP listener on
//! one address, so requests told apart only by port are listed as that condition.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nephrite_l7::gateway::CompiledGateway;
use nephrite_l7::gateway::compiled::{BackendTarget, Protocol};
use nephrite_l7::gateway::conformance::{Case, Observed, RequestCase};
use nephrite_l7::{
    Filters, Options, Outcome, Request, RouteTable, SourceObject, WithMethod, normalize_host,
    normalize_path, translate,
};

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

/// Endpoint address → `namespace/name` of its Service, from the compiled Gateway.
fn services(gateway: &CompiledGateway) -> BTreeMap<std::net::SocketAddr, String> {
    let mut out = BTreeMap::new();
    for listener in &gateway.listeners {
        for action in &listener.actions {
            for backend in &action.backends {
                if let BackendTarget::Service(service) = &backend.target {
                    for endpoint in &service.endpoints {
                        out.insert(*endpoint, service.service.to_string());
                    }
                }
            }
        }
    }
    out
}

/// What the router does for one pick of a pool: the member's Service, 500 or 503.
fn pick(
    table: &RouteTable,
    pool: &str,
    n: u64,
    owners: &BTreeMap<std::net::SocketAddr, String>,
) -> Result<String, u16> {
    let Some(pool) = table.pool(pool) else {
        return Err(503);
    };
    let total: u64 = pool
        .members
        .iter()
        .map(|m| u64::from(m.weight))
        .sum::<u64>()
        + u64::from(pool.unavailable_weight);
    if total == 0 {
        return Err(503);
    }
    let mut left = n % total;
    for member in &pool.members {
        if left < u64::from(member.weight) {
            return Ok(owners
                .get(&member.address)
                .cloned()
                .unwrap_or_else(|| member.address.to_string()));
        }
        left -= u64::from(member.weight);
    }
    Err(500)
}

fn mirror_service(pool: &str) -> String {
    let rest = pool.strip_prefix("gateway-mirror:").unwrap_or(pool);
    rest.rsplit_once(':').map_or(rest, |(s, _)| s).to_owned()
}

struct Served<'t> {
    outcome: Outcome<'t>,
    filters: &'t Filters,
}

fn lookup<'t>(
    table: &'t RouteTable,
    https: bool,
    request: &RequestCase,
    headers: &[(String, String)],
) -> Served<'t> {
    let spec = &request.request;
    let host = normalize_host(&spec.host).unwrap_or_default();
    let path = normalize_path(&spec.path);
    let view = WithMethod {
        method: &spec.method,
        headers,
    };
    let l7 = Request {
        host: &host,
        path: &path,
        target: &spec.path,
        headers: &view,
        client_cert: None,
    };
    let listener = if https { &table.https } else { &table.http };
    let (outcome, filters) = listener.lookup_with_filters(&l7);
    Served { outcome, filters }
}

fn observe(
    table: &RouteTable,
    served: &Served<'_>,
    request: &RequestCase,
    n: u64,
    owners: &BTreeMap<std::net::SocketAddr, String>,
) -> Observed {
    let spec = &request.request;
    let filters = served.filters;
    let backend_headers: Vec<(String, String)> = request
        .backend_response_headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    match &served.outcome {
        Outcome::Pool(pool) => match pick(table, pool, n, owners) {
            Ok(service) => {
                let mut headers: Vec<(String, String)> = spec
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                filters.request_headers.apply(&mut headers);
                let mut response_headers = backend_headers;
                filters.response_headers.apply(&mut response_headers);
                let path = match &filters.rewrite_path {
                    Some(change) => change.apply_to_target(&normalize_path(&spec.path), &spec.path),
                    None => spec.path.clone(),
                };
                Observed {
                    status: 200,
                    backend: Some(service),
                    location: None,
                    host: Some(filters.rewrite_host.clone().unwrap_or(spec.host.clone())),
                    path: Some(path),
                    headers,
                    response_headers,
                    mirrors: filters
                        .mirrors
                        .iter()
                        .filter(|m| m.numerator > 0)
                        .map(|m| mirror_service(&m.pool))
                        .collect(),
                }
            }
            Err(status) => Observed {
                status,
                ..Observed::default()
            },
        },
        Outcome::Redirect { code, location } => {
            let mut response_headers = Vec::new();
            filters.response_headers.apply(&mut response_headers);
            Observed {
                status: *code,
                location: Some(location.clone()),
                response_headers,
                ..Observed::default()
            }
        }
        Outcome::Reject => Observed {
            status: 403,
            ..Observed::default()
        },
        Outcome::Status(status) => Observed {
            status: *status,
            ..Observed::default()
        },
    }
}

/// The failures of one case through the model, each naming the request.
fn run(case: &Case) -> Vec<String> {
    let objects: Vec<SourceObject> = case
        .objects
        .iter()
        .cloned()
        .map(|object| SourceObject {
            object,
            origin: "case".into(),
        })
        .collect();
    let translation = translate(&objects, &Options::default());
    let table = RouteTable::compile(&translation.config);
    let key = case.spec.gateway.key();
    let Some(gateway) = translation.gateway.compiled_gateway(&key) else {
        return vec![format!("Gateway {key} is not compiled")];
    };
    let owners = services(gateway);
    let mut failures = Vec::new();
    for request in &case.spec.requests {
        let spec = &request.request;
        let host = normalize_host(&spec.host).unwrap_or_default();
        let https = gateway
            .listener(spec.port, &host)
            .is_some_and(|l| l.protocol == Protocol::Https);
        let headers: Vec<(String, String)> = spec
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let served = lookup(&table, https, request, &headers);
        let mut found = Vec::new();
        if let Some(expect) = &request.expect {
            found.extend(expect.check(&observe(&table, &served, request, 0, &owners)));
        }
        if !request.split.is_empty() {
            let cycle = match &served.outcome {
                Outcome::Pool(pool) => table.pool(pool).map_or(1, |p| {
                    p.members.iter().map(|m| u64::from(m.weight)).sum::<u64>()
                        + u64::from(p.unavailable_weight)
                }),
                _ => 1,
            };
            let mut counts: BTreeMap<String, u64> = BTreeMap::new();
            for n in 0..cycle.max(1) {
                let observed = observe(&table, &served, request, n, &owners);
                let who = observed
                    .backend
                    .unwrap_or_else(|| format!("status {}", observed.status));
                *counts.entry(who).or_default() += 1;
            }
            let total: u64 = request.split.values().sum();
            let want: BTreeMap<&String, u64> = request
                .split
                .iter()
                .filter(|(_, share)| **share > 0)
                .map(|(who, share)| (who, *share))
                .collect();
            let exact = want.len() == counts.len()
                && want.iter().all(|(who, share)| {
                    counts
                        .get(*who)
                        .is_some_and(|got| got * total == share * cycle)
                });
            if !exact {
                found.push(format!(
                    "split over one cycle of {cycle}: expected shares {want:?} of {total}, got {counts:?}"
                ));
            }
        }
        failures.extend(
            found
                .into_iter()
                .map(|f| format!("request {:?}: {f}", request.name)),
        );
    }
    failures
}

/// Requests the model cannot tell apart from others because only the listener port differs
/// (every HTTP listener is served on one address): case file → request names.
const PORT_ONLY: &[(&str, &[&str])] = &[
    (
        "core-gateway-listener-allowed-routes",
        &[
            "the Same listener serves routes of the Gateway's namespace",
            "a route of an unlabelled namespace is refused by the Selector listener",
        ],
    ),
    (
        "core-httproute-request-redirect",
        &["without a scheme or port the listener's port is kept when it is not the default"],
    ),
    (
        "core-httproute-simple-same-namespace",
        &["another port has no listener"],
    ),
];

#[test]
fn the_port_only_requests_are_of_gateways_with_listeners_on_several_ports() {
    for (file, names) in PORT_ONLY {
        let path = case_files()
            .into_iter()
            .find(|p| p.file_stem().is_some_and(|s| s == *file))
            .expect("listed file");
        let case = Case::from_yaml(&std::fs::read_to_string(&path).expect("case")).expect("case");
        let model = nephrite_l7::gateway::build(&case.objects, &Default::default());
        let gateway = model
            .compiled_gateway(&case.spec.gateway.key())
            .expect("compiled");
        let ports: std::collections::BTreeSet<u16> = gateway
            .listeners
            .iter()
            .filter(|l| l.protocol == Protocol::Http)
            .map(|l| l.port)
            .collect();
        for name in *names {
            let request = case
                .spec
                .requests
                .iter()
                .find(|r| r.name == *name)
                .unwrap_or_else(|| panic!("{file}: no request {name:?}"));
            // Several listener ports, or a port without a listener.
            assert!(
                ports.len() > 1 || !ports.contains(&request.request.port),
                "{file}: {name:?}: HTTP listener ports {ports:?}"
            );
        }
    }
}

#[test]
fn every_case_passes_through_the_rules_model_but_requests_told_apart_by_port_alone() {
    let mut failures = Vec::new();
    let mut files = 0;
    for path in case_files() {
        files += 1;
        let text = std::fs::read_to_string(&path).expect("case file");
        let case = Case::from_yaml(&text).expect("case");
        let file = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let port_only = PORT_ONLY
            .iter()
            .find(|(f, _)| *f == file)
            .map_or(&[][..], |(_, names)| *names);
        for failure in run(&case) {
            if !port_only
                .iter()
                .any(|name| failure.starts_with(&format!("request {name:?}")))
            {
                failures.push(format!("{file}: {failure}"));
            }
        }
    }
    assert!(files >= 19, "{files} case files");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_wrong_expectation_fails_through_the_model() {
    let path = case_files()
        .into_iter()
        .find(|p| p.ends_with("extended-httproute-url-rewrite.yaml"))
        .expect("the rewrite case");
    let text = std::fs::read_to_string(&path).expect("readable");
    let case =
        Case::from_yaml(&text.replacen("path: /one/x/y}", "path: /prefix/x/y}", 1)).expect("case");
    let failures = run(&case);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("path: expected \"/prefix/x/y\""),
        "{failures:?}"
    );
}
