//! `cargo xtask kube build|up|down`: the real kube-apiserver on its own etcd, built from the Go
//! module proxy and run from `target/kube/`, to try the controllers against without a cluster.
//!
//! The server is the one `nephrite-test-services`' `KubeApiServer` starts for tests; `up` and
//! `down` use its detached form (`kube_apiserver::up`/`down`), so the flags, credentials and
//! readiness checks are written once. `cargo xtask test` runs `build` before the tests.

mod build;
mod gomod;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nephrite_test_services::kube_apiserver::{self, ETCD_VERSION, KUBERNETES_VERSION, kube_root};

pub use build::{NodeBinaries, SumMode, ensure, ensure_node};

/// The usage of `cargo xtask kube`.
pub const USAGE: &str = "usage: cargo xtask kube build [--update-sum]
       cargo xtask kube up [--dir DIR]
       cargo xtask kube down [--dir DIR]";

/// The file under `target/kube` naming the directory of the last `up` without `--dir`.
const LAST_UP: &str = "last-up";

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
        "up" => up(dir_flag(rest)?),
        "down" => down(dir_flag(rest)?),
        other => bail!("unknown kube command `{other}`\n\n{USAGE}"),
    }
}

/// `--dir DIR` (or `--dir=DIR`), if given.
fn dir_flag(args: &[String]) -> anyhow::Result<Option<PathBuf>> {
    match args {
        [] => Ok(None),
        [flag, dir] if flag == "--dir" => Ok(Some(PathBuf::from(dir))),
        [flag] if flag.starts_with("--dir=") => Ok(Some(PathBuf::from(&flag["--dir=".len()..]))),
        _ => bail!("unexpected arguments {args:?}\n\n{USAGE}"),
    }
}

/// Builds the pair if needed, starts it detached with its state in `dir` (a fresh temporary
/// directory when absent), and prints how to use and stop it.
fn up(dir: Option<PathBuf>) -> anyhow::Result<()> {
    ensure(SumMode::Verify)?;
    let (dir, remembered) = match dir {
        Some(dir) => (absolute(&dir)?, false),
        None => {
            let dir = tempfile::Builder::new()
                .prefix("nephrite-kube-")
                .tempdir()
                .context("creating a temporary directory")?
                .keep();
            (dir, true)
        }
    };
    let started = kube_apiserver::up(&dir)?;
    if remembered {
        let last = kube_root().join(LAST_UP);
        std::fs::write(&last, dir.to_string_lossy().as_bytes())
            .with_context(|| format!("writing {}", last.display()))?;
    }
    let down = if remembered {
        "cargo xtask kube down".to_owned()
    } else {
        format!("cargo xtask kube down --dir {}", dir.display())
    };
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
    let last = kube_root().join(LAST_UP);
    let dir = match dir {
        Some(dir) => absolute(&dir)?,
        None => PathBuf::from(std::fs::read_to_string(&last).with_context(|| {
            format!(
                "no --dir given and no cluster remembered in {} (was `cargo xtask kube up` \
                 run without --dir?)",
                last.display()
            )
        })?),
    };
    let stopped = kube_apiserver::down(&dir)?;
    if std::fs::read_to_string(&last).is_ok_and(|remembered| Path::new(&remembered) == dir) {
        let _ = std::fs::remove_file(&last);
    }
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

/// `dir` made absolute against the current directory (the record names it in the servers'
/// command lines, which `down` checks from anywhere).
fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))
}
