//! Finding the programs tests drive: HAProxy, wrk, iperf3, nft, nginx, `ip`, etcd, PostgreSQL
//! and the CNI plugins, where Debian installs them.
//!
//! `cargo test` often runs with a PATH that lacks `/usr/sbin` (where Debian puts `haproxy`,
//! `nft` and `nginx`), PostgreSQL's server programs live in `/usr/lib/postgresql/<major>/bin`
//! (never on PATH), and the CNI plugins live in `/usr/lib/cni` or `/opt/cni/bin`. CNI plugins
//! are never looked up on PATH: `bridge` on PATH is iproute2's bridge command, not the plugin.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Unavailable;

/// Every Debian package the workspace's tests need (this crate's services and tools, and the
/// browser and terminal the dashboard tests drive); `cargo xtask test` installs them when root.
pub const DEBIAN_PACKAGES: &[&str] = &[
    "postgresql",
    "etcd-server",
    "haproxy",
    "wrk",
    "iperf3",
    "nftables",
    "nginx-light",
    "containernetworking-plugins",
    "iproute2",
    "mariadb-server",
    "rabbitmq-server",
    "python3-venv",
    "openssl",
    "tmux",
    "chromium",
    "chromium-driver",
    // `ping`, which `cargo xtask demo` (and its test) runs between two pods
    "iputils-ping",
    // `cargo xtask images` (and its test): podman with runc, busybox for nimbess-agent's image
    "podman",
    "runc",
    "busybox-static",
];

/// Directories searched after PATH, because a test's PATH often lacks the sbin directories.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Where CNI plugins are installed: Debian's containernetworking-plugins, then the upstream
/// default. Directories in the `CNI_PATH` environment variable come first.
const CNI_DIRS: &[&str] = &["/usr/lib/cni", "/opt/cni/bin"];

/// Where Debian's postgresql packages put each major version's server programs.
const POSTGRESQL_ROOT: &str = "/usr/lib/postgresql";

/// A program that tests drive; [`tool`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// The HAProxy load balancer (`haproxy`).
    Haproxy,
    /// The wrk HTTP benchmarking tool (`wrk`).
    Wrk,
    /// The iperf3 network throughput tester (`iperf3`).
    Iperf3,
    /// The nftables command line (`nft`).
    Nft,
    /// The nginx web server (`nginx`).
    Nginx,
    /// iproute2's `ip` command (network namespaces, links, addresses).
    Ip,
    /// The CNI `bridge` plugin.
    CniBridge,
    /// The CNI `host-local` IPAM plugin.
    CniHostLocal,
    /// The etcd server (`etcd`).
    EtcdServer,
    /// The PostgreSQL server (`postgres`) of the highest installed major version.
    Postgres,
}

impl Tool {
    /// Every tool, in declaration order.
    pub const ALL: &'static [Tool] = &[
        Tool::Haproxy,
        Tool::Wrk,
        Tool::Iperf3,
        Tool::Nft,
        Tool::Nginx,
        Tool::Ip,
        Tool::CniBridge,
        Tool::CniHostLocal,
        Tool::EtcdServer,
        Tool::Postgres,
    ];

    /// The executable's file name.
    pub fn binary(self) -> &'static str {
        match self {
            Tool::Haproxy => "haproxy",
            Tool::Wrk => "wrk",
            Tool::Iperf3 => "iperf3",
            Tool::Nft => "nft",
            Tool::Nginx => "nginx",
            Tool::Ip => "ip",
            Tool::CniBridge => "bridge",
            Tool::CniHostLocal => "host-local",
            Tool::EtcdServer => "etcd",
            Tool::Postgres => "postgres",
        }
    }

    /// The Debian package that installs it.
    pub fn package(self) -> &'static str {
        match self {
            Tool::Haproxy => "haproxy",
            Tool::Wrk => "wrk",
            Tool::Iperf3 => "iperf3",
            Tool::Nft => "nftables",
            Tool::Nginx => "nginx-light",
            Tool::Ip => "iproute2",
            Tool::CniBridge | Tool::CniHostLocal => "containernetworking-plugins",
            Tool::EtcdServer => "etcd-server",
            Tool::Postgres => "postgresql",
        }
    }

    /// A human name, e.g. "HAProxy".
    fn title(self) -> &'static str {
        match self {
            Tool::Haproxy => "HAProxy",
            Tool::Wrk => "wrk",
            Tool::Iperf3 => "iperf3",
            Tool::Nft => "nftables",
            Tool::Nginx => "nginx",
            Tool::Ip => "iproute2",
            Tool::CniBridge => "CNI bridge plugin",
            Tool::CniHostLocal => "CNI host-local plugin",
            Tool::EtcdServer => "etcd",
            Tool::Postgres => "PostgreSQL",
        }
    }

    /// The directories searched for it, in order.
    fn search_dirs(self) -> Vec<PathBuf> {
        match self {
            Tool::CniBridge | Tool::CniHostLocal => {
                cni_dirs(std::env::var_os("CNI_PATH").as_deref())
            }
            Tool::Postgres => postgresql_bin_dirs(Path::new(POSTGRESQL_ROOT)),
            _ => path_then_system_dirs(std::env::var_os("PATH").as_deref()),
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.title(), self.binary())
    }
}

/// The path of `tool`'s executable, or why it is unavailable (naming the Debian package).
pub fn tool(tool: Tool) -> Result<PathBuf, Unavailable> {
    let dirs = tool.search_dirs();
    find_executable(tool.binary(), &dirs)
        .ok_or_else(|| Unavailable::not_installed(tool.to_string(), tool.package(), dirs))
}

/// The path of a program not in [`Tool`] (e.g. `etcdctl`, `tc`), looked up on PATH and in the
/// system directories, or why it is unavailable (naming `package`, the Debian package with it).
pub fn program(binary: &str, package: &'static str) -> Result<PathBuf, Unavailable> {
    let dirs = path_then_system_dirs(std::env::var_os("PATH").as_deref());
    find_executable(binary, &dirs).ok_or_else(|| Unavailable::not_installed(binary, package, dirs))
}

/// The first executable regular file called `name` in `dirs`.
pub(crate) fn find_executable(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// PATH's directories followed by the system directories not already in it.
fn path_then_system_dirs(path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = path
        .map(|p| {
            std::env::split_paths(p)
                .filter(|d| d.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    for dir in SYSTEM_DIRS {
        let dir = PathBuf::from(dir);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// `CNI_PATH`'s directories followed by Debian's and upstream's plugin directories.
fn cni_dirs(cni_path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = cni_path
        .map(|p| {
            std::env::split_paths(p)
                .filter(|d| d.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    for dir in CNI_DIRS {
        let dir = PathBuf::from(dir);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// `<root>/<major>/bin` for every installed major version, highest version first. When none is
/// installed, `<root>/*/bin` stands for the pattern in error messages.
pub(crate) fn postgresql_bin_dirs(root: &Path) -> Vec<PathBuf> {
    let mut versions: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = parse_version(&name)?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    if versions.is_empty() {
        return vec![root.join("*").join("bin")];
    }
    versions.into_iter().map(|(_, dir)| dir).collect()
}

/// "15" → [15], "9.6" → [9, 6]; anything else (e.g. "lib") → None.
fn parse_version(name: &str) -> Option<Vec<u64>> {
    name.split('.')
        .map(|part| part.parse::<u64>().ok())
        .collect()
}

#[cfg(test)]
mod tests;
