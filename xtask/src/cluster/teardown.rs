//! `down`: everything `up` made, removed, in the reverse order of its making.
//!
//! 1. The pods, through the API while the node still runs: controllers first (so nothing
//!    recreates them), then the pods themselves, and a wait until nimbess-agent holds no port,
//!    so every sandbox was stopped through CNI DEL (veth, address, FIB entries gone) rather
//!    than torn away.
//! 2. The processes from their pid files, the kubelet and the agent before containerd, the
//!    control plane last; then any process still naming the directory (containerd's shims)
//!    and any still in the pods' cgroups.
//! 3. Mounts under the directory (overlay root file systems, sandbox `/dev/shm`, the pods'
//!    network namespaces, the kubelet's volume tmpfs), deepest first.
//! 4. The pods' cgroups (`kubepods` in every v1 hierarchy and the unified one).
//! 5. What the agent leaves in the host's network namespace: its pod network's bridge (the
//!    link holding the gateway address) with the FIB-miss veth pair on it, and its nftables
//!    tables.
//! 6. The host directories the kubelet and containerd make at fixed paths whatever they are
//!    told (`/var/lib/kubelet/device-plugins`, containerd 1.6's shim sockets in
//!    `/run/containerd/s`), when `up` found them absent ([`HOST_DIRS`], recorded in
//!    `DIR/run/host-dirs`).
//! 7. The directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::config::{POD_SUBNET, admin_kubeconfig, agent_socket};
use super::control_plane::kubectl;
use super::process::{processes_naming, stop, terminate};
use crate::kube::NodeBinaries;

/// The processes in the order they are stopped.
pub const STOP_ORDER: &[&str] = &[
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "nimbess-agent",
    "containerd",
    "kube-apiserver",
    "etcd",
];

/// Directories outside the cluster's own that its kubelet or containerd create at fixed paths.
pub const HOST_DIRS: &[&str] = &["/var/lib/kubelet", "/run/containerd"];

/// The file in `DIR/run` listing the [`HOST_DIRS`] that did not exist before `up`.
pub const HOST_DIRS_FILE: &str = "host-dirs";

/// Record which of [`HOST_DIRS`] do not exist yet, so `down` removes only those.
pub fn record_host_dirs(dir: &Path) -> std::io::Result<()> {
    let absent: Vec<&str> = HOST_DIRS
        .iter()
        .copied()
        .filter(|d| !Path::new(d).exists())
        .collect();
    let run = dir.join("run");
    std::fs::create_dir_all(&run)?;
    std::fs::write(run.join(HOST_DIRS_FILE), absent.join("\n"))
}

/// The nftables tables (family ip) nimbess-agent renders in the host's namespace.
const AGENT_TABLES: &[&str] = &["nimbess", "nimbess-svc", "nimbess-policy"];

/// The link in `DIR/run` to the nimbess-agent binary `up` started (`down` asks it for the
/// agent's ports).
pub const AGENT_LINK: &str = "nimbess-agent.bin";

/// How long the pods may take to be torn down through CNI DEL.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// What `down` did.
#[derive(Debug, Default)]
pub struct Report {
    /// Processes stopped (name, pid).
    pub stopped: Vec<(String, u32)>,
    /// Other processes killed (pid).
    pub killed: Vec<u32>,
    /// Mount points unmounted.
    pub unmounted: Vec<PathBuf>,
    /// Links, tables and host directories removed.
    pub network: Vec<String>,
    /// Cgroups removed.
    pub cgroups: usize,
    /// What could not be done (each said, none stops the rest).
    pub warnings: Vec<String>,
}

/// Tear the cluster in `dir` down.
pub fn down(dir: &Path, node: &NodeBinaries) -> Report {
    let mut report = Report::default();
    drain(dir, node, &mut report);
    for name in STOP_ORDER {
        match stop(dir, name) {
            Ok(Some(pid)) => report.stopped.push(((*name).to_owned(), pid)),
            Ok(None) => {}
            Err(e) => report.warnings.push(format!("stopping {name}: {e:#}")),
        }
    }
    for pid in processes_naming(dir) {
        match terminate(pid, dir) {
            Ok(()) => report.killed.push(pid),
            Err(e) => report
                .warnings
                .push(format!("stopping process {pid}: {e:#}")),
        }
    }
    kill_pod_processes(&mut report);
    unmount_under(dir, &mut report);
    remove_pod_cgroups(&mut report);
    remove_agent_network(&gateways(dir), &mut report);
    let recorded =
        std::fs::read_to_string(dir.join("run").join(HOST_DIRS_FILE)).unwrap_or_default();
    for host_dir in recorded.lines().filter(|l| HOST_DIRS.contains(l)) {
        match std::fs::remove_dir_all(host_dir) {
            Ok(()) => report.network.push(format!("directory {host_dir}")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => report.warnings.push(format!("removing {host_dir}: {e}")),
        }
    }
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        report
            .warnings
            .push(format!("removing {}: {e}", dir.display()));
    }
    report
}

/// Delete the workloads and pods through the API and wait for the agent to hold no port.
fn drain(dir: &Path, node: &NodeBinaries, report: &mut Report) {
    let kubeconfig = admin_kubeconfig(dir);
    if !kubeconfig.is_file() || !node.kubectl.is_file() {
        return;
    }
    let run = |args: &[&str]| {
        kubectl(node, &kubeconfig)
            .args(["--request-timeout=20s"])
            .args(args)
            .output()
    };
    // Nothing answers: the control plane is already gone, the pods go with the processes.
    if !run(&["get", "--raw", "/readyz"]).is_ok_and(|o| o.status.success()) {
        return;
    }
    for args in [
        &[
            "delete",
            "deployments,replicasets,statefulsets,daemonsets,jobs,cronjobs",
            "--all",
            "--all-namespaces",
            "--wait=false",
        ][..],
        &[
            "delete",
            "pods",
            "--all",
            "--all-namespaces",
            "--grace-period=1",
            "--wait=false",
        ][..],
    ] {
        match run(args) {
            Ok(o) if o.status.success() => {}
            Ok(o) => report.warnings.push(format!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => report
                .warnings
                .push(format!("kubectl {}: {e}", args.join(" "))),
        }
    }
    let socket = agent_socket(dir);
    let agent = dir.join("run").join(AGENT_LINK);
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        let pods_left = run(&["get", "pods", "--all-namespaces", "-o", "name"])
            .map(|o| String::from_utf8_lossy(&o.stdout).lines().count())
            .unwrap_or(0);
        let ports_left = agent_ports(&agent, &socket);
        // An agent that cannot be asked holds nothing this wait could change.
        if pods_left == 0 && ports_left.unwrap_or(0) == 0 {
            return;
        }
        if Instant::now() >= deadline {
            report.warnings.push(format!(
                "after {DRAIN_TIMEOUT:?} {pods_left} pod(s) and {} agent port(s) were left; \
                 they are torn down with the processes",
                ports_left.map_or("an unknown number of".to_owned(), |n| n.to_string())
            ));
            return;
        }
        thread::sleep(Duration::from_millis(500));
    }
}

/// How many ports the agent at `socket` holds (None when it cannot be asked).
fn agent_ports(agent: &Path, socket: &Path) -> Option<usize> {
    if !socket.exists() || !agent.is_file() {
        return None;
    }
    let output = Command::new(agent)
        .args(["ports", "--socket"])
        .arg(socket)
        .args(["-o", "json"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    value.as_array().map(Vec::len)
}

/// The cgroup hierarchies' roots of this machine (v1 controllers and the unified one).
fn cgroup_roots() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    let mut roots: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.is_symlink())
        .collect();
    roots.push(PathBuf::from("/sys/fs/cgroup"));
    roots
}

/// Kill every process still in a `kubepods` cgroup (containers whose shim was stopped).
fn kill_pod_processes(report: &mut Report) {
    for root in cgroup_roots() {
        let kubepods = root.join("kubepods");
        for cgroup in walk_dirs(&kubepods) {
            let Ok(procs) = std::fs::read_to_string(cgroup.join("cgroup.procs")) else {
                continue;
            };
            for pid in procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
                super::process::signal(pid, "KILL");
                if !report.killed.contains(&pid) {
                    report.killed.push(pid);
                }
            }
        }
    }
}

/// Every directory under `root`, parents before children (`root` included when it exists).
fn walk_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        out.push(dir);
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    out
}

/// Remove the `kubepods` cgroups, children first (a cgroup with processes cannot go: said).
fn remove_pod_cgroups(report: &mut Report) {
    for root in cgroup_roots() {
        let mut dirs = walk_dirs(&root.join("kubepods"));
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            let mut removed = std::fs::remove_dir(&dir).is_ok();
            // A cgroup of killed processes empties a moment later.
            for _ in 0..20 {
                if removed || !dir.exists() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
                removed = std::fs::remove_dir(&dir).is_ok();
            }
            if removed {
                report.cgroups += 1;
            } else if dir.exists() {
                report
                    .warnings
                    .push(format!("cgroup {} could not be removed", dir.display()));
            }
        }
    }
}

/// The mount points under `dir`, from `/proc/self/mountinfo`, deepest first.
pub fn mounts_under(dir: &Path, mountinfo: &str) -> Vec<PathBuf> {
    let mut mounts: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(dir))
        .collect();
    mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    mounts.dedup();
    mounts
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_path(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Ok(value) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

/// Unmount everything mounted under `dir` (lazily when busy).
fn unmount_under(dir: &Path, report: &mut Report) {
    // A mount may hide others; a few passes take every layer.
    for _ in 0..5 {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts = mounts_under(dir, &mountinfo);
        if mounts.is_empty() {
            return;
        }
        for mount in mounts {
            let ok = Command::new("umount")
                .arg(&mount)
                .output()
                .is_ok_and(|o| o.status.success())
                || Command::new("umount")
                    .arg("--lazy")
                    .arg(&mount)
                    .output()
                    .is_ok_and(|o| o.status.success());
            if ok {
                report.unmounted.push(mount);
            } else {
                report
                    .warnings
                    .push(format!("could not unmount {}", mount.display()));
            }
        }
    }
}

/// Remove the pod network's bridge (the link holding the gateway of [`POD_SUBNET`]), the
/// veths still on it (the FIB-miss sink and its peer, any port left), and the agent's tables.
fn remove_agent_network(gateways: &[String], report: &mut Report) {
    let addresses = ip_json(&["-4", "addr", "show"]);
    let bridges: Vec<String> = addresses
        .as_array()
        .into_iter()
        .flatten()
        .filter(|link| {
            link["addr_info"].as_array().into_iter().flatten().any(|a| {
                a["local"]
                    .as_str()
                    .is_some_and(|l| gateways.iter().any(|g| g == l))
            })
        })
        .filter_map(|link| link["ifname"].as_str().map(str::to_owned))
        .collect();
    for bridge in bridges {
        let members = ip_json(&["link", "show", "master", &bridge]);
        for member in members.as_array().into_iter().flatten() {
            if let Some(name) = member["ifname"].as_str() {
                // Deleting one end of a veth pair deletes its peer.
                if delete_link(name) {
                    report.network.push(format!("link {name}"));
                }
            }
        }
        if delete_link(&bridge) {
            report.network.push(format!("bridge {bridge}"));
        }
    }
    for table in AGENT_TABLES {
        let deleted = Command::new("nft")
            .args(["delete", "table", "ip", table])
            .output()
            .is_ok_and(|o| o.status.success());
        if deleted {
            report.network.push(format!("nftables table ip {table}"));
        }
    }
}

/// The gateways of the networks the cluster's agent served: the pod network's, and those of
/// the networks `up` was given (each `subnet:` of the agent's config in `dir`), whose bridges
/// carry them.
fn gateways(dir: &Path) -> Vec<String> {
    let config =
        std::fs::read_to_string(dir.join("nimbess").join("agent.yaml")).unwrap_or_default();
    let mut gateways = vec![gateway(POD_SUBNET)];
    gateways.extend(config_subnets(&config).iter().map(|s| gateway(s)));
    gateways.sort();
    gateways.dedup();
    gateways.retain(|g| !g.is_empty());
    gateways
}

/// The `subnet:` values of an agent config as `network::agent_config` writes it.
fn config_subnets(config: &str) -> Vec<String> {
    config
        .lines()
        .filter_map(|line| line.trim().strip_prefix("subnet:"))
        .map(|subnet| subnet.trim().to_owned())
        .collect()
}

/// A subnet's gateway: its first host (empty when `subnet` is no IPv4 CIDR).
fn gateway(subnet: &str) -> String {
    let (net, _) = subnet.split_once('/').unwrap_or((subnet, ""));
    match net.parse::<std::net::Ipv4Addr>() {
        Ok(ip) => std::net::Ipv4Addr::from(u32::from(ip) + 1).to_string(),
        Err(_) => String::new(),
    }
}

fn ip_json(args: &[&str]) -> serde_json::Value {
    Command::new("ip")
        .arg("-j")
        .args(args)
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice(&o.stdout).ok())
        .unwrap_or(serde_json::Value::Null)
}

fn delete_link(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "delete", name])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::{config_subnets, gateway, mounts_under};

    #[test]
    fn mounts_under_the_directory_come_deepest_first_with_escapes_undone() {
        let mountinfo = "\
22 1 8:1 / / rw - ext4 /dev/vda rw
90 22 0:50 / /tmp/c/containerd/state/x/rootfs rw - overlay overlay rw
91 22 0:51 / /tmp/c/kubelet/root/pods/u/volumes/a\\040b rw - tmpfs tmpfs rw
92 90 0:52 / /tmp/c/containerd/state/x/rootfs/dev/shm rw - tmpfs shm rw
93 22 0:53 / /tmp/cc rw - tmpfs tmpfs rw
";
        assert_eq!(
            mounts_under(Path::new("/tmp/c"), mountinfo),
            [
                "/tmp/c/kubelet/root/pods/u/volumes/a b",
                "/tmp/c/containerd/state/x/rootfs/dev/shm",
                "/tmp/c/containerd/state/x/rootfs",
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn the_gateway_is_the_subnets_first_host() {
        assert_eq!(gateway(super::POD_SUBNET), "10.244.0.1");
        assert_eq!(gateway("10.61.0.0/24"), "10.61.0.1");
        assert_eq!(gateway("not a subnet"), "");
    }

    #[test]
    fn every_subnet_of_the_agent_config_is_found() {
        let config = super::super::network::agent_config(&[super::super::network::Network {
            name: "n4".to_owned(),
            subnet: "10.61.0.0/24".to_owned(),
        }]);
        assert_eq!(config_subnets(&config), ["10.244.0.0/24", "10.61.0.0/24"]);
    }
}
