//! The container runtime: Debian's containerd (1.6.20) and runc (1.1.5), with their config,
//! root, state and socket in the cluster's directory.
//!
//! **Why Debian's containerd 1.6 and not containerd 2.x from the Go module proxy.** The
//! kubelet asks the runtime for its cgroup driver through the CRI `RuntimeConfig` call, which
//! containerd 1.x lacks (KEP-4033). Kubernetes planned to drop the fallback in 1.36, then 1.37;
//! it was deferred to 1.38, and v1.37.2's kubelet still falls back to its own `cgroupDriver`
//! when the call is unimplemented (`getCgroupDriverFromCRI` in
//! `k8s.io/kubernetes@v1.37.2/cmd/kubelet/app/server.go` logs "CRI implementation should be
//! updated to support RuntimeConfig. Falling back to using cgroupDriver from kubelet config."
//! and goes on). containerd 1.6 speaks CRI v1, which is all this kubelet needs, and comes as a
//! package (no build, and runc's cgo build would need libseccomp's headers); so the pin is
//! Debian's until the kubelet moves to 1.38, when containerd 2.x must be built from
//! `github.com/containerd/containerd/v2` instead. The kubelet's config says
//! `cgroupDriver: cgroupfs` to match runc's default here (`SystemdCgroup = false`; this machine
//! has no systemd).
//!
//! **OOM scores.** The kubelet asks for a negative `oom_score_adj` for every sandbox (-998) and
//! Guaranteed pod (-997); lowering a score takes CAP_SYS_RESOURCE, which root on this machine's
//! VM does not have (`CapEff` lacks bit 24, and `echo -1 > /proc/self/oom_score_adj` is
//! refused), and runc then fails every sandbox with "can't get final child's PID from pipe:
//! EOF" (its debug log: "failed to update /proc/self/oom_score_adj: Permission denied"). So
//! the CRI plugin runs with `restrict_oom_score_adj`: no container gets a score below
//! containerd's own.
//!
//! containerd 1.6's CNI library reads results up to CNI 1.0.0, so the conflist says 1.0.0
//! (nimbess-cni answers in the version asked), and its CRI plugin brings every sandbox's
//! loopback up through the `loopback` plugin, taken from Debian's
//! `containernetworking-plugins`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use super::config::{cni_bin_dir, cni_conf_dir, containerd_dir, containerd_socket, pause_image};
use super::process::{Started, spawn, wait_ready};

/// Debian's containerd.
pub const CONTAINERD: &str = "/usr/bin/containerd";

/// Debian's ctr, containerd's client (image import).
pub const CTR: &str = "/usr/bin/ctr";

/// Debian's runc.
pub const RUNC: &str = "/usr/sbin/runc";

/// Debian's CNI loopback plugin (`containernetworking-plugins`).
pub const LOOPBACK_PLUGIN: &str = "/usr/lib/cni/loopback";

/// The containerd namespace the CRI plugin keeps Kubernetes' images and containers in.
pub const K8S_NAMESPACE: &str = "k8s.io";

/// containerd's config (version 2, the 1.6 schema) for the cluster in `dir`.
pub fn containerd_config(dir: &Path) -> String {
    let base = containerd_dir(dir);
    let p = |sub: &str| base.join(sub).display().to_string();
    format!(
        r#"# Written by `cargo xtask cluster up` (xtask/src/cluster/runtime.rs).
version = 2
root = "{root}"
state = "{state}"
# Snapshotters this cluster never uses (overlayfs serves it); tracing has no collector.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The pods' network namespaces are mounted under the state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  # No container's OOM score below containerd's own: root here may lack CAP_SYS_RESOURCE.
  restrict_oom_score_adj = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{runc_root}"
        SystemdCgroup = false
"#,
        root = p("root"),
        state = p("state"),
        socket = containerd_socket(dir).display(),
        opt = p("opt"),
        pause = pause_image(),
        cni_bin = cni_bin_dir(dir).display(),
        cni_conf = cni_conf_dir(dir).display(),
        runc = RUNC,
        runc_root = p("runc"),
    )
}

/// Check Debian's runtime packages are installed, naming the missing ones.
pub fn check_installed() -> anyhow::Result<()> {
    let missing: Vec<&str> = [
        (CONTAINERD, "containerd"),
        (CTR, "containerd"),
        (RUNC, "runc"),
        (LOOPBACK_PLUGIN, "containernetworking-plugins"),
    ]
    .iter()
    .filter(|(path, _)| !Path::new(path).is_file())
    .map(|(_, package)| *package)
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut packages = missing.clone();
    packages.dedup();
    anyhow::bail!(
        "the container runtime is not installed (Debian: apt-get install {})",
        packages.join(" ")
    )
}

/// Write containerd's config and start it; returns once its socket answers `ctr version`.
pub fn start(dir: &Path) -> anyhow::Result<Started> {
    let base = containerd_dir(dir);
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let config = base.join("config.toml");
    std::fs::write(&config, containerd_config(dir))
        .with_context(|| format!("writing {}", config.display()))?;
    let mut command = Command::new(CONTAINERD);
    // The CNI plugin inherits containerd's environment: a KUBECONFIG of the caller's (another
    // cluster's) must not reach nimbess-cni, which reads pods through it when set.
    command
        .arg("--config")
        .arg(&config)
        .env_remove("KUBECONFIG")
        .current_dir(dir);
    let started = spawn(dir, "containerd", command)?;
    wait_ready(&started, Duration::from_secs(60), "serving", || {
        ctr(dir)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    })?;
    Ok(started)
}

/// `ctr` on this cluster's containerd, in Kubernetes' namespace.
pub fn ctr(dir: &Path) -> Command {
    let mut command = Command::new(CTR);
    command
        .arg("--address")
        .arg(containerd_socket(dir))
        .args(["--namespace", K8S_NAMESPACE]);
    command
}
