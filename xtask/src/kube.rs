//! `cargo xtask kube build|up|down`: the real kube-apiserver on its own etcd, built from the Go
//! module proxy and run from `target/kube/`, to try the controllers against without a cluster.
//!
//! The server is the one `nephrite-test-services`' `KubeApiServer` starts for tests; `up` and
//! `down` use its detached form (`kube_apiserver::up`/`down`), so the flags, credentials and
//! readiness checks are written once. `cargo xtask test` runs `build` before the tests.

mod build;
mod gomod;

use std::path::PathBuf;

use anyhow::{Context, bail};

use crate::state_dir::{StateDirs, dir_flag};
use nephrite_test_services::kube_apiserver::{self, ETCD_VERSION, KUBERNETES_VERSION};

pub use build::{NodeBinaries, SumMode, ensure, ensure_node};

/// The usage of `cargo xtask kube`.
pub const USAGE: &str = "usage: cargo xtask kube build [--update-sum]
       cargo xtask kube up [--dir DIR]
       cargo xtask kube down [--dir DIR]";

/// Where `up` keeps the pair's state, and `down` finds it.
const STATE: StateDirs = StateDirs {
    command: "kube",
    record: "last-up",
};

/// Runs `cargo xtask kube <args>`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (command, rest) = args
        .split_first()
        .with_context(|| format!("no kube command given\n\n{USAGE}"))?;
    match command.as_str() {
        "build" => match rest {
            [] => ensure(SumMode::Verify).map(drop),
            [flag] if flag == "--update-sum" => ensure(SumMode::Update).map(drop),
            _ => bail!("unexpected arguments {rest:?}\n\n{USAGE}"),
        },
        "up" => up(dir_flag(rest, USAGE)?),
        "down" => down(dir_flag(rest, USAGE)?),
        other => bail!("unknown kube command `{other}`\n\n{USAGE}"),
    }
}

/// Builds the pair if needed, starts it detached with its state in `dir` (a fresh temporary
/// directory when absent), and prints how to use and stop it.
fn up(dir: Option<PathBuf>) -> anyhow::Result<()> {
    ensure(SumMode::Verify)?;
    let up_dir = STATE.up(dir)?;
    let dir = &up_dir.dir;
    let started = kube_apiserver::up(dir)?;
    let down = up_dir.down_command();
    eprintln!(
        "xtask: kube-apiserver {KUBERNETES_VERSION} (etcd {ETCD_VERSION}) ready at {} in {:.1}s \
         (pids {} and {})\n\
         xtask: state and logs in {}\n\
         xtask: export KUBECONFIG={}\n\
         xtask: stop it with: {down}",
        started.endpoint.url(),
        started.started_in.as_secs_f64(),
        started.apiserver_pid,
        started.etcd_pid,
        dir.display(),
        started.kubeconfig.display(),
    );
    Ok(())
}

/// Stops the pair in `dir` (the last `up` without `--dir` when absent) and removes its state.
fn down(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = STATE.down(dir)?;
    let stopped = kube_apiserver::down(&dir)?;
    STATE.forget(&dir);
    if stopped.stopped.is_empty() {
        eprintln!("xtask: nothing was running in {}", dir.display());
    }
    for (what, pid) in &stopped.stopped {
        eprintln!("xtask: stopped {what} (pid {pid})");
    }
    eprintln!(
        "xtask: removed the cluster's state{}",
        if stopped.removed_dir {
            format!(" and {}", dir.display())
        } else {
            format!(" from {} (other files left there)", dir.display())
        }
    );
    Ok(())
}
