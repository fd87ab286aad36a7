//! Nephrite as the node's network: nimbess-agent (`--kube`, kernel driver) as a host process,
//! and nimbess-cni as the only CNI network containerd reads, from the cluster's directory.
//!
//! The agent runs as its DaemonSet would (`nimbess-agent/deploy/daemonset.yaml`): the same
//! `serve --kube` with one L2 network for the pods, authorised by the same ClusterRole, which
//! is applied from that manifest and bound to the agent's client-certificate user here (the
//! manifest binds it to a ServiceAccount, for the pod). Its socket and state are in
//! `DIR/nimbess`; the conflist and the plugins are in `DIR/cni`.
//!
//! More networks can be given to `up` ([`Network`]): the agent serves them too, and a pod
//! asks for interfaces on them with `k8s.v1.cni.cncf.io/networks` once kuryr-l7's VIF handler
//! runs (`cargo xtask demo --kubernetes` does). So that nimbess-cni can read a pod's VIF
//! record, the conflist names the kubelet's kubeconfig: the Node authorizer lets the node read
//! exactly the pods bound to it. A pod without the annotation is plugged at once, as before.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use super::config::{
    NODE_NAME, POD_NETWORK, POD_SUBNET, SERVICE_CIDR, agent_socket, cni_bin_dir, cni_conf_dir,
};
use super::control_plane::kubectl_run;
use super::pki::Pki;
use super::process::{Started, spawn, wait_ready};
use super::runtime::LOOPBACK_PLUGIN;
use crate::kube::NodeBinaries;

/// The manifest whose ClusterRole the agent is given.
const AGENT_MANIFEST: &str = "nimbess-agent/deploy/daemonset.yaml";

/// A network the agent serves beside the pods' own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Its name (what a NetworkAttachmentDefinition's nimbess-cni configuration names).
    pub name: String,
    /// Its IPv4 subnet, e.g. `10.60.0.0/24`.
    pub subnet: String,
}

/// The agent's config: the kernel driver, the pods' network and `extra` networks.
pub fn agent_config(extra: &[Network]) -> String {
    let mut config = format!(
        "# Written by `cargo xtask cluster up` (xtask/src/cluster/network.rs).\n\
         driver: kernel\n\
         networks:\n  \
           - name: {POD_NETWORK}\n    \
             subnet: {POD_SUBNET}\n"
    );
    for network in extra {
        config.push_str(&format!(
            "  - name: {}\n    subnet: {}\n",
            network.name, network.subnet
        ));
    }
    config
}

/// The conflist containerd reads: the pods' network through nimbess-cni (CNI 1.0.0, which
/// containerd 1.6 reads; 1.1.0 for a runtime that knows it), reading pods with `kubeconfig`.
pub fn conflist(agent_socket: &Path, kubeconfig: &Path) -> String {
    let list = serde_json::json!({
        "cniVersion": "1.0.0",
        "cniVersions": ["1.0.0", "1.1.0"],
        "name": POD_NETWORK,
        "plugins": [{
            "type": "nimbess-cni",
            "agentSocket": agent_socket,
            "kubeconfig": kubeconfig,
        }],
    });
    format!("{list:#}\n")
}

/// The documents of `manifest` (multi-document YAML) whose `kind` is `kind`, joined again.
pub fn documents_of_kind(manifest: &str, kind: &str) -> String {
    let wanted = format!("kind: {kind}");
    manifest
        .split("\n---")
        .filter(|doc| doc.lines().any(|line| line.trim_end() == wanted))
        .collect::<Vec<_>>()
        .join("\n---")
}

/// Build nimbess-agent and nimbess-cni (the workspace's dev profile, in its target directory:
/// a separate one would cost another ~2.5 GB of disk for two binaries); their paths. A build
/// that fails is tried once more, since another cargo sharing the directory can race it. Under
/// [`super::config::PREBUILT_ENV`] the built binaries are taken as they are.
pub fn build_binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = crate::workspace_root();
    let build = || {
        crate::cargo_command()
            .args([
                "build",
                "-p",
                "nephrite-nimbess-agent",
                "-p",
                "nephrite-nimbess-cni",
            ])
            .current_dir(&root)
            .status()
            .context("running cargo build for nimbess-agent")
    };
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    };
    let debug = target.join("debug");
    let built = (debug.join("nimbess-agent"), debug.join("nimbess-cni"));
    if super::config::prebuilt() && built.0.is_file() && built.1.is_file() {
        return Ok(built);
    }
    let mut status = build()?;
    if !status.success() {
        eprintln!("xtask: building nimbess-agent failed ({status}); trying once more");
        status = build()?;
    }
    crate::ensure_success(
        "cargo build -p nephrite-nimbess-agent -p nephrite-nimbess-cni",
        status,
    )?;
    Ok(built)
}

/// Grant the agent its ClusterRole, install the plugins and the conflist, start the agent
/// serving the pods' network and `extra`, and wait for its socket.
pub fn start(
    dir: &Path,
    node: &NodeBinaries,
    pki: &Pki,
    (agent, cni): (&Path, &Path),
    extra: &[Network],
) -> anyhow::Result<Started> {
    let manifest_path = crate::workspace_root().join(AGENT_MANIFEST);
    let manifest = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let role = documents_of_kind(&manifest, "ClusterRole");
    anyhow::ensure!(
        !role.trim().is_empty(),
        "{} holds no ClusterRole",
        manifest_path.display()
    );
    let admin = &pki.admin.kubeconfig;
    kubectl_run(node, admin, &["apply", "-f", "-"], Some(&role))?;
    kubectl_run(
        node,
        admin,
        &[
            "create",
            "clusterrolebinding",
            "nimbess-agent-host",
            "--clusterrole=nimbess-agent",
            &format!("--user={}", pki.nimbess_agent.user),
        ],
        None,
    )?;

    let bin = cni_bin_dir(dir);
    let conf = cni_conf_dir(dir);
    let state = dir.join("nimbess");
    for d in [&bin, &conf, &state] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    std::fs::copy(cni, bin.join("nimbess-cni"))
        .with_context(|| format!("copying {} into {}", cni.display(), bin.display()))?;
    std::os::unix::fs::symlink(LOOPBACK_PLUGIN, bin.join("loopback"))
        .with_context(|| format!("linking {LOOPBACK_PLUGIN} into {}", bin.display()))?;
    let socket = agent_socket(dir);
    let config = state.join("agent.yaml");
    std::fs::write(&config, agent_config(extra))
        .with_context(|| format!("writing {}", config.display()))?;
    std::fs::write(
        conf.join("10-nimbess.conflist"),
        conflist(&socket, &pki.kubelet.kubeconfig),
    )
    .with_context(|| format!("writing the conflist in {}", conf.display()))?;

    let mut command = Command::new(agent);
    command
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(state.join("state"))
        .args(["--driver", "kernel", "--kube", "--log-format", "text"])
        .args(["--service-cidr", SERVICE_CIDR, "--host-name", NODE_NAME])
        .env("KUBECONFIG", &pki.nimbess_agent.kubeconfig)
        .current_dir(dir);
    let started = spawn(dir, "nimbess-agent", command)?;
    wait_ready(&started, Duration::from_secs(60), "serving", || {
        socket.exists()
    })?;
    Ok(started)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Network, agent_config, conflist, documents_of_kind};

    #[test]
    fn only_the_documents_of_the_kind_asked_are_kept() {
        let manifest = "kind: ServiceAccount\nmetadata: {name: a}\n---\n# rules\nkind: ClusterRole\nmetadata: {name: b}\n---\nkind: ClusterRoleBinding\n";
        let role = documents_of_kind(manifest, "ClusterRole");
        assert!(role.contains("name: b"), "{role}");
        assert!(
            !role.contains("name: a") && !role.contains("Binding"),
            "{role}"
        );
    }

    #[test]
    fn the_conflist_names_the_network_the_agent_socket_and_the_kubeconfig() {
        let text = conflist(
            Path::new("/d/nimbess/agent.sock"),
            Path::new("/d/pki/kubelet.kubeconfig"),
        );
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["name"], "cluster-pods");
        assert_eq!(value["cniVersion"], "1.0.0");
        assert_eq!(value["plugins"][0]["type"], "nimbess-cni");
        assert_eq!(value["plugins"][0]["agentSocket"], "/d/nimbess/agent.sock");
        assert_eq!(
            value["plugins"][0]["kubeconfig"],
            "/d/pki/kubelet.kubeconfig"
        );
    }

    #[test]
    fn the_agent_serves_the_pods_network_first_then_the_extra_ones() {
        let text = agent_config(&[Network {
            name: "n4".to_owned(),
            subnet: "10.61.0.0/24".to_owned(),
        }]);
        let pods = text.find("name: cluster-pods").unwrap();
        let n4 = text.find("name: n4\n    subnet: 10.61.0.0/24").unwrap();
        assert!(pods < n4, "{text}");
        assert!(text.contains("driver: kernel"), "{text}");
    }
}
