//! `kuryr-l7 controller --driver octavia` (read from `kuryr.conf`) against the real Octavia 19
//! and Neutron 29 (`nephrite_test_services::OpenStack`, noauth) and the in-memory Kubernetes API
//! server, the built binary run as an operator runs it:
//!
//! - first start: the VIP port, the Router LB with its listener and L7 tree (one call), and the
//!   floating IP are created, the Node annotation written in the seed's shape, Ingress and
//!   Route status carry the floating IP, each object's state annotation names its Octavia ids, and the tree read back from Octavia
//!   routes every conformance request to the same backend as the translation;
//! - an endpoint change replaces members only (policy and pool ids unchanged), planned from the
//!   tree the last sync left (the log says `tree_reads=0`);
//! - a Route survives the deletion of another Route to the same Service, and an Ingress on a
//!   shared pool survives the deletion of the other Ingress on it;
//! - a rule Octavia refuses: a Warning Event on its Ingress, retried, while other objects sync;
//! - restart: everything adopted (object counts from the APIs unchanged); with the Node
//!   annotation deleted, found again by name, `device_id` and tags.
//!
//! One `#[test]`: under nextest each test is a process, and each would start its own services.

mod support;

use anyhow::{Context, ensure};
use kube::api::{DeleteParams, Patch, PatchParams};
use nephrite_kuryr_l7::openstack::observe::read_tree;
use nephrite_kuryr_l7::openstack::router_lb::ROUTER_NAME;
use nephrite_kuryr_l7::openstack::state::{INGRESS_STATE, ObjectState, ROUTE_STATE, ROUTER_STATE};
use nephrite_l7::octavia::{HTTP_LISTENER, OBJECT_TAG, Tree};
use nephrite_l7::{Outcome, Request};
use nephrite_test_services::OpenStack;
use serde_json::json;
use support::openstack::{NODE, World, events, eventually, log_text};

const TEST: &str = "the_octavia_driver_against_the_real_apis";

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
    let world = World::setup(cloud).await?;
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
    let syncs_before = sync_lines(&log_text(&log)).len();
    world
        .apply(&backend("web", &["10.0.1.10", "10.0.1.12"]))
        .await?;
    let (tree, _) = world.converged(&lb.id, "the endpoint change").await?;
    ensure!(ids(&tree) == before, "only members changed");
    // Planned from the tree the last sync left (the calls performed on it): no full read of
    // the tree for the change, and the tree kept after it (every call performed exactly).
    let new_syncs = eventually("the endpoint change's sync logged", async || {
        let lines = sync_lines(&log_text(&log));
        Ok((lines.len() > syncs_before).then(|| lines[syncs_before..].to_vec()))
    })
    .await?;
    ensure!(
        new_syncs.iter().any(|l| l.contains("tree_reads=0"))
            && new_syncs.iter().all(|l| l.contains("exact=true")),
        "the endpoint change was planned from the kept tree: {new_syncs:#?}"
    );

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

/// The controller's "Octavia sync" log lines (a sync that made calls), escape codes removed.
fn sync_lines(log: &str) -> Vec<String> {
    log.lines()
        .map(|line| {
            let mut plain = String::with_capacity(line.len());
            let mut chars = line.chars();
            while let Some(c) = chars.next() {
                if c == '\u{1b}' {
                    // CSI: ESC [ parameters final-letter.
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                } else {
                    plain.push(c);
                }
            }
            plain
        })
        .filter(|line| line.contains("Octavia sync"))
        .collect()
}
