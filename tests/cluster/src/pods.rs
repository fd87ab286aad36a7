//! The pods the tests probe between: upstream's model of namespaces x, y, z with pods a, b, c,
//! each `nephrite/echo` serving TCP 80 and 81 on ports named `serve-80-tcp` and `serve-81-tcp`
//! and answering `<namespace>/<pod> <path>`; and each pod's network namespace, found through
//! its container's process in containerd.

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::cluster::Cluster;

/// The namespaces of the model.
pub const NAMESPACES: [&str; 3] = ["x", "y", "z"];

/// The pods of each namespace.
pub const POD_NAMES: [&str; 3] = ["a", "b", "c"];

/// The TCP ports every pod serves.
pub const PORTS: [u16; 2] = [80, 81];

/// The echo image, as the cluster imported it (`imagePullPolicy: Never`).
pub fn echo_image() -> String {
    format!("nephrite/echo:{}", env!("CARGO_PKG_VERSION"))
}

/// The name of the container port serving `port` (upstream's spelling).
pub fn port_name(port: u16) -> String {
    format!("serve-{port}-tcp")
}

/// A Pod of the echo image serving [`PORTS`], labelled `pod: <name>` plus `extra` labels,
/// answering with `<namespace>/<name>`. `ready_port` is the port its readiness probe connects to
/// (one it does not serve keeps it unready).
pub fn echo_pod(namespace: &str, name: &str, extra: &Value, ready_port: u16) -> Value {
    let mut labels = json!({"pod": name});
    if let (Some(labels), Some(extra)) = (labels.as_object_mut(), extra.as_object()) {
        labels.extend(extra.clone());
    }
    let listen = PORTS
        .iter()
        .map(|p| format!("0.0.0.0:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "echo",
                "image": echo_image(),
                "imagePullPolicy": "Never",
                "args": ["--listen", listen],
                // Root in the container (with the runtime's default capabilities) may bind
                // ports below 1024; the image's default user may not.
                "securityContext": {"runAsUser": 0},
                "ports": PORTS.iter().map(|p| json!({
                    "name": port_name(*p), "containerPort": p, "protocol": "TCP",
                })).collect::<Vec<_>>(),
                "env": [
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "POD_SHORT_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAME", "value": "$(POD_NAMESPACE)/$(POD_SHORT_NAME)"},
                ],
                "readinessProbe": {"tcpSocket": {"port": ready_port}, "periodSeconds": 1},
            }],
        },
    })
}

/// A running pod: its name, address and network namespace.
#[derive(Debug)]
pub struct Pod {
    /// `<namespace>/<name>`, which its echo server answers.
    pub id: String,
    /// The namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// Its address on the pod network.
    pub ip: Ipv4Addr,
    /// Its network namespace, held open.
    pub netns: File,
}

/// Create `namespaces` and the pods of `manifests`, wait until every one is Ready (or, for
/// `unready`, Running), and find each one's address and network namespace.
pub fn create(
    cluster: &Cluster,
    namespaces: &[&str],
    manifests: &[Value],
    timeout: Duration,
) -> anyhow::Result<Vec<Pod>> {
    for namespace in namespaces {
        cluster.apply(&json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
        }))?;
    }
    // The namespace's ServiceAccount comes from the controller-manager; a pod created before
    // it exists is refused.
    for namespace in namespaces {
        wait_for(
            timeout,
            &format!("namespace {namespace}'s default ServiceAccount"),
            || {
                Ok(cluster
                    .kubectl(&["get", "serviceaccount", "default", "-n", namespace])
                    .is_ok())
            },
        )?;
    }
    for manifest in manifests {
        cluster.apply(manifest)?;
    }
    let mut pods = Vec::new();
    for manifest in manifests {
        let namespace = manifest["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
        let mut last = Value::Null;
        let running = wait_for(timeout, &format!("pod {namespace}/{name} Running"), || {
            last = cluster.get_json(&["pod", name, "-n", namespace])?;
            Ok(last["status"]["phase"] == "Running"
                && last["status"]["podIP"].is_string()
                && last["status"]["containerStatuses"][0]["containerID"].is_string())
        });
        running.with_context(|| format!("the pod's status: {:#}", last["status"]))?;
        let ip: Ipv4Addr = last["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .with_context(|| {
                format!("pod {namespace}/{name}'s podIP {}", last["status"]["podIP"])
            })?;
        let container = last["status"]["containerStatuses"][0]["containerID"]
            .as_str()
            .unwrap_or_default();
        let pid = task_pid(cluster, container)?;
        let netns_path = format!("/proc/{pid}/ns/net");
        let netns = File::open(&netns_path).with_context(|| format!("opening {netns_path}"))?;
        pods.push(Pod {
            id: format!("{namespace}/{name}"),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ip,
            netns,
        });
    }
    Ok(pods)
}

/// Wait until every pod of `namespace` reports Ready.
pub fn wait_ready(cluster: &Cluster, namespace: &str, timeout: Duration) -> anyhow::Result<()> {
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "pod",
            "--all",
            "-n",
            namespace,
            &format!("--timeout={}s", timeout.as_secs()),
        ])
        .map(drop)
}

/// The host pid of the container `containerd://<id>` (its task in containerd's `k8s.io`
/// namespace).
fn task_pid(cluster: &Cluster, container: &str) -> anyhow::Result<u32> {
    let id = container
        .strip_prefix("containerd://")
        .with_context(|| format!("container id {container:?} is not containerd's"))?;
    let output = Command::new("ctr")
        .arg("--address")
        .arg(cluster.containerd_socket())
        .args(["--namespace", "k8s.io", "tasks", "ls"])
        .output()
        .context("running ctr tasks ls (Debian: containerd)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_task_pid(&text, id).with_context(|| {
        format!(
            "ctr tasks ls lists no task {id}: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The pid of task `id` in `ctr tasks ls`'s table (`TASK PID STATUS`).
pub fn parse_task_pid(table: &str, id: &str) -> Option<u32> {
    table.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some(id))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

/// Call `check` every half second until it returns true, failing after `timeout` (or at its
/// first error, when it keeps failing until then).
pub fn wait_for(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let result = check();
        match result {
            Ok(true) => return Ok(()),
            Ok(false) if Instant::now() < deadline => {}
            Err(_) if Instant::now() < deadline => {}
            Ok(false) => anyhow::bail!("timed out after {timeout:?} waiting for {what}"),
            Err(e) => {
                return Err(e.context(format!("timed out after {timeout:?} waiting for {what}")));
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::{echo_pod, parse_task_pid};

    #[test]
    fn a_task_pid_is_read_from_ctrs_table() {
        let table = "TASK    PID     STATUS\nabc     1234    RUNNING\nabd     99      RUNNING\n";
        assert_eq!(parse_task_pid(table, "abc"), Some(1234));
        assert_eq!(parse_task_pid(table, "abd"), Some(99));
        assert_eq!(parse_task_pid(table, "ab"), None);
        assert_eq!(parse_task_pid("TASK PID STATUS\n", "TASK"), None);
    }

    #[test]
    fn an_echo_pod_serves_both_ports_by_name_and_answers_its_full_name() {
        let pod = echo_pod("x", "a", &serde_json::json!({"svc": "yes"}), 80);
        let container = &pod["spec"]["containers"][0];
        assert_eq!(pod["metadata"]["labels"]["pod"], "a");
        assert_eq!(pod["metadata"]["labels"]["svc"], "yes");
        assert_eq!(container["args"][1], "0.0.0.0:80,0.0.0.0:81");
        assert_eq!(container["ports"][1]["name"], "serve-81-tcp");
        assert_eq!(container["imagePullPolicy"], "Never");
        assert_eq!(
            container["env"][2]["value"],
            "$(POD_NAMESPACE)/$(POD_SHORT_NAME)"
        );
    }
}
