//! The facts every component of the cluster agrees on, and where they are in the state
//! directory.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The Service IP range (kube-apiserver allocates from it; nimbess-agent serves it).
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// The pods' network: the CNI network name of the conflist and of the agent's config.
pub const POD_NETWORK: &str = "cluster-pods";

/// The pods' subnet (one node: the agent's IPAM hands out addresses from it).
pub const POD_SUBNET: &str = "10.244.0.0/24";

/// The node's name (its kubelet's identity is `system:node:<NODE_NAME>`).
pub const NODE_NAME: &str = "nephrite-node";

/// The variable naming the xtask binary the cluster tests run `cluster up` and `down` with
/// (else they `cargo run` it).
pub const XTASK_ENV: &str = "NEPHRITE_XTASK";

/// The variable that, set to `1`, has `cluster up` and the cluster tests take the workspace
/// binaries they run from `target/debug` when there, without `cargo build` (`cargo xtask test`
/// has just built them all, with the suite's feature set).
pub const PREBUILT_ENV: &str = "NEPHRITE_CLUSTER_PREBUILT";

/// Whether [`PREBUILT_ENV`] says to take the built binaries as they are.
pub fn prebuilt() -> bool {
    std::env::var_os(PREBUILT_ENV).is_some_and(|v| v == "1")
}

/// The images' tag: the workspace's version.
pub const IMAGE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The pause image, containerd's `sandbox_image` (the name containerd normalises to).
pub fn pause_image() -> String {
    format!("docker.io/nephrite/pause:{IMAGE_VERSION}")
}

/// The echo image, as a pod spec names it.
pub fn echo_image() -> String {
    format!("nephrite/echo:{IMAGE_VERSION}")
}

/// containerd's directory.
pub fn containerd_dir(dir: &Path) -> PathBuf {
    dir.join("containerd")
}

/// containerd's CRI socket.
pub fn containerd_socket(dir: &Path) -> PathBuf {
    containerd_dir(dir).join("containerd.sock")
}

/// The CNI plugins' directory containerd runs them from.
pub fn cni_bin_dir(dir: &Path) -> PathBuf {
    dir.join("cni").join("bin")
}

/// The CNI configuration directory containerd reads.
pub fn cni_conf_dir(dir: &Path) -> PathBuf {
    dir.join("cni").join("net.d")
}

/// nimbess-agent's socket.
pub fn agent_socket(dir: &Path) -> PathBuf {
    dir.join("nimbess").join("agent.sock")
}

/// The admin kubeconfig.
pub fn admin_kubeconfig(dir: &Path) -> PathBuf {
    dir.join("kubeconfig")
}

/// The address of this machine that the node registers and the API advertises: the source
/// address of the route a packet to the outside would take (a lookup only, nothing is sent).
pub fn node_ip() -> anyhow::Result<Ipv4Addr> {
    let output = std::process::Command::new("ip")
        .args(["-4", "-o", "route", "get", "198.51.100.1"])
        .output()
        .context("running `ip route get` (Debian: iproute2)")?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_route_source(&text).with_context(|| {
        format!(
            "no source address in `ip route get`: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// The `src` of one `ip -o route get` line.
pub fn parse_route_source(line: &str) -> Option<Ipv4Addr> {
    let mut words = line.split_whitespace();
    while let Some(word) = words.next() {
        if word == "src" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// A TCP port on `ip` that was free a moment ago.
pub fn free_port(ip: Ipv4Addr) -> anyhow::Result<SocketAddr> {
    TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .with_context(|| format!("no free TCP port on {ip}"))
}

#[cfg(test)]
mod tests {
    use super::parse_route_source;

    #[test]
    fn the_node_address_is_the_route_lookup_source() {
        let line = "198.51.100.1 via 10.0.0.1 dev eth0 src 10.0.0.7 uid 0 \\    cache ";
        assert_eq!(parse_route_source(line), Some("10.0.0.7".parse().unwrap()));
        assert_eq!(parse_route_source("unreachable 198.51.100.1"), None);
        assert_eq!(parse_route_source("x src nonsense"), None);
    }
}
