//! `kuryr-l7 controller --source kube` (the embedded driver) on the real API server, with only
//! its ServiceAccount's token from `kuryr-l7.yaml` + `rbac.yaml`: an Ingress and a Route (the
//! CRD of `examples/kubernetes/route-crd.yaml`) with their Service and EndpointSlice become
//! rules on the rules service, both get status with the router's address, a rejected Ingress
//! gets a Warning Event; then two replicas on one Lease: only the holder writes, and when it
//! is killed (SIGKILL, the Lease not released) the other takes over.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, ensure};
use serde_json::{Value, json};

use super::cluster::{BIN, Daemon, Scenario, credentials, deploy, eventually, log_text};

const ROUTE_CRD: &str = include_str!("../../examples/kubernetes/route-crd.yaml");
const GATEWAY_CRDS: &str = include_str!("../../deploy/kubernetes/gateway-api-crds.yaml");
/// The controller's ServiceAccount, as `rbac.yaml` defines it.
const ACCOUNT: &str = "kuryr-l7/kuryr-l7-controller";
/// Where its Lease lives (the Role of `rbac.yaml` grants Leases there only).
const LEASE_NAMESPACE: &str = "kuryr-l7";
/// The address the controller writes into status (`--status-address`).
const ROUTER_ADDRESS: &str = "192.0.2.80";
/// The backend's one endpoint.
const MEMBER: &str = "10.244.7.9";
/// The annotation of extra Octavia rules; a value that is not a list refuses the Ingress.
const EXTRA_RULES: &str = nephrite_l7::translate::EXTRA_RULES_ANNOTATION;

fn backend(namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: {namespace}}}\nspec:\n  ports: [{{name: http, port: 80, targetPort: 8080}}]\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: {namespace}\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports: [{{name: http, port: 8080, protocol: TCP}}]\nendpoints:\n- addresses: [\"{MEMBER}\"]\n  conditions: {{ready: true}}\n"
    )
}

fn ingress(namespace: &str, name: &str, host: &str, path: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  rules:\n  - host: {host}\n    http:\n      paths:\n      - {{path: '{path}', pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n"
    )
}

/// An Ingress the API server accepts and the translation refuses: its extra-rules annotation
/// is not a list. (A path without a leading `/`, which `tests/kube.rs` uses, is refused by
/// the real server's validation already.)
fn broken_ingress(namespace: &str, name: &str, host: &str) -> String {
    let ingress = ingress(namespace, name, host, "/broken");
    ingress.replace(
        &format!("metadata: {{name: {name}, namespace: {namespace}}}"),
        &format!(
            "metadata: {{name: {name}, namespace: {namespace}, annotations: {{{EXTRA_RULES}: 'nope'}}}}"
        ),
    )
}

/// A GatewayClass of ours, a Gateway and an HTTPRoute to `web` for `gw.example.com`.
fn gateway(namespace: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: kuryr-{namespace}}}\nspec: {{controllerName: kuryr.nephrite.io/l7}}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: web, namespace: {namespace}}}\nspec:\n  gatewayClassName: kuryr-{namespace}\n  listeners: [{{name: http, port: 80, protocol: HTTP}}]\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: gw, namespace: {namespace}}}\nspec:\n  parentRefs: [{{name: web}}]\n  hostnames: [gw.example.com]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /shop}}}}]\n    backendRefs: [{{name: web, port: 80}}]\n"
    )
}

fn route(namespace: &str) -> String {
    format!(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: cart, namespace: {namespace}}}\nspec: {{host: cart.example.com, path: /api, port: {{targetPort: http}}, to: {{kind: Service, name: web}}}}\n"
    )
}

/// A controller named `identity` on Lease `lease`, with the kubeconfig `kubeconfig`: the
/// daemon and the rules service's address.
fn controller(
    scenario: &Scenario,
    kubeconfig: &Path,
    identity: &str,
    lease: &str,
) -> anyhow::Result<(Daemon, SocketAddr)> {
    let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut command = Command::new(BIN);
    command
        .args(["controller", "--source", "kube"])
        .args(["--status-address", ROUTER_ADDRESS])
        .args(["--identity", identity])
        .args(["--lease-namespace", LEASE_NAMESPACE, "--lease-name", lease])
        .arg("--listen")
        .arg(listen.to_string())
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info");
    Ok((Daemon::spawn(command, &scenario.log(identity))?, listen))
}

/// The rules the controller at `url` serves, as `kuryr-l7 rules -o json` prints them.
fn rules(url: SocketAddr) -> Option<Value> {
    let out = Command::new(BIN)
        .args(["rules", "-o", "json", "--rules"])
        .arg(url.to_string())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// Every string anywhere in `value`.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Whether the rules route `host` (a HOST_NAME rule's value) to a pool with [`MEMBER`].
fn routes_host(rules: &Value, host: &str) -> bool {
    let policies = rules["config"]["http"]["policies"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut all = Vec::new();
    strings(rules, &mut all);
    policies.iter().any(|policy| {
        let mut found = Vec::new();
        strings(policy, &mut found);
        found.iter().any(|s| s == host)
    }) && all.iter().any(|s| s.contains(MEMBER))
}

/// The Lease's holder.
async fn holder(scenario: &Scenario, lease: &str) -> anyhow::Result<Option<String>> {
    let lease = scenario
        .api("coordination.k8s.io/v1", "Lease", Some(LEASE_NAMESPACE))
        .await?
        .get_opt(lease)
        .await?;
    Ok(lease.and_then(|l| l.data["spec"]["holderIdentity"].as_str().map(str::to_owned)))
}

/// The reporting instances of the Events about `object` in the scenario's namespace.
async fn reporters(scenario: &Scenario, object: &str) -> anyhow::Result<Vec<String>> {
    Ok(scenario
        .events()
        .await?
        .iter()
        .filter(|e| e["regarding"]["name"] == object)
        .map(|e| {
            e["reportingInstance"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect())
}

/// Scenario 1: Ingress and Route to rules, status and a Warning Event, with the manifest's
/// rights only.
pub async fn ingress_and_route_become_rules_and_status(scenario: &Scenario) -> anyhow::Result<()> {
    let ns = scenario.namespace.as_str();
    let creds = credentials(scenario.kube, &["kuryr-l7.yaml", "rbac.yaml"], ACCOUNT).await?;
    let kubeconfig = scenario.kubeconfig(&creds)?;
    scenario.apply_crds(ROUTE_CRD).await?;
    scenario.apply_crds(GATEWAY_CRDS).await?;
    scenario.apply(&backend(ns)).await?;
    scenario
        .apply(&ingress(ns, "shop", "shop.example.com", "/a"))
        .await?;
    scenario.apply(&route(ns)).await?;

    let (c1, url) = controller(scenario, &kubeconfig, "serve-1", "kuryr-l7-serve")?;
    let log = scenario.log("serve-1");
    let served = eventually(
        "the Ingress and the Route are rules",
        Duration::from_secs(30),
        async || {
            Ok(rules(url).filter(|r| {
                routes_host(r, "shop.example.com") && routes_host(r, "cart.example.com")
            }))
        },
    )
    .await
    .with_context(|| format!("rules now: {:?}\n{}", rules(url), log_text(&log)))?;
    ensure!(
        served["rejections"].as_array().is_none_or(Vec::is_empty),
        "nothing rejected: {served}"
    );

    eventually("Ingress status", Duration::from_secs(20), async || {
        let ingress = scenario
            .get("networking.k8s.io/v1", "Ingress", "shop")
            .await?;
        Ok(
            (ingress["status"]["loadBalancer"]["ingress"] == json!([{"ip": ROUTER_ADDRESS}]))
                .then_some(()),
        )
    })
    .await
    .with_context(|| log_text(&log))?;
    eventually("Route admitted", Duration::from_secs(20), async || {
        let route = scenario
            .get("route.openshift.io/v1", "Route", "cart")
            .await?;
        let ingress = &route["status"]["ingress"][0];
        let condition = &ingress["conditions"][0];
        Ok((condition["type"] == "Admitted"
            && condition["status"] == "True"
            && ingress["host"] == "cart.example.com")
            .then_some(()))
    })
    .await
    .with_context(|| log_text(&log))?;

    // Gateway API: the HTTPRoute becomes rules; Gateway and HTTPRoute status as the spec says.
    scenario.apply(&gateway(ns)).await?;
    eventually(
        "the HTTPRoute is rules",
        Duration::from_secs(30),
        async || Ok(rules(url).filter(|r| routes_host(r, "gw.example.com"))),
    )
    .await
    .with_context(|| format!("rules now: {:?}\n{}", rules(url), log_text(&log)))?;
    let condition = |conditions: &Value, type_: &str| {
        conditions
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_))
            .map(|c| c["status"].clone())
    };
    eventually("Gateway Programmed", Duration::from_secs(20), async || {
        let gateway = scenario
            .get("gateway.networking.k8s.io/v1", "Gateway", "web")
            .await?;
        let status = &gateway["status"];
        Ok(
            (condition(&status["conditions"], "Programmed") == Some(json!("True"))
                && status["addresses"] == json!([{"type": "IPAddress", "value": ROUTER_ADDRESS}])
                && status["listeners"][0]["attachedRoutes"] == 1)
                .then_some(()),
        )
    })
    .await
    .with_context(|| log_text(&log))?;
    eventually("HTTPRoute Accepted", Duration::from_secs(20), async || {
        let route = scenario
            .get("gateway.networking.k8s.io/v1", "HTTPRoute", "gw")
            .await?;
        let parent = &route["status"]["parents"][0];
        Ok(
            (condition(&parent["conditions"], "Accepted") == Some(json!("True"))
                && condition(&parent["conditions"], "ResolvedRefs") == Some(json!("True")))
            .then_some(()),
        )
    })
    .await
    .with_context(|| log_text(&log))?;

    // A rejected Ingress: a Warning Event naming why, reported by this controller.
    scenario
        .apply(&broken_ingress(ns, "broken", "shop.example.com"))
        .await?;
    eventually("a Warning Event", Duration::from_secs(20), async || {
        Ok(scenario
            .events()
            .await?
            .iter()
            .any(|e| {
                e["type"] == "Warning"
                    && e["reason"] == "Rejected"
                    && e["regarding"]["name"] == "broken"
                    && e["reportingInstance"] == "serve-1"
                    && e["note"].as_str().unwrap_or_default().contains(EXTRA_RULES)
            })
            .then_some(()))
    })
    .await
    .with_context(|| log_text(&log))?;
    let forbidden = log_text(&log).contains("forbidden");
    ensure!(
        !forbidden,
        "the controller was refused something:\n{}",
        log_text(&log)
    );
    drop(c1);
    Ok(())
}

/// Scenario 2: two replicas on one Lease; only the holder writes; SIGKILL the holder and the
/// other takes over once the Lease expires.
pub async fn two_replicas_one_writes_and_the_other_takes_over(
    scenario: &Scenario,
) -> anyhow::Result<()> {
    const LEASE: &str = "kuryr-l7-pair";
    let ns = scenario.namespace.as_str();
    let creds = credentials(scenario.kube, &["kuryr-l7.yaml", "rbac.yaml"], ACCOUNT).await?;
    let kubeconfig = scenario.kubeconfig(&creds)?;
    scenario.apply(&backend(ns)).await?;
    scenario
        .apply(&ingress(ns, "pair", "pair.example.com", "/a"))
        .await?;
    let (a, url_a) = controller(scenario, &kubeconfig, "pair-a", LEASE)?;
    let (b, url_b) = controller(scenario, &kubeconfig, "pair-b", LEASE)?;
    let logs = || {
        format!(
            "pair-a:\n{}\npair-b:\n{}",
            log_text(&scenario.log("pair-a")),
            log_text(&scenario.log("pair-b"))
        )
    };
    // Both serve the same rules, leader or not.
    eventually(
        "both replicas serve the same version",
        Duration::from_secs(30),
        async || {
            let (Some(ra), Some(rb)) = (rules(url_a), rules(url_b)) else {
                return Ok(None);
            };
            Ok(
                (routes_host(&ra, "pair.example.com") && ra["version"] == rb["version"])
                    .then_some(()),
            )
        },
    )
    .await
    .with_context(logs)?;
    let leader = eventually(
        "a holder of the Lease",
        Duration::from_secs(20),
        async || holder(scenario, LEASE).await,
    )
    .await
    .with_context(logs)?;
    ensure!(
        leader == "pair-a" || leader == "pair-b",
        "the Lease is held by {leader:?}"
    );
    let (mut leader_daemon, follower, follower_daemon) = if leader == "pair-a" {
        (a, "pair-b", b)
    } else {
        (b, "pair-a", a)
    };

    scenario
        .apply(&broken_ingress(ns, "broken", "pair.example.com"))
        .await?;
    eventually(
        "an Event from the holder",
        Duration::from_secs(20),
        async || Ok((!reporters(scenario, "broken").await?.is_empty()).then_some(())),
    )
    .await
    .with_context(logs)?;
    // Both replicas saw the change (same version); only the holder wrote.
    eventually(
        "both replicas up to date",
        Duration::from_secs(20),
        async || {
            let (Some(ra), Some(rb)) = (rules(url_a), rules(url_b)) else {
                return Ok(None);
            };
            let broken = format!("Ingress {ns}/broken");
            let rejected = ra["rejections"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["object"] == broken.as_str()));
            Ok((ra["version"] == rb["version"] && rejected).then_some(()))
        },
    )
    .await
    .with_context(logs)?;
    let reported = reporters(scenario, "broken").await?;
    ensure!(
        reported.iter().all(|r| *r == leader),
        "only the Lease holder {leader} reports: {reported:?}"
    );

    // The holder dies without releasing the Lease: the other takes it once it expires.
    leader_daemon.0.kill()?;
    leader_daemon.0.wait()?;
    drop(leader_daemon);
    scenario
        .apply(&broken_ingress(ns, "broken-too", "pair.example.com"))
        .await?;
    eventually(
        "the other replica holds the Lease",
        Duration::from_secs(40),
        async || Ok((holder(scenario, LEASE).await?.as_deref() == Some(follower)).then_some(())),
    )
    .await
    .with_context(logs)?;
    eventually(
        "an Event from the new holder",
        Duration::from_secs(20),
        async || {
            Ok(reporters(scenario, "broken-too")
                .await?
                .iter()
                .any(|r| r == follower)
                .then_some(()))
        },
    )
    .await
    .with_context(logs)?;
    let forbidden = logs().contains("forbidden");
    ensure!(!forbidden, "a replica was refused something:\n{}", logs());
    drop(follower_daemon);
    Ok(())
}

/// Scenario 3: the controller starts while its manifest lacks `patch` on `ingresses/status`
/// (refused, said in its log); once the manifest's rule is applied, the leader writes the
/// status without any object changing, since it tries failed writes again after a pause.
pub async fn a_status_right_granted_late_is_used_without_a_change(
    scenario: &Scenario,
) -> anyhow::Result<()> {
    let ns = scenario.namespace.as_str();
    let files = ["kuryr-l7.yaml", "rbac.yaml"];
    let full = format!("{}\n---\n{}", deploy(files[0])?, deploy(files[1])?);
    let rule =
        "- apiGroups: [networking.k8s.io]\n  resources: [ingresses/status]\n  verbs: [patch]\n";
    ensure!(
        full.contains(rule),
        "rbac.yaml grants patch on ingresses/status in one rule"
    );
    let endpoint = scenario.kube.endpoint();
    let creds = endpoint
        .apply_access(
            "rbac.yaml without ingresses/status",
            &full.replace(rule, ""),
            ACCOUNT,
        )
        .await?;
    let kubeconfig = scenario.kubeconfig(&creds)?;
    scenario.apply(&backend(ns)).await?;
    scenario
        .apply(&ingress(ns, "late", "late.example.com", "/a"))
        .await?;
    let (daemon, _) = controller(scenario, &kubeconfig, "late-1", "kuryr-l7-late")?;
    let log = scenario.log("late-1");
    eventually(
        "the status write refused",
        Duration::from_secs(30),
        async || {
            Ok(log_text(&log)
                .contains("cannot patch resource \"ingresses/status\"")
                .then_some(()))
        },
    )
    .await
    .with_context(|| log_text(&log))?;
    // Restore the manifest's rights (whatever happens next, the other scenarios need them).
    let restored = credentials(scenario.kube, &files, ACCOUNT).await;
    restored?;
    eventually(
        "the Ingress status written after the grant",
        Duration::from_secs(60),
        async || {
            let ingress = scenario
                .get("networking.k8s.io/v1", "Ingress", "late")
                .await?;
            Ok(
                (ingress["status"]["loadBalancer"]["ingress"] == json!([{"ip": ROUTER_ADDRESS}]))
                    .then_some(()),
            )
        },
    )
    .await
    .with_context(|| log_text(&log))?;
    drop(daemon);
    Ok(())
}
