//! kuryr-l7 as the cluster's ingress, as host processes (the README's choice): the controller
//! (`--source kube`, the embedded driver) reads Ingresses, Services and EndpointSlices with the
//! admin kubeconfig and serves the rules on loopback; the router follows it and proxies to the
//! pods' addresses, which the host reaches through nimbess-agent's routes. Both are the
//! workspace's dev build of `kuryr-l7`, stopped when [`KuryrL7`] drops.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::Context;

use crate::cluster::{Cluster, workspace_root};

/// The controller and the router, running.
#[derive(Debug)]
pub struct KuryrL7 {
    children: Vec<Child>,
    /// The router's HTTP address.
    pub router: SocketAddr,
    /// Where their logs are.
    pub logs: PathBuf,
}

/// The target directory cargo builds into (`CARGO_TARGET_DIR`, else `target/`).
fn target_dir() -> PathBuf {
    let root = workspace_root();
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

fn free_port() -> anyhow::Result<SocketAddr> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .context("no free port on loopback")
}

impl KuryrL7 {
    /// Build `kuryr-l7` when needed and start the controller and the router, logging into
    /// the cluster's `logs/`.
    pub fn start(cluster: &Cluster) -> anyhow::Result<KuryrL7> {
        let binary = target_dir().join("debug").join("kuryr-l7");
        if !(crate::cluster::prebuilt() && binary.is_file()) {
            build()?;
        }
        let logs = cluster.dir().join("logs");
        let rules = free_port()?;
        let router = free_port()?;
        let log = |name: &str| -> anyhow::Result<Stdio> {
            let path = logs.join(format!("{name}.log"));
            Ok(std::fs::File::create(&path)
                .with_context(|| format!("creating {}", path.display()))?
                .into())
        };
        let mut kuryr = KuryrL7 {
            children: Vec::new(),
            router,
            logs: logs.clone(),
        };
        kuryr.children.push(
            Command::new(&binary)
                .args(["controller", "--source", "kube", "--driver", "embedded"])
                .args(["--lease-namespace", "default", "--listen"])
                .arg(rules.to_string())
                .env("KUBECONFIG", cluster.dir().join("kubeconfig"))
                .stdout(log("kuryr-l7-controller")?)
                .stderr(log("kuryr-l7-controller.err")?)
                .spawn()
                .with_context(|| format!("starting {} controller", binary.display()))?,
        );
        kuryr.children.push(
            Command::new(&binary)
                .args(["router", "--listen"])
                .arg(router.to_string())
                .arg("--rules")
                .arg(format!("http://{rules}"))
                .stdout(log("kuryr-l7-router")?)
                .stderr(log("kuryr-l7-router.err")?)
                .spawn()
                .with_context(|| format!("starting {} router", binary.display()))?,
        );
        Ok(kuryr)
    }
}

impl Drop for KuryrL7 {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `cargo build` of `kuryr-l7` (the dev profile, as the workspace's tests use it).
fn build() -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--package",
            "nephrite-kuryr-l7",
            "--bin",
            "kuryr-l7",
        ])
        .current_dir(workspace_root())
        .status()
        .context("running cargo build -p nephrite-kuryr-l7")?;
    anyhow::ensure!(
        status.success(),
        "cargo build -p nephrite-kuryr-l7 failed ({status})"
    );
    Ok(())
}
