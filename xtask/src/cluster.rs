//! `cargo xtask cluster up|down|test`: a real one-node Kubernetes on this machine, with
//! Nephrite as its network and nothing pulled from a registry, and the upstream network tests'
//! model on it (`test` runs `tests/cluster`, which starts and removes a cluster of its own).
//!
//! `up` runs, as root, etcd, kube-apiserver, kube-controller-manager and kube-scheduler (the
//! pinned release, built from the Go module proxy by [`crate::kube::ensure_node`]), Debian's
//! containerd and runc ([`runtime`] says why that containerd), a kubelet configured for this
//! machine's cgroup v1 ([`kubelet`]), nimbess-agent (`--kube`, kernel driver) with nimbess-cni as
//! the node's only CNI network ([`network`]), and imports the pause and echo images built here
//! ([`images`]). No kube-proxy: Services are nimbess-agent's. Every file, socket, log and pid
//! file is in the cluster's directory; `down` stops and removes everything `up` made
//! ([`teardown`]).
//!
//! One concern per module: [`config`] (shared facts and paths), [`pki`], [`control_plane`],
//! [`echo`] (the Deployment left for a first try), [`demo`] (`cargo xtask demo --kubernetes`),
//! [`runtime`], [`kubelet`], [`network`], [`images`], [`process`] (detached processes and their
//! pid files), [`mod@up`] and [`teardown`].

mod config;
mod control_plane;
pub mod demo;
mod echo;
mod images;
mod kubelet;
mod network;
mod pki;
mod process;
mod runtime;
mod teardown;
mod up;

use std::path::PathBuf;

use anyhow::{Context, bail};

use crate::state_dir::{StateDirs, dir_flag};
use nephrite_test_services::kube_apiserver::{KUBERNETES_VERSION, bin_dir, kube_root};

/// The usage of `cargo xtask cluster`.
pub const USAGE: &str = "usage: cargo xtask cluster up [--dir DIR]
       cargo xtask cluster down [--dir DIR]
       cargo xtask cluster test";

/// The crate of the tests on the cluster.
const TESTS: &str = "nephrite-cluster-tests";

/// Where `up` keeps the cluster's state, and `down` finds it.
const STATE: StateDirs = StateDirs {
    command: "cluster",
    record: "cluster-last-up",
};

/// Runs `cargo xtask cluster <args>`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (command, rest) = args
        .split_first()
        .with_context(|| format!("no cluster command given\n\n{USAGE}"))?;
    match command.as_str() {
        "up" => up(dir_flag(rest, USAGE)?),
        "down" => down(dir_flag(rest, USAGE)?),
        "test" if rest.is_empty() => test(Binaries::Build),
        "test" => bail!("unexpected arguments {rest:?}\n\n{USAGE}"),
        other => bail!("unknown cluster command `{other}`\n\n{USAGE}"),
    }
}

fn up(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let up_dir = STATE.up(dir)?;
    let dir = &up_dir.dir;
    eprintln!("xtask: cluster state in {}", dir.display());
    let down = up_dir.down_command();
    let up = up::up(dir, &[]).with_context(|| {
        format!(
            "the cluster did not come up; its logs are in {}/logs; remove what started with: {down}",
            dir.display()
        )
    })?;
    let kubeconfig = config::admin_kubeconfig(dir);
    eprintln!(
        "xtask: Kubernetes {KUBERNETES_VERSION}, node {} Ready at {} in {:.1}s (API {})",
        config::NODE_NAME,
        up.node_ip,
        up.started_in.as_secs_f64(),
        up.server,
    );
    for started in &up.started {
        eprintln!(
            "xtask:   {} pid {} log {}",
            started.name,
            started.pid,
            started.log.display()
        );
    }
    eprintln!(
        "xtask: pods get addresses from nimbess-agent on {} (network {}); Services are \
         nimbess-agent's (no kube-proxy)\n\
         xtask: images (use imagePullPolicy: Never): {}\n\
         xtask: export KUBECONFIG={}\n\
         xtask: kubectl of the same release: {}\n\
         xtask: try: {} --kubeconfig {} apply -f {}\n\
         xtask: stop it and remove everything with: {down}",
        config::POD_SUBNET,
        config::POD_NETWORK,
        up.images.join(", "),
        kubeconfig.display(),
        up.kubectl.display(),
        up.kubectl.display(),
        kubeconfig.display(),
        dir.join(echo::FILE).display(),
    );
    Ok(())
}

/// Whether the cluster's tests build the workspace binaries they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binaries {
    /// `cargo build` them first (`cargo xtask cluster test`).
    Build,
    /// Take those in `target/debug` as they are: `cargo xtask test` has just built every
    /// binary of the workspace, and building them again with another feature set would
    /// recompile them ([`config::PREBUILT_ENV`]).
    Prebuilt,
}

/// This xtask's binary. `cargo xtask test`'s own build replaces `target/debug/xtask` while this
/// one runs (the suite builds every workspace binary), and Linux then names the running file
/// `… (deleted)`; the rebuilt binary at the same path, from the same sources, serves.
fn this_xtask() -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe().context("finding this xtask's binary")?;
    if exe.exists() {
        return Ok(exe);
    }
    match exe.to_string_lossy().strip_suffix(" (deleted)") {
        Some(path) if std::path::Path::new(path).exists() => Ok(path.into()),
        _ => anyhow::bail!("this xtask's binary {} is gone", exe.display()),
    }
}

/// `cargo test -p nephrite-cluster-tests`: the tests bring up their own cluster with this
/// xtask's `cluster up` (in a temporary directory, building the node's binaries first when
/// missing) and remove it with `cluster down`. `cargo xtask test` runs it as root after the
/// rest of the suite (it owns the host's nimbess tables and a kubelet while it runs).
pub fn test(binaries: Binaries) -> anyhow::Result<()> {
    let began = std::time::Instant::now();
    let mut command = crate::cargo_command();
    command
        .args([
            "test",
            "--no-fail-fast",
            "--package",
            TESTS,
            "--",
            "--nocapture",
        ])
        .env(config::XTASK_ENV, this_xtask()?)
        .current_dir(crate::workspace_root());
    if binaries == Binaries::Prebuilt {
        command.env(config::PREBUILT_ENV, "1");
    }
    let status = command
        .status()
        .with_context(|| format!("running cargo test -p {TESTS}"))?;
    crate::ensure_success(&format!("cargo test -p {TESTS}"), status)?;
    eprintln!(
        "xtask: the cluster tests passed in {:.0}s",
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

fn down(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = STATE.down(dir)?;
    anyhow::ensure!(
        dir.join("run").is_dir() || !dir.exists(),
        "{} holds no cluster (no run/ directory of pid files); nothing removed",
        dir.display()
    );
    let node = crate::kube::NodeBinaries::under(&bin_dir(&kube_root()));
    let report = teardown::down(&dir, &node);
    STATE.forget(&dir);
    for (name, pid) in &report.stopped {
        eprintln!("xtask: stopped {name} (pid {pid})");
    }
    if !report.killed.is_empty() {
        eprintln!("xtask: killed left-over processes {:?}", report.killed);
    }
    eprintln!(
        "xtask: unmounted {} mount(s), removed {} cgroup(s){}",
        report.unmounted.len(),
        report.cgroups,
        if report.network.is_empty() {
            String::new()
        } else {
            format!(", {}", report.network.join(", "))
        }
    );
    for warning in &report.warnings {
        eprintln!("xtask: WARNING: {warning}");
    }
    eprintln!("xtask: removed {}", dir.display());
    if report.warnings.is_empty() {
        Ok(())
    } else {
        bail!(
            "{} thing(s) could not be removed (above)",
            report.warnings.len()
        )
    }
}
