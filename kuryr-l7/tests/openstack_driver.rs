//! `kuryr-l7 controller --driver octavia` (read from `kuryr.conf`) against the real Octavia 19
//! and Neutron 29 (`nephrite_test_services::OpenStack`, noauth) and the in-memory Kubernetes API
//! server, the built binary run as an operator runs it:
//!
//! - first start: the VIP port, the Router LB, its listener and the floating IP are created, the
//!   Node annotation written in the seed's shape, Ingress and Route status carry the floating IP,
//!   each object's state annotation names its Octavia ids, and the tree read back from Octavia
//!   routes every conformance request to the same backend as the translation;
//! - an endpoint change replaces members only (policy and pool ids unchanged);
//! - a Route survives the deletion of another Route to the same Service, and an Ingress on a
//!   shared pool survives the deletion of the other Ingress on it;
//! - a rule Octavia refuses: a Warning Event on its Ingress, retried, while other objects sync;
//! - restart: everything adopted (object counts from the APIs unchanged); with the Node
//!   annotation deleted, found again by name, `device_id` and tags.
//!
//! One `#[test]`: under nextest each test is a process, and each would start its own services.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use nephrite_kuryr_l7::kubernetes::watch::kinds;
use nephrite_kuryr_l7::openstack::auth::Credentials;
use nephrite_kuryr_l7::openstack::neutron::Neutron;
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::octavia::{Octavia, Settle};
use nephrite_kuryr_l7::openstack::router_lb::{DEVICE_OWNER, ROUTER_NAME, device_id};
use nephrite_kuryr_l7::openstack::state::{
    INGRESS_STATE, ObjectState, ROUTE_STATE, ROUTER_STATE, RouterState,
};
use nephrite_kuryr_l7::openstack::{Endpoint, Session};
use nephrite_l7::octavia::{Desired, HTTP_LISTENER, OBJECT_TAG, Ownership, Tree, plan};
use nephrite_l7::{Options, Outcome, Request, SourceObject, Translation, translate};
use nephrite_test_apiserver::TestApiServer;
use nephrite_test_services::{OpenStack, new_project_id};
use serde_json::{Value, json};

const TEST: &str = "the_octavia_driver_against_the_real_apis";
const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");
const ROUTE_CRD: &str = include_str!("../examples/kubernetes/route-crd.yaml");
const NODE: &str = "node-1";

#[test]
fn the_octavia_driver_against_the_real_apis() -> anyhow::Result<()> {
    let cloud = match OpenStack::shared() {
        Ok(cloud) => cloud,
        Err(e) => {
            e.skip(TEST);
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(scenario(cloud))
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    fn terminate(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

struct World {
    project: String,
    cluster: String,
    octavia: Octavia,
    neutron: Neutron,
    server: TestApiServer,
    client: kube::Client,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    conf: PathBuf,
}

fn resource_of(api_version: &str, kind: &str) -> ApiResource {
    match kind {
        "CustomResourceDefinition" => ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: "customresourcedefinitions".into(),
        },
        "Node" => ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Node".into(),
            plural: "nodes".into(),
        },
        _ => kinds()
            .into_iter()
            .map(|k| k.resource)
            .find(|r| r.api_version == api_version && r.kind == kind)
            .unwrap_or_else(|| panic!("no resource for {api_version} {kind}")),
    }
}

impl World {
    async fn apply(&self, yaml: &str) -> anyhow::Result<()> {
        for document in yaml.split("\n---\n") {
            let value: Value = serde_norway::from_str(document)?;
            let object: DynamicObject = serde_json::from_value(value.clone())?;
            let types = object.types.clone().context("apiVersion and kind")?;
            let resource = resource_of(&types.api_version, &types.kind);
            let name = object.metadata.name.clone().context("name")?;
            let api: Api<DynamicObject> = match &object.metadata.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
                None => Api::all_with(self.client.clone(), &resource),
            };
            api.patch(
                &name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&value),
            )
            .await
            .with_context(|| format!("applying {name}"))?;
        }
        Ok(())
    }

    fn api(&self, kind: &str) -> Api<DynamicObject> {
        let resource = match kind {
            "Ingress" => resource_of("networking.k8s.io/v1", kind),
            "Route" => resource_of("route.openshift.io/v1", kind),
            _ => resource_of("v1", kind),
        };
        if kind == "Node" {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), "default", &resource)
        }
    }

    async fn get(&self, kind: &str, name: &str) -> anyhow::Result<Value> {
        Ok(serde_json::to_value(self.api(kind).get(name).await?)?)
    }

    /// The translation of what the API server holds (what the controller must reach).
    async fn translation(&self) -> anyhow::Result<Translation> {
        let mut objects = Vec::new();
        for kind in kinds() {
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &kind.resource);
            let mut params = ListParams::default();
            if let Some(fields) = kind.field_selector {
                params = params.fields(fields);
            }
            let Ok(list) = api.list(&params).await else {
                continue;
            };
            for mut item in list.items {
                item.types = Some(kube::api::TypeMeta {
                    api_version: kind.resource.api_version.clone(),
                    kind: kind.resource.kind.clone(),
                });
                objects.push(SourceObject {
                    object: item.try_into()?,
                    origin: "kube".into(),
                });
            }
        }
        Ok(translate(&objects, &Options::default()))
    }

    fn controller(&self, name: &str) -> anyhow::Result<(Daemon, PathBuf)> {
        let log = self.dir.path().join(format!("{name}.log"));
        let daemon = Command::new(BIN)
            .args(["controller", "--source", "kube", "--listen", "127.0.0.1:0"])
            .arg("--config-file")
            .arg(&self.conf)
            .args(["--cluster-name", &self.cluster, "--identity", name])
            .env("KURYR_NODE_NAME", NODE)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        Ok((Daemon(daemon), log))
    }

    /// (load balancers named as the router, VIP ports, floating IPs, listeners) in the project.
    async fn counts(&self) -> anyhow::Result<(usize, usize, usize, usize)> {
        let lbs = self
            .octavia
            .load_balancers(&[("name", ROUTER_NAME), ("project_id", &self.project)])
            .await?;
        let device = device_id(&self.cluster);
        let ports = self
            .neutron
            .ports(&[("device_id", &device), ("device_owner", DEVICE_OWNER)])
            .await?;
        let fips = self
            .neutron
            .floating_ips(&[("project_id", &self.project)])
            .await?;
        let mut listeners = 0;
        for lb in &lbs {
            listeners += self
                .octavia
                .listeners(&[("loadbalancer_id", &lb.id)])
                .await?
                .len();
        }
        Ok((lbs.len(), ports.len(), fips.len(), listeners))
    }

    async fn router_state(&self) -> anyhow::Result<Option<RouterState>> {
        let node = self.get("Node", NODE).await?;
        match node["metadata"]["annotations"][ROUTER_STATE].as_str() {
            Some(text) => Ok(Some(RouterState::from_annotation(text)?)),
            None => Ok(None),
        }
    }

    /// Waits until Octavia's tree is the translation's: the plan from it is empty.
    async fn converged(&self, lb_id: &str, what: &str) -> anyhow::Result<(Tree, Translation)> {
        let owner = Ownership::new(self.cluster.clone());
        let began = Instant::now();
        loop {
            let translation = self.translation().await?;
            let tree = read_tree(&self.octavia, lb_id).await?;
            let calls = plan(&Desired::from_config(&translation.config), &tree, &owner)?;
            if calls.is_empty() {
                return Ok((tree, translation));
            }
            if began.elapsed() > Duration::from_secs(120) {
                bail!("{what}: never converged; still to do: {calls:#?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn eventually<T>(
    what: &str,
    mut check: impl AsyncFnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let began = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if began.elapsed() > Duration::from_secs(120) {
            bail!("never: {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn events(world: &World) -> anyhow::Result<Vec<Value>> {
    let resource = ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(world.client.clone(), &resource);
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?)
}

fn log_text(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

async fn setup(cloud: &OpenStack) -> anyhow::Result<World> {
    let project = new_project_id();
    let cluster = format!("test-{}", &project[..8]);
    let session = Arc::new(Session::new(
        Credentials::NoAuth {
            project_id: project.clone(),
        },
        Duration::from_secs(60),
    )?);
    let octavia = Octavia::new(
        session.clone(),
        Endpoint::Url(cloud.octavia_url()),
        Settle {
            poll: Duration::from_millis(50),
            timeout: Duration::from_secs(120),
        },
    );
    let neutron = Neutron::new(session, Endpoint::Url(cloud.neutron_url()));
    // The cloud an operator has: a service subnet, an external network, a router between.
    let network = neutron.create_network("services", None).await?;
    let subnet = neutron
        .create_subnet("services", &network.id, "10.0.0.0/24")
        .await?;
    let physnet = format!("ext-{}", &project[..12]);
    let external = neutron.create_network("public", Some(&physnet)).await?;
    let external_subnet = neutron
        .create_subnet("public", &external.id, "172.24.4.0/24")
        .await?;
    let router = neutron.create_router("edge", &external.id).await?;
    neutron.add_router_interface(&router.id, &subnet.id).await?;

    let server = TestApiServer::start().await?;
    let client = server.client()?;
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig())?;
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        format!(
            "[kubernetes]\nl7_router_driver = neutron_l7_policy\n\
             [neutron]\nauth_type = noauth\nendpoint_override = {}\n\
             [octavia]\nendpoint_override = {}\n\
             [neutron_defaults]\nproject = {project}\nservice_subnet = {}\n\
             external_svc_subnet = {}\n\
             [ingress]\nl7_router_uuid =    # empty: create the Router LB\n",
            cloud.neutron_url(),
            cloud.octavia_url(),
            subnet.id,
            external_subnet.id,
        ),
    )?;
    Ok(World {
        project,
        cluster,
        octavia,
        neutron,
        server,
        client,
        dir,
        kubeconfig,
        conf,
    })
}

fn backend(name: &str, addresses: &[&str]) -> String {
    let endpoints: Vec<String> = addresses
        .iter()
        .map(|a| format!("- addresses: [\"{a}\"]"))
        .collect();
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  ports: [{{name: http, port: 80}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: default\n  labels: {{kubernetes.io/service-name: {name}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints:\n{}\n",
        endpoints.join("\n")
    )
}

const INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: default}
spec:
  defaultBackend: {service: {name: web, port: {number: 80}}}
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
      - {path: /api/v1/health, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}
  - host: '*.example.org'
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
";

fn route(name: &str, host: &str, path: &str) -> String {
    format!(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: {name}, namespace: default}}\nspec: {{host: {host}, path: {path}, port: {{targetPort: http}}, to: {{kind: Service, name: web}}}}\n"
    )
}

/// The conformance requests: (host, path).
const REQUESTS: &[(&str, &str)] = &[
    ("shop.example.com", "/"),
    ("shop.example.com", "/api"),
    ("shop.example.com", "/api/"),
    ("shop.example.com", "/api/v1/health"),
    ("shop.example.com", "/api/v1/health/x"),
    ("shop.example.com", "/apix"),
    ("SHOP.example.com", "/api/orders"),
    ("a.example.org", "/anything"),
    ("example.org", "/"),
    ("a.b.example.org", "/"),
    ("cart.example.com", "/cart"),
    ("cart.example.com", "/cartx"),
    ("cart.example.com", "/"),
    ("other.test", "/"),
];

fn outcome(listener: &nephrite_l7::Listener, host: &str, path: &str) -> String {
    let headers: Vec<(String, String)> = Vec::new();
    let host = host.to_ascii_lowercase();
    let request = Request {
        host: &host,
        path,
        target: path,
        headers: &headers,
        client_cert: None,
    };
    match listener.evaluate(&request) {
        Outcome::Pool(pool) => format!("pool {pool}"),
        other => format!("{other:?}"),
    }
}

async fn scenario(cloud: &OpenStack) -> anyhow::Result<()> {
    let world = setup(cloud).await?;
    world.apply(ROUTE_CRD).await?;
    world
        .apply(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {NODE}}}\n"
        ))
        .await?;
    world
        .apply(&backend("web", &["10.0.1.10", "10.0.1.11"]))
        .await?;
    world.apply(&backend("api", &["10.0.2.10"])).await?;
    world.apply(INGRESS).await?;
    world
        .apply(&route("cart", "cart.example.com", "/cart"))
        .await?;
    world
        .apply(&route("cart2", "cart.example.com", "/checkout"))
        .await?;

    // First start: everything created, the Node annotation written.
    let (controller, log) = world.controller("c1")?;
    let state = eventually("the Node annotation", async || world.router_state().await)
        .await
        .with_context(|| log_text(&log))?;
    let lb = world
        .octavia
        .load_balancer(&state.router_lb.id)
        .await?
        .context("the annotation's load balancer exists")?;
    ensure!(lb.vip_port_id.as_deref() == Some(state.router_lb.port_id.as_str()));
    ensure!(lb.project_id == world.project && state.router_lb.project_id == world.project);
    ensure!(state.router_lb.name == ROUTER_NAME);
    let fips = world
        .neutron
        .floating_ips(&[("port_id", &state.router_lb.port_id)])
        .await?;
    ensure!(
        fips.len() == 1 && fips[0].floating_ip_address == state.fip,
        "the floating IP is bound to the VIP port: {fips:?} vs {state:?}"
    );
    ensure!(
        fips[0].fixed_ip_address.as_deref() == Some(state.router_lb.ip.as_str()),
        "{fips:?}"
    );
    let counts = world.counts().await?;
    ensure!(counts == (1, 1, 1, 1), "one of each: {counts:?}");

    let (tree, translation) = world.converged(&lb.id, "first sync").await?;
    // Tags with spaces and slashes are kept by Octavia as sent.
    let shop_tag = format!("{OBJECT_TAG}Ingress default/shop shop.example.com /api (Prefix)");
    ensure!(
        tree.listeners[0]
            .policies
            .iter()
            .any(|p| p.tags.contains(&shop_tag)),
        "Octavia keeps the object tag {shop_tag:?}: {:?}",
        tree.listeners[0].policies
    );
    // The routing conformance: the tree read back routes like the translation.
    let from_octavia = tree
        .listener_model(HTTP_LISTENER, translation.config.http.no_match_status)
        .context("our listener")??;
    for (host, path) in REQUESTS {
        let want = outcome(&translation.config.http, host, path);
        let got = outcome(&from_octavia, host, path);
        ensure!(
            want == got,
            "{host}{path}: translation {want}, Octavia {got}"
        );
    }

    // Status and state annotations.
    let fip = state.fip.clone();
    eventually("Ingress status carries the floating IP", async || {
        let ingress = world.get("Ingress", "shop").await?;
        Ok((ingress["status"]["loadBalancer"]["ingress"] == json!([{"ip": fip}])).then_some(()))
    })
    .await?;
    eventually("Route status carries the floating IP", async || {
        let route = world.get("Route", "cart").await?;
        let entry = &route["status"]["ingress"][0];
        Ok((entry["routerCanonicalHostname"] == json!(fip)).then_some(()))
    })
    .await?;
    let ingress_state = eventually("the Ingress state annotation", async || {
        let ingress = world.get("Ingress", "shop").await?;
        Ok(ingress["metadata"]["annotations"][INGRESS_STATE]
            .as_str()
            .map(|t| ObjectState::from_annotation("Ingress", t))
            .transpose()?
            .filter(|s| !s.l7_policies.is_empty()))
    })
    .await?;
    ensure!(ingress_state.load_balancer == lb.id);
    for policy in &ingress_state.l7_policies {
        ensure!(
            tree.listeners[0].policies.iter().any(|p| p.id == policy.id),
            "annotated policy {} is on the listener",
            policy.id
        );
    }

    // An endpoint change replaces members only.
    let ids = |tree: &Tree| {
        let mut policies: Vec<String> = tree.listeners[0]
            .policies
            .iter()
            .map(|p| p.id.clone())
            .collect();
        let mut pools: Vec<String> = tree.pools.iter().map(|p| p.id.clone()).collect();
        policies.sort();
        pools.sort();
        (policies, pools)
    };
    let before = ids(&tree);
    world
        .apply(&backend("web", &["10.0.1.10", "10.0.1.12"]))
        .await?;
    let (tree, _) = world.converged(&lb.id, "the endpoint change").await?;
    ensure!(ids(&tree) == before, "only members changed");

    // Two Routes to one Service; deleting one keeps the other's policy and pool.
    let route_state = |name: &'static str| {
        let world = &world;
        async move {
            let route = world.get("Route", name).await?;
            let state = route["metadata"]["annotations"][ROUTE_STATE]
                .as_str()
                .map(|t| ObjectState::from_annotation("Route", t))
                .transpose()?;
            anyhow::Ok(state)
        }
    };
    let cart2 = eventually("cart2's state", async || {
        Ok(route_state("cart2")
            .await?
            .filter(|s| !s.l7_policies.is_empty()))
    })
    .await?;
    world
        .api("Route")
        .delete("cart", &DeleteParams::default())
        .await?;
    let (tree, _) = world.converged(&lb.id, "the Route's deletion").await?;
    for policy in &cart2.l7_policies {
        ensure!(
            tree.listeners[0].policies.iter().any(|p| p.id == policy.id),
            "cart2's policy {} survives",
            policy.id
        );
    }
    for pool in &cart2.pools {
        ensure!(
            tree.pools.iter().any(|p| p.id == pool.id),
            "cart2's pool {} survives",
            pool.name
        );
    }

    // Routes get a pool each (weights are per Route); Ingresses share the Service's pool. An
    // Ingress on the shop Ingress's pool, deleted, leaves that pool and shop's policies alone.
    world
        .apply(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: blog, namespace: default}\nspec:\n  rules:\n  - host: blog.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n",
        )
        .await?;
    let ingress_state = |name: &'static str| {
        let world = &world;
        async move {
            let ingress = world.get("Ingress", name).await?;
            let state = ingress["metadata"]["annotations"][INGRESS_STATE]
                .as_str()
                .map(|t| ObjectState::from_annotation("Ingress", t))
                .transpose()?;
            anyhow::Ok(state)
        }
    };
    let blog = eventually("blog's state", async || {
        Ok(ingress_state("blog")
            .await?
            .filter(|s| !s.l7_policies.is_empty()))
    })
    .await?;
    let shop = ingress_state("shop").await?.context("shop's state")?;
    ensure!(
        blog.pools.len() == 1 && shop.pools.iter().any(|p| p.id == blog.pools[0].id),
        "blog shares shop's pool of Service web: {blog:?} {shop:?}"
    );
    world
        .api("Ingress")
        .delete("blog", &DeleteParams::default())
        .await?;
    let (tree, _) = world
        .converged(&lb.id, "the shared-pool Ingress's deletion")
        .await?;
    ensure!(
        tree.pools.iter().any(|p| p.id == blog.pools[0].id),
        "the shared pool stays"
    );
    for policy in &shop.l7_policies {
        ensure!(
            tree.listeners[0].policies.iter().any(|p| p.id == policy.id),
            "shop's policy {} stays",
            policy.name
        );
    }

    // A rule Octavia refuses (a value over 255 characters): a Warning Event on that Ingress,
    // retried with backoff, while another object's change still goes through.
    let long_path = format!("/{}", "x".repeat(300));
    world
        .apply(&format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: long, namespace: default}}\nspec:\n  rules:\n  - host: long.example.com\n    http:\n      paths:\n      - {{path: {long_path}, pathType: Exact, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n"
        ))
        .await?;
    eventually("a Warning Event about the refused Ingress", async || {
        Ok(events(&world)
            .await?
            .iter()
            .find(|e| e["regarding"]["name"] == "long" && e["reason"] == "OctaviaError")
            .cloned())
    })
    .await?;
    world
        .apply(&route("cart3", "cart.example.com", "/basket"))
        .await?;
    eventually("the other Route is synced meanwhile", async || {
        let tree = read_tree(&world.octavia, &lb.id).await?;
        Ok(tree.listeners[0]
            .policies
            .iter()
            .any(|p| p.tags.iter().any(|t| t.contains("Route default/cart3")))
            .then_some(()))
    })
    .await?;
    world
        .api("Ingress")
        .delete("long", &DeleteParams::default())
        .await?;
    world
        .converged(&lb.id, "the refused Ingress deleted")
        .await?;

    // Restart: adopted, nothing new.
    controller.terminate();
    let (controller, log) = world.controller("c2")?;
    eventually("the restarted controller has its router", async || {
        Ok(log_text(&log).contains("Router LB ready").then_some(()))
    })
    .await?;
    ensure!(
        log_text(&log).contains("Router LB of the Node annotation verified"),
        "{}",
        log_text(&log)
    );
    ensure!(world.counts().await? == counts, "a restart creates nothing");
    ensure!(world.router_state().await? == Some(state.clone()));

    // The annotation deleted: found again by name and tags.
    controller.terminate();
    world
        .api("Node")
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ROUTER_STATE: null}}})),
        )
        .await?;
    ensure!(world.router_state().await?.is_none());
    let (controller, log) = world.controller("c3")?;
    let again = eventually("the Node annotation again", async || {
        world.router_state().await
    })
    .await
    .with_context(|| log_text(&log))?;
    ensure!(again == state, "the same router: {again:?} vs {state:?}");
    ensure!(
        log_text(&log).contains("Router LB found by name and tag"),
        "{}",
        log_text(&log)
    );
    ensure!(world.counts().await? == counts, "found again, not created");
    world.converged(&lb.id, "after the third start").await?;
    controller.terminate();
    drop(world.server);
    Ok(())
}
