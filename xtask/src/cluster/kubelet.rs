//! The kubelet: its KubeletConfiguration (pure, from where things are) and its start.
//!
//! What this machine asks of it:
//!
//! - **cgroup v1.** Since Kubernetes 1.35 the kubelet refuses to start on cgroup v1 unless told
//!   `failCgroupV1: false`; this machine mounts the v1 hierarchies (`/sys/fs/cgroup/cpu`,
//!   `memory`, …, with only `/sys/fs/cgroup/unified` on v2), so the config says so.
//!   `cgroupDriver: cgroupfs` (no systemd here, and containerd 1.6 cannot report its driver:
//!   see [`super::runtime`]).
//! - **No swap complaint.** `failSwapOn: false`: the kubelet does not refuse a host with swap.
//! - **A full disk.** The machine's disk runs above the kubelet's default image-GC (85 %) and
//!   eviction (`imagefs.available` < 15 %) thresholds, which would delete the images imported
//!   without a registry and taint the node `disk-pressure`; the thresholds are set so neither
//!   happens before the disk is really full.
//! - **Everything in the directory.** Root dir, pod logs, volume plugins and its serving
//!   certificate (self-signed by the kubelet) live under `DIR/kubelet`; it listens on a free
//!   port, no read-only port, healthz on loopback. The API server reaches it with its client
//!   certificate (x509 against the cluster CA; anonymous off).

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use anyhow::Context;

use super::config::{NODE_NAME, containerd_socket};
use super::pki::Pki;
use super::process::{Started, spawn};
use crate::kube::NodeBinaries;

/// The ports the kubelet listens on.
#[derive(Debug, Clone, Copy)]
pub struct KubeletPorts {
    /// The kubelet API (logs, exec), on every address.
    pub api: u16,
    /// healthz, on loopback.
    pub healthz: u16,
}

/// The KubeletConfiguration for the cluster in `dir` (JSON, which the kubelet reads as YAML).
pub fn kubelet_config(dir: &Path, ports: KubeletPorts, pki: &Pki) -> String {
    let kubelet = dir.join("kubelet");
    let config = serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": false,
        "containerRuntimeEndpoint": format!("unix://{}", containerd_socket(dir).display()),
        "address": "0.0.0.0",
        "port": ports.api,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports.healthz,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": false},
            "x509": {"clientCAFile": pki.ca_cert},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "podLogsDir": dir.join("pod-logs"),
        "volumePluginDir": kubelet.join("volume-plugins"),
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
            "imagefs.inodesFree": "1%",
        },
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "rotateCertificates": false,
        "serverTLSBootstrap": false,
        "shutdownGracePeriod": "0s",
        "maxPods": 110,
    });
    format!("{config:#}\n")
}

/// The kubelet's arguments.
pub fn kubelet_args(dir: &Path, node_ip: Ipv4Addr, pki: &Pki) -> Vec<String> {
    let kubelet = dir.join("kubelet");
    vec![
        format!("--config={}", kubelet.join("config.yaml").display()),
        format!("--kubeconfig={}", pki.kubelet.kubeconfig.display()),
        format!("--root-dir={}", kubelet.join("root").display()),
        format!("--cert-dir={}", kubelet.join("pki").display()),
        format!("--hostname-override={NODE_NAME}"),
        format!("--node-ip={node_ip}"),
    ]
}

/// Write the kubelet's config and start it.
pub fn start(
    dir: &Path,
    node: &NodeBinaries,
    ports: KubeletPorts,
    node_ip: Ipv4Addr,
    pki: &Pki,
) -> anyhow::Result<Started> {
    let kubelet = dir.join("kubelet");
    for sub in ["root", "pki", "volume-plugins"] {
        let d = kubelet.join(sub);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    let pod_logs = dir.join("pod-logs");
    std::fs::create_dir_all(&pod_logs)
        .with_context(|| format!("creating {}", pod_logs.display()))?;
    let config = kubelet.join("config.yaml");
    std::fs::write(&config, kubelet_config(dir, ports, pki))
        .with_context(|| format!("writing {}", config.display()))?;
    let mut command = Command::new(&node.kubelet);
    command
        .args(kubelet_args(dir, node_ip, pki))
        .current_dir(dir);
    spawn(dir, "kubelet", command)
}
