//! `kuryr-l7 controller --source kube` against the in-memory API server: watches, Routes off
//! and on, status and Warning Events, leader election, kill -9 in the middle of changes, and
//! the Ingress-change-to-router propagation time.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kuryr_l7_client::wire::to_wire;
use nephrite_kuryr_l7::kubernetes::watch::kinds;
use nephrite_test_apiserver::TestApiServer;
use serde_json::{Value, json};
use support::daemon::Daemon;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");
const ROUTE_CRD: &str = include_str!("../examples/kubernetes/route-crd.yaml");

struct Cluster {
    server: TestApiServer,
    client: kube::Client,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

async fn cluster() -> Cluster {
    let server = TestApiServer::start().await.unwrap();
    let client = server.client().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig()).unwrap();
    Cluster {
        server,
        client,
        dir,
        kubeconfig,
    }
}

fn resource_of(api_version: &str, kind: &str) -> ApiResource {
    if kind == "CustomResourceDefinition" {
        return ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: "customresourcedefinitions".into(),
        };
    }
    kinds()
        .into_iter()
        .map(|k| k.resource)
        .find(|r| r.api_version == api_version && r.kind == kind)
        .unwrap_or_else(|| panic!("no resource for {api_version} {kind}"))
}

impl Cluster {
    /// Server-side applies every document of `yaml`.
    async fn apply(&self, yaml: &str) {
        for document in yaml.split("\n---\n") {
            let value: Value = serde_norway::from_str(document).unwrap();
            let object: DynamicObject = serde_json::from_value(value.clone()).unwrap();
            let types = object.types.clone().unwrap();
            let resource = resource_of(&types.api_version, &types.kind);
            let name = object.metadata.name.clone().unwrap();
            let api: Api<DynamicObject> = match &object.metadata.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
                None => Api::all_with(self.client.clone(), &resource),
            };
            api.patch(
                &name,
                &PatchParams::apply("kube-test").force(),
                &Patch::Apply(&value),
            )
            .await
            .unwrap_or_else(|e| panic!("applying {name}: {e}"));
        }
    }

    async fn delete(&self, api_version: &str, kind: &str, name: &str) {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            "default",
            &resource_of(api_version, kind),
        );
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }

    async fn get(&self, api_version: &str, kind: &str, name: &str) -> DynamicObject {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            "default",
            &resource_of(api_version, kind),
        );
        api.get(name).await.unwrap()
    }

    /// The version a controller must serve for what the API server holds now.
    async fn expected_version(&self) -> String {
        let translation = support::cluster::translation(&self.client).await.unwrap();
        to_wire(&translation, &[]).version
    }

    fn controller(&self, name: &str) -> (Daemon, SocketAddr, PathBuf) {
        let listen = dead_address();
        let log = self.dir.path().join(format!("{name}.log"));
        let daemon = Daemon(
            Command::new(BIN)
                .args([
                    "controller",
                    "--source",
                    "kube",
                    "--status-address",
                    "127.0.0.1",
                ])
                .args(["--identity", name, "--listen"])
                .arg(listen.to_string())
                .env("KUBECONFIG", &self.kubeconfig)
                .env("RUST_LOG", "info")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        (daemon, listen, log)
    }
}

fn router(controllers: &[SocketAddr]) -> (Daemon, SocketAddr) {
    let listen = dead_address();
    let urls: Vec<String> = controllers.iter().map(ToString::to_string).collect();
    let daemon = Daemon(
        Command::new(BIN)
            .args([
                "router",
                "--threads",
                "1",
                "--rules-wait",
                "30s",
                "--listen",
            ])
            .arg(listen.to_string())
            .arg("--rules")
            .arg(urls.join(","))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (daemon, listen)
}

fn version(url: SocketAddr) -> Option<String> {
    let out = Command::new(BIN)
        .args(["rules", "-o", "json", "--rules"])
        .arg(url.to_string())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).ok()?;
    json["version"].as_str().map(str::to_owned)
}

async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < limit, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn answers(router: SocketAddr, host: &str, path: &str) -> u16 {
    match tokio::time::timeout(
        Duration::from_millis(500),
        tokio::net::TcpStream::connect(router),
    )
    .await
    {
        Ok(Ok(_)) => get(router, host, path).await.status,
        _ => 0,
    }
}

fn backend_yaml(web: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: default}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{name: http, port: {}}}]\nendpoints:\n- addresses: [\"{}\"]\n",
        web.port(),
        web.ip()
    )
}

fn ingress(name: &str, host: &str, path: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  rules:\n  - host: {host}\n    http:\n      paths:\n      - {{path: '{path}', pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n"
    )
}

/// An Ingress the API server takes and kuryr-l7 refuses: a resource backend.
fn broken_ingress(name: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  rules:\n  - host: shop.example.com\n    http:\n      paths:\n      - {{path: /nope, pathType: Prefix, backend: {{resource: {{apiGroup: example.com, kind: Bucket, name: nope}}}}}}\n"
    )
}

const ROUTE: &str = "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: cart, namespace: default}\nspec: {host: cart.example.com, path: /api, port: {targetPort: http}, to: {kind: Service, name: web}}\n";

async fn events(cluster: &Cluster) -> Vec<Value> {
    let resource = ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(cluster.client.clone(), &resource);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

/// Waits (20 s at most) for an Event about `object` reported by controller `instance`.
async fn event_from(cluster: &Cluster, object: &str, instance: &str) {
    eventually(
        &format!("an Event about {object} from {instance}"),
        Duration::from_secs(20),
        async || {
            events(cluster)
                .await
                .iter()
                .any(|e| e["regarding"]["name"] == object && e["reportingInstance"] == instance)
                .then_some(())
        },
    )
    .await;
}

fn count_in(log: &Path, needle: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches(needle)
        .count()
}

/// A backend, an Ingress `name` for `host` + `path`, a controller and a router that serves it:
/// (controller, its log, router, router address).
async fn serving(
    cluster: &Cluster,
    name: &str,
    host: &str,
    path: &str,
) -> (Daemon, PathBuf, Daemon, SocketAddr) {
    let web = echo("web").await;
    cluster.apply(&backend_yaml(web)).await;
    cluster.apply(&ingress(name, host, path)).await;
    let (controller, url, log) = cluster.controller("c1");
    let (router, listen) = router(&[url]);
    eventually(
        "the Ingress is served",
        Duration::from_secs(20),
        async || (answers(listen, host, path).await == 200).then_some(()),
    )
    .await;
    (controller, log, router, listen)
}

#[tokio::test]
async fn ingresses_and_routes_are_served_with_status_events_and_routes_picked_up_later() {
    let cluster = cluster().await;
    let (controller, log, _router, listen) =
        serving(&cluster, "shop", "shop.example.com", "/a").await;

    // No Route API: said once, Ingresses served anyway.
    eventually(
        "routes are off is said",
        Duration::from_secs(5),
        async || (count_in(&log, " routes are off") == 1).then_some(()),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count_in(&log, " routes are off"), 1);

    // Ingress status gets the router address.
    eventually("Ingress status", Duration::from_secs(10), async || {
        let ingress = cluster.get("networking.k8s.io/v1", "Ingress", "shop").await;
        (ingress.data["status"]["loadBalancer"]["ingress"] == json!([{"ip": "127.0.0.1"}]))
            .then_some(())
    })
    .await;

    // The Route CRD appears: Routes are picked up and admitted.
    cluster.apply(ROUTE_CRD).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.apply(ROUTE).await;
    eventually("the Route is served", Duration::from_secs(10), async || {
        (answers(listen, "cart.example.com", "/api/x").await == 200).then_some(())
    })
    .await;
    assert_eq!(answers(listen, "cart.example.com", "/apix").await, 404);
    eventually("Route admitted", Duration::from_secs(10), async || {
        let route = cluster.get("route.openshift.io/v1", "Route", "cart").await;
        let condition = &route.data["status"]["ingress"][0]["conditions"][0];
        (condition["type"] == "Admitted" && condition["status"] == "True").then_some(())
    })
    .await;
    assert!(count_in(&log, "routes are on") >= 1);

    // A rejected Ingress and a conflicting newer Route: Warning Events naming reason and winner.
    cluster.apply(&broken_ingress("broken")).await;
    cluster
        .apply(&ROUTE.replace("name: cart,", "name: cart-late,"))
        .await;
    eventually("Warning Events", Duration::from_secs(10), async || {
        let events = events(&cluster).await;
        let rejected = events.iter().any(|e| {
            e["type"] == "Warning"
                && e["reason"] == "Rejected"
                && e["regarding"]["name"] == "broken"
                && e["note"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("resource backend")
        });
        let conflict = events.iter().any(|e| {
            e["reason"] == "Conflict"
                && e["regarding"]["name"] == "cart-late"
                && e["note"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("served by Route default/cart")
        });
        (rejected && conflict).then_some(())
    })
    .await;
    eventually(
        "the losing Route is not admitted",
        Duration::from_secs(10),
        async || {
            let route = cluster
                .get("route.openshift.io/v1", "Route", "cart-late")
                .await;
            let condition = &route.data["status"]["ingress"][0]["conditions"][0];
            (condition["status"] == "False" && condition["reason"] == "HostAlreadyClaimed")
                .then_some(())
        },
    )
    .await;
    // Everything else keeps serving.
    assert_eq!(answers(listen, "shop.example.com", "/a").await, 200);
    // `rules --source kube` lists the cluster once and shows the same.
    // (tokio's Command: the API server runs on this test's runtime.)
    let out = tokio::process::Command::new(BIN)
        .args(["rules", "--source", "kube"])
        .env("KUBECONFIG", &cluster.kubeconfig)
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.contains("REJECTED Ingress default/broken (kube)"),
        "{table}"
    );
    assert!(
        table.contains("CONFLICT cart.example.com /api (Route prefix): Route default/cart wins over Route default/cart-late"),
        "{table}"
    );
    controller.terminate();
}

#[tokio::test]
async fn both_controllers_serve_only_the_leader_writes_and_the_standby_takes_over() {
    let cluster = cluster().await;
    let web = echo("web").await;
    cluster.apply(&backend_yaml(web)).await;
    cluster
        .apply(&ingress("shop", "shop.example.com", "/a"))
        .await;
    let (first, url1, _) = cluster.controller("c1");
    eventually("c1 leads", Duration::from_secs(20), async || {
        let ingress = cluster.get("networking.k8s.io/v1", "Ingress", "shop").await;
        (!ingress.data["status"]["loadBalancer"]["ingress"].is_null()).then_some(())
    })
    .await;
    let (_second, url2, _) = cluster.controller("c2");
    eventually(
        "both serve the same version",
        Duration::from_secs(20),
        async || {
            let (a, b) = (version(url1)?, version(url2)?);
            (a == b).then_some(())
        },
    )
    .await;
    cluster.apply(&broken_ingress("broken")).await;
    eventually(
        "an Event from the leader",
        Duration::from_secs(10),
        async || {
            events(&cluster)
                .await
                .iter()
                .any(|e| e["regarding"]["name"] == "broken")
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let instances: Vec<Value> = events(&cluster)
        .await
        .iter()
        .map(|e| e["reportingInstance"].clone())
        .collect();
    assert!(instances.iter().all(|i| i == "c1"), "{instances:?}");

    // The leader stops (and releases the Lease): the standby writes from now on.
    first.terminate();
    cluster.apply(&broken_ingress("broken-too")).await;
    event_from(&cluster, "broken-too", "c2").await;

    // The new leader dies (kill -9, the Lease is not released): a third controller takes
    // over once the Lease expires (10 s), within 15 s.
    let (_third, _, _) = cluster.controller("c3");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut second = _second;
    second.0.kill().unwrap();
    let _ = second.0.wait();
    let died = Instant::now();
    cluster.apply(&broken_ingress("broken-three")).await;
    event_from(&cluster, "broken-three", "c3").await;
    eprintln!("takeover after the leader's kill -9: {:?}", died.elapsed());
}

#[tokio::test]
async fn after_kill_9_in_the_middle_of_100_changes_the_rules_equal_the_api_servers() {
    let cluster = cluster().await;
    cluster.apply(ROUTE_CRD).await;
    let web = echo("web").await;
    cluster.apply(&backend_yaml(web)).await;
    let (mut first, _, _) = cluster.controller("c1");
    for i in 0..100 {
        let name = format!("ing-{}", i % 10);
        match i % 4 {
            3 => {
                let _ = Api::<DynamicObject>::namespaced_with(
                    cluster.client.clone(),
                    "default",
                    &resource_of("networking.k8s.io/v1", "Ingress"),
                )
                .delete(&name, &DeleteParams::default())
                .await;
            }
            _ => {
                cluster
                    .apply(&ingress(
                        &name,
                        &format!("h{i}.example.com"),
                        &format!("/p{i}"),
                    ))
                    .await
            }
        }
        if i == 50 {
            first.0.kill().unwrap(); // SIGKILL
            let _ = first.0.wait();
        }
    }
    cluster
        .delete("networking.k8s.io/v1", "Ingress", "ing-0")
        .await;
    let (_again, url, _) = cluster.controller("c1");
    let expected = cluster.expected_version().await;
    eventually(
        "the restarted controller serves the API server's rules",
        Duration::from_secs(20),
        async || (version(url)? == expected).then_some(()),
    )
    .await;
}

#[tokio::test]
async fn propagation_from_an_ingress_change_to_the_router() {
    let cluster = cluster().await;
    let (_controller, _, _router, listen) =
        serving(&cluster, "moving", "move.example.com", "/p0").await;
    let mut times = Vec::new();
    for i in 1..=100 {
        let path = format!("/p{i}");
        let start = Instant::now();
        cluster
            .apply(&ingress("moving", "move.example.com", &path))
            .await;
        eventually(
            "the change reaches the router",
            Duration::from_secs(10),
            async || (answers(listen, "move.example.com", &path).await == 200).then_some(()),
        )
        .await;
        times.push(start.elapsed());
    }
    times.sort();
    eprintln!(
        "Ingress change -> router: median {:?}, p90 {:?}, max {:?} over {} changes",
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() - 1],
        times.len()
    );
}

#[tokio::test]
async fn kinds_we_may_not_read_are_off_and_picked_up_when_allowed() {
    let cluster = cluster().await;
    // The first lists of EndpointSlices and IngressClasses are forbidden (no permission yet).
    cluster
        .server
        .faults()
        .fail_next("list", "endpointslices", 1, 403);
    cluster
        .server
        .faults()
        .fail_next("list", "ingressclasses", 1, 403);
    let (_controller, log, _router, listen) =
        serving(&cluster, "shop", "shop.example.com", "/a").await;
    assert_eq!(count_in(&log, "endpointslices are off"), 1);
    assert_eq!(count_in(&log, "ingressclasses are off"), 1);
    assert!(count_in(&log, "endpointslices are on") >= 1);
    assert_eq!(answers(listen, "shop.example.com", "/a").await, 200);
}
