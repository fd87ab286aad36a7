//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler: their command lines (pure,
//! from where things are) and their start in order, each waited for.
//!
//! Unlike the tests' API server (`nephrite-test-services`' `kube_apiserver`, loopback only,
//! static token), this one is a cluster's: it serves on every address with the node's address
//! advertised (so the `kubernetes` Service gets an endpoint), authenticates every component
//! by its client certificate, authorises with `Node,RBAC`, and reaches the kubelet with a
//! client certificate of its own (`kubectl logs`/`exec`). The controller-manager runs each
//! controller as its own ServiceAccount and does no node IPAM (nimbess-agent assigns pod
//! addresses); neither it nor the scheduler serves HTTPS (`--secure-port=0`): nothing scrapes
//! them here, and it saves two ports.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use super::config::SERVICE_CIDR;
use super::pki::Pki;
use super::process::{Started, spawn, wait_ready};
use crate::kube::NodeBinaries;
use nephrite_test_services::kube_apiserver::KubeBinaries;

/// The ports the control plane listens on.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// etcd's client URL (loopback).
    pub etcd_client: SocketAddr,
    /// etcd's peer URL (loopback).
    pub etcd_peer: SocketAddr,
    /// kube-apiserver's secure port (on every address).
    pub apiserver: u16,
}

/// etcd's arguments: one member, data in `dir/etcd`.
pub fn etcd_args(dir: &Path, ports: &Ports) -> Vec<String> {
    let client = format!("http://{}", ports.etcd_client);
    let peer = format!("http://{}", ports.etcd_peer);
    vec![
        "--name=nephrite-cluster".to_owned(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=nephrite-cluster={peer}"),
        "--initial-cluster-state=new".to_owned(),
        "--logger=zap".to_owned(),
        "--log-outputs=stderr".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

/// kube-apiserver's arguments.
pub fn apiserver_args(dir: &Path, ports: &Ports, node_ip: Ipv4Addr, pki: &Pki) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        format!("--etcd-servers=http://{}", ports.etcd_client),
        "--bind-address=0.0.0.0".to_owned(),
        format!("--advertise-address={node_ip}"),
        format!("--secure-port={}", ports.apiserver),
        format!("--cert-dir={}", dir.join("pki").display()),
        format!("--tls-cert-file={}", path(&pki.apiserver_cert)),
        format!("--tls-private-key-file={}", path(&pki.apiserver_key)),
        format!("--client-ca-file={}", path(&pki.ca_cert)),
        format!(
            "--kubelet-client-certificate={}",
            path(&pki.apiserver_kubelet_client.cert)
        ),
        format!(
            "--kubelet-client-key={}",
            path(&pki.apiserver_kubelet_client.key)
        ),
        // The node's name resolves nowhere; its InternalIP is where the kubelet listens.
        "--kubelet-preferred-address-types=InternalIP,Hostname".to_owned(),
        "--authorization-mode=Node,RBAC".to_owned(),
        "--enable-admission-plugins=NodeRestriction".to_owned(),
        "--allow-privileged=true".to_owned(),
        format!(
            "--service-account-key-file={}",
            path(&pki.service_account_pub)
        ),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.service_account_key)
        ),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--profiling=false".to_owned(),
    ]
}

/// kube-controller-manager's arguments.
pub fn controller_manager_args(pki: &Pki) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        format!("--kubeconfig={}", path(&pki.controller_manager.kubeconfig)),
        "--use-service-account-credentials=true".to_owned(),
        format!(
            "--service-account-private-key-file={}",
            path(&pki.service_account_key)
        ),
        format!("--root-ca-file={}", path(&pki.ca_cert)),
        format!("--cluster-signing-cert-file={}", path(&pki.ca_cert)),
        format!("--cluster-signing-key-file={}", path(&pki.ca_key)),
        format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--allocate-node-cidrs=false".to_owned(),
        "--leader-elect=false".to_owned(),
        "--secure-port=0".to_owned(),
        "--profiling=false".to_owned(),
    ]
}

/// kube-scheduler's arguments.
pub fn scheduler_args(pki: &Pki) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", pki.scheduler.kubeconfig.display()),
        "--leader-elect=false".to_owned(),
        "--secure-port=0".to_owned(),
        "--profiling=false".to_owned(),
    ]
}

/// Start etcd, then kube-apiserver (waiting for its `/readyz` through kubectl as the admin),
/// then the controller-manager and the scheduler.
#[allow(clippy::too_many_arguments)]
pub fn start(
    dir: &Path,
    control: &KubeBinaries,
    node: &NodeBinaries,
    ports: &Ports,
    node_ip: Ipv4Addr,
    pki: &Pki,
) -> anyhow::Result<Vec<Started>> {
    let mut started = Vec::new();
    let mut etcd = Command::new(&control.etcd);
    etcd.args(etcd_args(dir, ports)).current_dir(dir);
    // etcd reads every ETCD_* variable as a flag and refuses conflicts with the command line.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ETCD_") {
            etcd.env_remove(key);
        }
    }
    let etcd = spawn(dir, "etcd", etcd)?;
    let health = format!("http://{}/health", ports.etcd_client);
    wait_ready(&etcd, Duration::from_secs(60), "healthy", || {
        http_ok(&health)
    })?;
    started.push(etcd);

    let mut apiserver = Command::new(&control.kube_apiserver);
    apiserver
        .args(apiserver_args(dir, ports, node_ip, pki))
        .current_dir(dir);
    let apiserver = spawn(dir, "kube-apiserver", apiserver)?;
    wait_ready(&apiserver, Duration::from_secs(180), "ready", || {
        kubectl(node, &pki.admin.kubeconfig)
            .args(["get", "--raw", "/readyz"])
            .output()
            .is_ok_and(|o| o.status.success())
    })?;
    started.push(apiserver);

    let mut cm = Command::new(&node.controller_manager);
    cm.args(controller_manager_args(pki)).current_dir(dir);
    started.push(spawn(dir, "kube-controller-manager", cm)?);
    let mut scheduler = Command::new(&node.scheduler);
    scheduler.args(scheduler_args(pki)).current_dir(dir);
    started.push(spawn(dir, "kube-scheduler", scheduler)?);
    Ok(started)
}

/// `kubectl --kubeconfig <kubeconfig>`, quiet about its cache (it lives in the home directory
/// otherwise).
pub fn kubectl(node: &NodeBinaries, kubeconfig: &Path) -> Command {
    let mut command = Command::new(&node.kubectl);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(
            kubeconfig
                .parent()
                .unwrap_or(Path::new("."))
                .join(".kube-cache"),
        );
    command
}

/// Run kubectl with `args` (and `stdin` when given), failing with its output.
pub fn kubectl_run(
    node: &NodeBinaries,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<String> {
    use std::io::Write as _;
    let mut command = kubectl(node, kubeconfig);
    command
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command
        .spawn()
        .with_context(|| format!("running kubectl {}", args.join(" ")))?;
    if let Some(text) = stdin
        && let Some(mut input) = child.stdin.take()
    {
        input
            .write_all(text.as_bytes())
            .context("writing kubectl's input")?;
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().context("waiting for kubectl")?;
    if !output.status.success() {
        anyhow::bail!(
            "kubectl {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Whether `url` (plain HTTP on loopback) answers 200.
fn http_ok(url: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(mut stream) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream
        .write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
}
