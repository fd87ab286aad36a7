//! The upstream NetworkPolicy truth table and the Service cases on the real one-node cluster
//! (`cargo xtask cluster up`, nimbess-agent as its CNI and Service proxy). One cluster for the
//! whole run; every case runs even when an earlier one failed, and the test fails at the end
//! naming each failed case with its expected and observed matrices.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use nephrite_cluster_tests::cluster::Cluster;
use nephrite_cluster_tests::ingress::KuryrL7;
use nephrite_cluster_tests::pods::{self, NAMESPACES, POD_NAMES, PORTS, Pod, echo_pod, port_name};
use nephrite_cluster_tests::probe::{Outcome, probe, probe_host};
use nephrite_cluster_tests::reachability::{Matrix, converge};
use serde_json::{Value, json};

/// How long pods may take to start, Services to get endpoints.
const START_TIMEOUT: Duration = Duration::from_secs(180);

/// How long the node may take to enforce what the API says (the agent watches and renders).
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(60);

/// The namespace of the Service cases' pods.
const SERVICE_NS: &str = "s";

#[test]
fn network_policies_and_services_behave_as_upstream_on_a_one_node_cluster() {
    if !nephrite_cluster_tests::is_root() {
        eprintln!(
            "\n\
             ********************************************************************************\n\
             * SKIPPED: the NetworkPolicy and Service tests on a real one-node cluster need   *\n\
             * root (they start a kubelet, containerd and nimbess-agent as the node's CNI).   *\n\
             * Run `cargo xtask test` as root, or this test with sudo, to run them.          *\n\
             ********************************************************************************\n"
        );
        return;
    }
    let cluster = Cluster::up().expect("the cluster comes up");
    let failures = run(&cluster).expect("the namespaces, pods and Services are created");
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Every case, in order; the failures, each with what it saw.
fn run(cluster: &Cluster) -> anyhow::Result<Vec<String>> {
    let manifests: Vec<Value> = NAMESPACES
        .iter()
        .flat_map(|ns| {
            POD_NAMES
                .iter()
                .map(move |pod| echo_pod(ns, pod, &json!({}), 80))
        })
        .collect();
    let pods = pods::create(cluster, &NAMESPACES, &manifests, START_TIMEOUT)?;
    for namespace in NAMESPACES {
        pods::wait_ready(cluster, namespace, START_TIMEOUT)?;
    }
    let mut failures = Vec::new();
    let mut report = |name: &str, result: Result<String, String>| match result {
        Ok(note) => eprintln!("cluster test: PASS {name} ({note})"),
        Err(e) => {
            eprintln!("cluster test: FAIL {name}:\n{e}");
            failures.push(format!("{name}:\n{e}"));
        }
    };
    let everything = Matrix::expected(&pods, &PORTS, |_, _, _| true);
    report(
        "no policy: every pod reaches every pod",
        converge(&pods, &everything, CONVERGE_TIMEOUT).map(|r| format!("{r} round(s)")),
    );
    for case in policy_cases(&pods) {
        let result = policy_case(cluster, &pods, &case, &everything);
        report(case.name, result);
    }
    for (name, result) in service_cases(cluster, &pods)? {
        report(&name, result);
    }
    Ok(failures)
}

/// Whether a case expects `client` to reach `server` on `port`.
type Expectation = Box<dyn Fn(&Pod, &Pod, u16) -> bool>;

/// One NetworkPolicy case: the policies applied together and the matrix they should give.
struct PolicyCase {
    name: &'static str,
    policies: Vec<Value>,
    expect: Expectation,
}

/// A NetworkPolicy `name` in `namespace` with `spec`.
fn policy(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// A selector of namespaces by name (the label the API server puts on each namespace).
fn namespaces_named(names: &[&str]) -> Value {
    json!({"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "In", "values": names,
    }]})
}

fn is(pod: &Pod, id: &str) -> bool {
    pod.id == id
}

/// Upstream's truth-table scenarios, each as the policies and the expected matrix.
fn policy_cases(pods: &[Pod]) -> Vec<PolicyCase> {
    let ip = |id: &str| {
        pods.iter()
            .find(|p| p.id == id)
            .map_or(Ipv4Addr::UNSPECIFIED, |p| p.ip)
    };
    let zc = ip("z/c");
    let yb = ip("y/b");
    let [o1, o2, o3, _] = yb.octets();
    let pod_net = format!("{o1}.{o2}.{o3}.0/24");
    let x_a = json!({"matchLabels": {"pod": "a"}});
    vec![
        PolicyCase {
            name: "deny all ingress in x",
            policies: vec![policy(
                "x",
                "deny-ingress",
                json!({
                    "podSelector": {}, "policyTypes": ["Ingress"],
                }),
            )],
            expect: Box::new(|_, to, _| to.namespace != "x"),
        },
        PolicyCase {
            name: "deny all egress in x",
            policies: vec![policy(
                "x",
                "deny-egress",
                json!({
                    "podSelector": {}, "policyTypes": ["Egress"],
                }),
            )],
            expect: Box::new(|from, _, _| from.namespace != "x"),
        },
        PolicyCase {
            name: "ingress to x/a from pod b of x only (pod selector)",
            policies: vec![policy(
                "x",
                "allow-b",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}],
                }),
            )],
            expect: Box::new(|from, to, _| !is(to, "x/a") || is(from, "x/b")),
        },
        PolicyCase {
            name: "ingress to x/a from namespace y only (namespace selector)",
            policies: vec![policy(
                "x",
                "allow-y",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"from": [{"namespaceSelector": namespaces_named(&["y"])}]}],
                }),
            )],
            expect: Box::new(|from, to, _| !is(to, "x/a") || from.namespace == "y"),
        },
        PolicyCase {
            name: "ingress to x/a from pods b of namespaces y and z (both selectors, one peer)",
            policies: vec![policy(
                "x",
                "allow-yz-b",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"from": [{
                        "namespaceSelector": namespaces_named(&["y", "z"]),
                        "podSelector": {"matchLabels": {"pod": "b"}},
                    }]}],
                }),
            )],
            expect: Box::new(|from, to, _| {
                !is(to, "x/a") || (from.name == "b" && from.namespace != "x")
            }),
        },
        PolicyCase {
            name: "ingress to x/a from namespace y or pod b of x (two peers)",
            policies: vec![policy(
                "x",
                "allow-y-or-b",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"from": [
                        {"namespaceSelector": namespaces_named(&["y"])},
                        {"podSelector": {"matchLabels": {"pod": "b"}}},
                    ]}],
                }),
            )],
            expect: Box::new(|from, to, _| {
                !is(to, "x/a") || from.namespace == "y" || is(from, "x/b")
            }),
        },
        PolicyCase {
            name: "ingress to x/a on port 81 only (port by number)",
            policies: vec![policy(
                "x",
                "allow-81",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"ports": [{"protocol": "TCP", "port": 81}]}],
                }),
            )],
            expect: Box::new(|_, to, port| !is(to, "x/a") || port == 81),
        },
        PolicyCase {
            name: "ingress to x/a on port serve-80-tcp only (port by name)",
            policies: vec![policy(
                "x",
                "allow-80-by-name",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"ports": [{"protocol": "TCP", "port": port_name(80)}]}],
                }),
            )],
            expect: Box::new(|_, to, port| !is(to, "x/a") || port == 80),
        },
        PolicyCase {
            name: "ingress to x/a from 0.0.0.0/0 except z/c (ipBlock with except)",
            policies: vec![policy(
                "x",
                "allow-all-but-zc",
                json!({
                    "podSelector": x_a,
                    "ingress": [{"from": [{"ipBlock": {
                        "cidr": "0.0.0.0/0", "except": [format!("{zc}/32")],
                    }}]}],
                }),
            )],
            expect: Box::new(|from, to, _| !is(to, "x/a") || !is(from, "z/c")),
        },
        PolicyCase {
            name: "egress from x/a to the pod network except y/b (ipBlock with except, egress)",
            policies: vec![policy(
                "x",
                "egress-all-but-yb",
                json!({
                    "podSelector": x_a,
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"ipBlock": {
                        "cidr": pod_net, "except": [format!("{yb}/32")],
                    }}]}],
                }),
            )],
            expect: Box::new(|from, to, _| !is(from, "x/a") || !is(to, "y/b")),
        },
        PolicyCase {
            name: "two policies on x/a add up (namespace y on 80, pods c anywhere on 81)",
            policies: vec![
                policy(
                    "x",
                    "y-on-80",
                    json!({
                        "podSelector": x_a,
                        "ingress": [{
                            "from": [{"namespaceSelector": namespaces_named(&["y"])}],
                            "ports": [{"protocol": "TCP", "port": 80}],
                        }],
                    }),
                ),
                policy(
                    "x",
                    "c-on-81",
                    json!({
                        "podSelector": x_a,
                        "ingress": [{
                            "from": [{
                                "namespaceSelector": {},
                                "podSelector": {"matchLabels": {"pod": "c"}},
                            }],
                            "ports": [{"protocol": "TCP", "port": 81}],
                        }],
                    }),
                ),
            ],
            expect: Box::new(|from, to, port| {
                !is(to, "x/a")
                    || (port == 80 && from.namespace == "y")
                    || (port == 81 && from.name == "c")
            }),
        },
        PolicyCase {
            name: "egress and ingress together (x/a may reach y only; y admits x/a only)",
            policies: vec![
                policy(
                    "x",
                    "a-to-y",
                    json!({
                        "podSelector": x_a,
                        "policyTypes": ["Egress"],
                        "egress": [{"to": [{"namespaceSelector": namespaces_named(&["y"])}]}],
                    }),
                ),
                policy(
                    "y",
                    "from-x-a",
                    json!({
                        "podSelector": {},
                        "ingress": [{"from": [{
                            "namespaceSelector": namespaces_named(&["x"]),
                            "podSelector": {"matchLabels": {"pod": "a"}},
                        }]}],
                    }),
                ),
            ],
            expect: Box::new(|from, to, _| {
                if to.namespace == "y" {
                    is(from, "x/a")
                } else {
                    !is(from, "x/a")
                }
            }),
        },
    ]
}

/// Apply a case's policies, check the matrix, delete them and check that every pod reaches
/// every pod again.
fn policy_case(
    cluster: &Cluster,
    pods: &[Pod],
    case: &PolicyCase,
    everything: &Matrix,
) -> Result<String, String> {
    for policy in &case.policies {
        cluster.apply(policy).map_err(|e| format!("{e:#}"))?;
    }
    let expected = Matrix::expected(pods, &PORTS, &case.expect);
    let enforced = converge(pods, &expected, CONVERGE_TIMEOUT);
    for policy in &case.policies {
        let namespace = policy["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = policy["metadata"]["name"].as_str().unwrap_or_default();
        cluster
            .kubectl(&["delete", "networkpolicy", name, "-n", namespace, "--wait"])
            .map_err(|e| format!("{e:#}"))?;
    }
    let rounds = enforced?;
    let lifted = converge(pods, everything, CONVERGE_TIMEOUT)
        .map_err(|e| format!("once the policies were deleted, {e}"))?;
    Ok(format!(
        "enforced in {rounds} round(s) of probes, lifted in {lifted}"
    ))
}

/// The Service cases on pods of namespace `s` (two ready, one never ready), probed from x/a and
/// from the host.
fn service_cases(
    cluster: &Cluster,
    pods: &[Pod],
) -> anyhow::Result<Vec<(String, Result<String, String>)>> {
    let backend = json!({"app": "svc"});
    let manifests = vec![
        echo_pod(SERVICE_NS, "ready-1", &backend, 80),
        echo_pod(SERVICE_NS, "ready-2", &backend, 80),
        // Its readiness probe connects to a port it does not serve: Running, never Ready.
        echo_pod(SERVICE_NS, "unready", &backend, 9),
    ];
    let backends = pods::create(cluster, &[SERVICE_NS], &manifests, START_TIMEOUT)?;
    let service = |name: &str, spec: Value| {
        cluster.apply(&json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": SERVICE_NS},
            "spec": spec,
        }))
    };
    let http = json!([{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 80}]);
    service("plain", json!({"selector": backend, "ports": http}))?;
    service(
        "sticky",
        json!({"selector": backend, "ports": http, "sessionAffinity": "ClientIP"}),
    )?;
    service(
        "nodeport",
        json!({"type": "NodePort", "selector": backend, "ports": http}),
    )?;
    service(
        "empty",
        json!({"selector": {"app": "nobody"}, "ports": http}),
    )?;
    for (name, ready) in [("plain", 2), ("sticky", 2), ("nodeport", 2)] {
        pods::wait_for(
            START_TIMEOUT,
            &format!("Service {name}'s EndpointSlice with {ready} ready endpoints"),
            || Ok(ready_endpoints(cluster, name)? == ready),
        )?;
    }
    let client = pods.iter().find(|p| p.id == "x/a").context("pod x/a")?;
    let unready = backends
        .iter()
        .find(|p| p.name == "unready")
        .context("pod s/unready")?;
    let cluster_ip = |name: &str| -> anyhow::Result<Ipv4Addr> {
        let text = cluster.kubectl(&[
            "get",
            "service",
            name,
            "-n",
            SERVICE_NS,
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])?;
        text.trim()
            .parse()
            .with_context(|| format!("Service {name}'s clusterIP {text:?}"))
    };
    let ready: BTreeSet<String> = ["s/ready-1", "s/ready-2"].map(str::to_owned).into();
    let mut results = Vec::new();

    let plain = SocketAddr::from((cluster_ip("plain")?, 80));
    results.push((
        "ClusterIP reaches ready endpoints only".to_owned(),
        (|| {
            let direct = probe(Some(&client.netns), SocketAddr::from((unready.ip, 80)), "/");
            if direct.answered_by() != Some("s/unready") {
                return Err(format!(
                    "the unready pod does not answer directly ({direct:?}), so the case proves nothing"
                ));
            }
            let seen = answers(Some(&client.netns), plain, 40)?;
            let distinct: BTreeSet<String> = seen.iter().cloned().collect();
            if distinct == ready {
                Ok(format!("40 connections to {plain} answered by {distinct:?}"))
            } else {
                Err(format!(
                    "40 connections to {plain} were answered by {distinct:?}, expected exactly {ready:?}"
                ))
            }
        })(),
    ));

    let sticky = SocketAddr::from((cluster_ip("sticky")?, 80));
    results.push((
        "session affinity ClientIP keeps a client on one endpoint".to_owned(),
        (|| {
            let seen = answers(Some(&client.netns), sticky, 20)?;
            let distinct: BTreeSet<String> = seen.iter().cloned().collect();
            if distinct.len() == 1 && distinct.is_subset(&ready) {
                Ok(format!("20 connections to {sticky} all answered by {distinct:?}"))
            } else {
                Err(format!(
                    "20 connections to {sticky} from x/a were answered by {distinct:?}, expected one of {ready:?}"
                ))
            }
        })(),
    ));

    let node_port: u16 = cluster
        .kubectl(&[
            "get",
            "service",
            "nodeport",
            "-n",
            SERVICE_NS,
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ])?
        .trim()
        .parse()
        .context("Service nodeport's nodePort")?;
    let node_ip: Ipv4Addr = cluster
        .kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}",
        ])?
        .trim()
        .parse()
        .context("the node's InternalIP")?;
    let from_host = SocketAddr::from((node_ip, node_port));
    results.push((
        "NodePort answers from the host".to_owned(),
        (|| {
            let seen = answers(None, from_host, 20)?;
            let distinct: BTreeSet<String> = seen.iter().cloned().collect();
            if distinct.is_subset(&ready) && !distinct.is_empty() {
                Ok(format!("20 connections from the host to {from_host} answered by {distinct:?}"))
            } else {
                Err(format!(
                    "20 connections from the host to {from_host} were answered by {distinct:?}, expected only {ready:?}"
                ))
            }
        })(),
    ));

    let empty = SocketAddr::from((cluster_ip("empty")?, 80));
    results.push((
        "a Service without endpoints refuses at once".to_owned(),
        match probe(Some(&client.netns), empty, "/") {
            Outcome::Refused => Ok(format!("{empty} refused the connection")),
            outcome => Err(format!(
                "a connection from x/a to {empty} (no endpoints) gave {outcome:?}, expected a refusal"
            )),
        },
    ));
    results.push((
        "an Ingress through kuryr-l7 reaches the ready endpoints".to_owned(),
        ingress_case(cluster, &ready).map_err(|e| format!("{e:#}")),
    ));
    Ok(results)
}

/// kuryr-l7's controller and router on the host; an Ingress for `echo.s.example` in front of
/// Service `plain`: every request through the router is answered by a ready pod, both of them.
fn ingress_case(cluster: &Cluster, ready: &BTreeSet<String>) -> anyhow::Result<String> {
    let host = "echo.s.example";
    cluster.apply(&json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "echo", "namespace": SERVICE_NS},
        "spec": {"rules": [{"host": host, "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "plain", "port": {"number": 80}}},
        }]}}]},
    }))?;
    let kuryr = KuryrL7::start(cluster)?;
    let router = kuryr.router;
    let mut last = Outcome::Refused;
    pods::wait_for(
        CONVERGE_TIMEOUT,
        &format!("an answer through the router at {router}"),
        || {
            last = probe_host(None, router, host, "/ingress");
            Ok(last.answered_by().is_some())
        },
    )
    .with_context(|| {
        format!(
            "the last request gave {last:?}; kuryr-l7's logs are in {}",
            kuryr.logs.display()
        )
    })?;
    let mut seen = BTreeSet::new();
    for i in 0..20 {
        match probe_host(None, router, host, "/ingress") {
            Outcome::Answered(pod) => {
                seen.insert(pod);
            }
            other => anyhow::bail!("request {} of 20 through {router}: {other:?}", i + 1),
        }
    }
    anyhow::ensure!(
        &seen == ready,
        "20 requests for {host} through the router were answered by {seen:?}, expected exactly {ready:?}"
    );
    Ok(format!(
        "20 requests for {host} through {router} answered by {seen:?}"
    ))
}

/// The number of ready endpoints in Service `name`'s EndpointSlices.
fn ready_endpoints(cluster: &Cluster, name: &str) -> anyhow::Result<usize> {
    let slices = cluster.get_json(&[
        "endpointslices",
        "-n",
        SERVICE_NS,
        "-l",
        &format!("kubernetes.io/service-name={name}"),
    ])?;
    Ok(slices["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|slice| slice["endpoints"].as_array().into_iter().flatten())
        .filter(|endpoint| endpoint["conditions"]["ready"] == true)
        .count())
}

/// `count` connections to `to` from `netns` (the host's when `None`), each answered; who
/// answered each. Waits up to [`CONVERGE_TIMEOUT`] for the first answer (the agent renders a
/// Service a moment after its endpoints change).
fn answers(
    netns: Option<&std::fs::File>,
    to: SocketAddr,
    count: usize,
) -> Result<Vec<String>, String> {
    let mut last = Outcome::Refused;
    let first = pods::wait_for(CONVERGE_TIMEOUT, &format!("an answer from {to}"), || {
        last = probe(netns, to, "/service");
        Ok(last.answered_by().is_some())
    });
    first.map_err(|e| format!("{e:#}; the last attempt gave {last:?}"))?;
    (0..count)
        .map(|i| match probe(netns, to, "/service") {
            Outcome::Answered(pod) => Ok(pod),
            other => Err(format!(
                "connection {} of {count} to {to}: {other:?}",
                i + 1
            )),
        })
        .collect()
}
