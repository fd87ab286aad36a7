//! Nephrite as the node's network: nimbess-agent (`--kube`, kernel driver) as a host process,
//! and nimbess-cni as the only CNI network containerd reads, from the cluster's directory.
//!
//! The agent runs as its DaemonSet would (`nimbess-agent/deploy/daemonset.yaml`): the same
//! `serve --kube` with one L2 network for the pods, authorised by the same ClusterRole, which
//! is applied from that manifest and bound to the agent's client-certificate user here (the
//! manifest binds it to a ServiceAccount, for the pod). Its socket and state are in
//! `DIR/nimbess`; the conflist and the plugins are in `DIR/cni`.

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

/// The agent's config: the kernel driver and the pods' network.
pub fn agent_config() -> String {
    format!(
        "# Written by `cargo xtask cluster up` (xtask/src/cluster/network.rs).\n\
         driver: kernel\n\
         networks:\n  \
           - name: {POD_NETWORK}\n    \
             subnet: {POD_SUBNET}\n"
    )
}

/// The conflist containerd reads: the pods' network through nimbess-cni (CNI 1.0.0, which
/// containerd 1.6 reads; 1.1.0 for a runtime that knows it).
pub fn conflist(agent_socket: &Path) -> String {
    let list = serde_json::json!({
        "cniVersion": "1.0.0",
        "cniVersions": ["1.0.0", "1.1.0"],
        "name": POD_NETWORK,
        "plugins": [{"type": "nimbess-cni", "agentSocket": agent_socket}],
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
/// that fails is tried once more, since another cargo sharing the directory can race it.
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
    let mut status = build()?;
    if !status.success() {
        eprintln!("xtask: building nimbess-agent failed ({status}); trying once more");
        status = build()?;
    }
    crate::ensure_success(
        "cargo build -p nephrite-nimbess-agent -p nephrite-nimbess-cni",
        status,
    )?;
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    };
    let debug = target.join("debug");
    Ok((debug.join("nimbess-agent"), debug.join("nimbess-cni")))
}

/// Grant the agent its ClusterRole, install the plugins and the conflist, start the agent, and
/// wait for its socket.
pub fn start(
    dir: &Path,
    node: &NodeBinaries,
    pki: &Pki,
    agent: &Path,
    cni: &Path,
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
    std::fs::write(&config, agent_config())
        .with_context(|| format!("writing {}", config.display()))?;
    std::fs::write(conf.join("10-nimbess.conflist"), conflist(&socket))
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

    use super::{conflist, documents_of_kind};

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
    fn the_conflist_names_the_network_and_the_agent_socket() {
        let text = conflist(Path::new("/d/nimbess/agent.sock"));
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["name"], "cluster-pods");
        assert_eq!(value["cniVersion"], "1.0.0");
        assert_eq!(value["plugins"][0]["type"], "nimbess-cni");
        assert_eq!(value["plugins"][0]["agentSocket"], "/d/nimbess/agent.sock");
    }
}
