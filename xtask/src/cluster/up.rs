//! `up`: the one-node cluster, built where needed and started in order, each step waited for
//! before the next; the node Ready at the end.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::config::{NODE_NAME, admin_kubeconfig, free_port, node_ip};
use super::control_plane::{Ports, kubectl_run};
use super::kubelet::KubeletPorts;
use super::pki::Pki;
use super::process::{Started, log_tail};
use super::teardown::AGENT_LINK;
use super::{control_plane, images, kubelet, network, runtime};
use crate::kube::{NodeBinaries, SumMode, ensure_node};

/// How long the node may take to report Ready once the kubelet has started.
const NODE_READY_TIMEOUT: Duration = Duration::from_secs(180);

/// What `up` started.
#[derive(Debug)]
pub struct Up {
    /// The processes, in start order.
    pub started: Vec<Started>,
    /// The images imported into containerd.
    pub images: Vec<String>,
    /// The node's address.
    pub node_ip: Ipv4Addr,
    /// The API's URL.
    pub server: String,
    /// kubectl of the pinned release.
    pub kubectl: std::path::PathBuf,
    /// From the first process started to the node Ready.
    pub started_in: Duration,
}

/// The Debian packages `up` installs when missing: the container runtime (kubelet v1.37 still
/// takes containerd 1.6, see [`runtime`]), the CNI `loopback` plugin, podman and openssl for
/// the images and certificates, iproute2 and nftables for the node's network.
const PACKAGES: &[&str] = &[
    "containerd",
    "runc",
    "containernetworking-plugins",
    "podman",
    "openssl",
    "iproute2",
    "nftables",
];

/// Check what `up` needs of the machine before building anything, installing its packages.
fn preflight() -> anyhow::Result<()> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let root = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|uids| uids.split_whitespace().nth(1))
        == Some("0");
    anyhow::ensure!(
        root,
        "`cargo xtask cluster up` runs as root (it starts a kubelet, a container runtime and a CNI agent)"
    );
    crate::packages::install_missing(PACKAGES)?;
    runtime::check_installed()?;
    for (program, package) in [
        ("openssl", "openssl"),
        ("podman", "podman"),
        ("nft", "nftables"),
        ("ip", "iproute2"),
    ] {
        let found = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .any(|d| d.join(program).is_file());
        anyhow::ensure!(
            found,
            "`{program}` is not on PATH (Debian: apt-get install {package})"
        );
    }
    Ok(())
}

/// Build what is missing, then start the cluster with its state in `dir` (which must be empty
/// or absent), the agent serving `networks` beside the pods' own.
pub fn up(dir: &Path, networks: &[network::Network]) -> anyhow::Result<Up> {
    preflight()?;
    let (control, node) = ensure_node(SumMode::Verify)?;
    let (agent, cni) = network::build_binaries()?;
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_none();
        anyhow::ensure!(
            empty,
            "{} is not empty (a cluster there already? `cargo xtask cluster down --dir {}`)",
            dir.display(),
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    super::teardown::record_host_dirs(dir)
        .with_context(|| format!("writing {}/run", dir.display()))?;
    let began = Instant::now();
    let node_ip = node_ip()?;
    let loopback = Ipv4Addr::LOCALHOST;
    let ports = Ports {
        etcd_client: free_port(loopback)?,
        etcd_peer: free_port(loopback)?,
        apiserver: free_port(Ipv4Addr::UNSPECIFIED)?.port(),
    };
    let kubelet_ports = KubeletPorts {
        api: free_port(Ipv4Addr::UNSPECIFIED)?.port(),
        healthz: free_port(loopback)?.port(),
    };
    let server = format!("https://127.0.0.1:{}", ports.apiserver);
    let pki = Pki::create(dir, NODE_NAME, node_ip, &server, &admin_kubeconfig(dir))?;

    let mut started = control_plane::start(dir, &control, &node, &ports, node_ip, &pki)?;
    eprintln!(
        "xtask: control plane ready at {server} ({:.1}s)",
        began.elapsed().as_secs_f64()
    );
    started.push(runtime::start(dir)?);
    let images = images::import(dir)?;
    eprintln!(
        "xtask: images imported into containerd: {}",
        images.join(", ")
    );
    std::os::unix::fs::symlink(&agent, dir.join("run").join(AGENT_LINK))
        .with_context(|| format!("linking {} into {}/run", agent.display(), dir.display()))?;
    started.push(network::start(dir, &node, &pki, (&agent, &cni), networks)?);
    let kubelet = kubelet::start(dir, &node, kubelet_ports, node_ip, &pki)?;
    wait_node_ready(dir, &node, &kubelet)?;
    let echo = dir.join(super::echo::FILE);
    std::fs::write(&echo, super::echo::deployment(3))
        .with_context(|| format!("writing {}", echo.display()))?;
    started.push(kubelet);
    Ok(Up {
        started,
        images,
        node_ip,
        server,
        kubectl: node.kubectl.clone(),
        started_in: began.elapsed(),
    })
}

/// Wait until the node reports Ready, failing when the kubelet exits or after
/// [`NODE_READY_TIMEOUT`] with its condition and the kubelet's log.
fn wait_node_ready(dir: &Path, node: &NodeBinaries, kubelet: &Started) -> anyhow::Result<()> {
    let admin = admin_kubeconfig(dir);
    let jsonpath = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.conditions[?(@.type==\"Ready\")].message}";
    let mut last = String::new();
    let ready = super::process::wait_ready(kubelet, NODE_READY_TIMEOUT, "Ready", || {
        match kubectl_run(
            node,
            &admin,
            &["get", "node", NODE_NAME, "-o", jsonpath],
            None,
        ) {
            Ok(text) => {
                last = text;
                last.starts_with("True")
            }
            Err(e) => {
                last = format!("{e:#}");
                false
            }
        }
    });
    ready.with_context(|| {
        format!(
            "node {NODE_NAME}: {last}\ncontainerd's log:\n{}",
            log_tail(&dir.join("logs").join("containerd.log"), 15)
        )
    })
}
