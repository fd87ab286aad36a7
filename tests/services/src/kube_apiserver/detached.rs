//! The pair left running for a person at a terminal: `cargo xtask kube up` / `down`.
//!
//! A test owns its servers and stops them on drop; `kube up` must return while they keep
//! running, and `kube down`, a later process, must find and stop them. So the processes are
//! started in their own process group (a Ctrl-C at the terminal does not reach them), and
//! `DIR/cluster.json` records their pids and state directory. `down` signals a pid only while
//! its command line still names that state directory, so a pid reused by an unrelated process
//! after a reboot is never killed.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::{Value, json};

use super::KubeEndpoint;
use super::binaries::{ETCD_VERSION, KUBERNETES_VERSION, KubeBinaries};
use super::launch::{Spawner, Started, launch};
use crate::Unavailable;
use crate::process::runs;

/// The record of a running pair in its directory.
const RECORD: &str = "cluster.json";
/// The admin kubeconfig in the directory.
const KUBECONFIG: &str = "kubeconfig";
/// The directory of the servers' own state (credentials, etcd data, logs).
const STATE: &str = "state";

/// How long a server may take to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// What went wrong starting or stopping a detached pair.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The servers could not be had (not built) or did not start.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// `up` was asked for a directory that already holds a pair.
    #[error(
        "{} already holds a kube-apiserver (pids {pids:?}); run `cargo xtask kube down --dir {}` first",
        dir.display(),
        dir.display()
    )]
    AlreadyUp {
        /// The directory.
        dir: PathBuf,
        /// The recorded pids.
        pids: Vec<u32>,
    },
    /// `down` was asked for a directory without a record of a pair.
    #[error("{} holds no cluster started by `cargo xtask kube up` (no {RECORD})", dir.display())]
    NoCluster {
        /// The directory.
        dir: PathBuf,
    },
    /// The record exists but cannot be read as one.
    #[error("{} is not a cluster record: {detail}", path.display())]
    BadRecord {
        /// The record file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A server survived SIGKILL (only a process in uninterruptible sleep does).
    #[error("{what} (pid {pid}) is still running after SIGKILL")]
    StillRunning {
        /// Which server.
        what: String,
        /// Its pid.
        pid: u32,
    },
    /// A file could not be written, read or removed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS reason.
        source: std::io::Error,
    },
}

/// A pair that `up` left running.
#[derive(Debug, Clone)]
pub struct DetachedKube {
    /// How to reach the API as admin.
    pub endpoint: KubeEndpoint,
    /// `DIR/kubeconfig`, the admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// kube-apiserver's pid.
    pub apiserver_pid: u32,
    /// etcd's pid.
    pub etcd_pid: u32,
    /// From the first spawn to `/readyz`.
    pub started_in: Duration,
}

/// What `down` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The servers that were running and were stopped, as (name, pid).
    pub stopped: Vec<(String, u32)>,
    /// Whether `dir` itself was removed (false when something else was left in it).
    pub removed_dir: bool,
}

/// Start etcd and kube-apiserver with their state in `dir` (created if missing), leave them
/// running, and write `dir/kubeconfig` (admin) and `dir/cluster.json` (their pids).
///
/// Stops what it started when start-up fails, leaving `dir/state` (the logs) to read; the next
/// `up` replaces it.
pub fn up(dir: &Path) -> Result<DetachedKube, ClusterError> {
    let record = dir.join(RECORD);
    if record.exists() {
        let pids = read_record(&record)?
            .into_iter()
            .map(|(_, pid)| pid)
            .collect();
        return Err(ClusterError::AlreadyUp {
            dir: dir.to_path_buf(),
            pids,
        });
    }
    let binaries = KubeBinaries::find()?;
    let state = dir.join(STATE);
    // No record but a state directory: what a failed `up` left (its servers were stopped).
    // etcd must not find that attempt's data under its new ports.
    match std::fs::remove_dir_all(&state) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ClusterError::Io {
                action: "remove the leftover",
                path: state,
                source,
            });
        }
    }
    std::fs::create_dir_all(&state).map_err(|source| ClusterError::Io {
        action: "create",
        path: state.clone(),
        source,
    })?;
    let mut launched = launch(&mut DetachedSpawner, &binaries, &state)?;
    let kubeconfig = dir.join(KUBECONFIG);
    launched
        .endpoint
        .write_kubeconfig(&kubeconfig)
        .map_err(|source| ClusterError::Io {
            action: "write",
            path: kubeconfig.clone(),
            source,
        })?;
    let (apiserver_pid, etcd_pid) = (launched.apiserver.pid(), launched.etcd.pid());
    let text = json!({
        "kubernetes": KUBERNETES_VERSION,
        "etcd": ETCD_VERSION,
        "server": launched.endpoint.url(),
        "etcdClient": format!("http://{}", launched.etcd_ports.client),
        "state": state,
        "pids": { "kube-apiserver": apiserver_pid, "etcd": etcd_pid },
    });
    std::fs::write(&record, format!("{text:#}\n")).map_err(|source| ClusterError::Io {
        action: "write",
        path: record.clone(),
        source,
    })?;
    // Written down: from here on the servers outlive this process.
    launched.apiserver.detach();
    launched.etcd.detach();
    Ok(DetachedKube {
        endpoint: launched.endpoint,
        kubeconfig,
        apiserver_pid,
        etcd_pid,
        started_in: launched.started_in,
    })
}

/// Stop the pair recorded in `dir/cluster.json` (kube-apiserver, then etcd: SIGTERM, then
/// SIGKILL after 15 s) and remove its state, kubeconfig and record; `dir` itself goes too when
/// nothing else is in it.
pub fn down(dir: &Path) -> Result<Stopped, ClusterError> {
    let record = dir.join(RECORD);
    if !record.exists() {
        return Err(ClusterError::NoCluster {
            dir: dir.to_path_buf(),
        });
    }
    let state = dir.join(STATE);
    let mut stopped = Vec::new();
    for (what, pid) in read_record(&record)? {
        if ours(pid, &state) {
            stop(&what, pid)?;
            stopped.push((what, pid));
        }
    }
    for path in [state, dir.join(KUBECONFIG), record] {
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ClusterError::Io {
                    action: "remove",
                    path,
                    source,
                });
            }
        }
    }
    let removed_dir = std::fs::remove_dir(dir).is_ok();
    Ok(Stopped {
        stopped,
        removed_dir,
    })
}

/// The (name, pid) pairs of `record`, kube-apiserver first.
fn read_record(record: &Path) -> Result<Vec<(String, u32)>, ClusterError> {
    let bad = |detail: String| ClusterError::BadRecord {
        path: record.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(record).map_err(|source| ClusterError::Io {
        action: "read",
        path: record.to_path_buf(),
        source,
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    ["kube-apiserver", "etcd"]
        .into_iter()
        .map(|what| {
            let pid = value["pids"][what]
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| bad(format!("no pids.{what}")))?;
            Ok((what.to_owned(), pid))
        })
        .collect()
}

/// Whether `pid` runs and its command line names `state` (so it is the server `up` started,
/// not a process that reused the pid).
fn ours(pid: u32, state: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let state = state.to_string_lossy();
    runs(pid) && String::from_utf8_lossy(&cmdline).contains(state.as_ref())
}

/// SIGTERM `pid`, SIGKILL after [`STOP_GRACE`], and wait until it is gone.
fn stop(what: &str, pid: u32) -> Result<(), ClusterError> {
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return Ok(());
    };
    let _ = kill_process(raw, Signal::TERM);
    if gone_within(pid, STOP_GRACE) {
        return Ok(());
    }
    let _ = kill_process(raw, Signal::KILL);
    if gone_within(pid, Duration::from_secs(5)) {
        return Ok(());
    }
    Err(ClusterError::StillRunning {
        what: what.to_owned(),
        pid,
    })
}

/// Whether `pid` stops running within `timeout`.
fn gone_within(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while runs(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Spawns servers in their own process group, logging to their files; each is stopped when
/// its handle drops until [`DetachedProcess::detach`].
struct DetachedSpawner;

/// A server `up` started: stopped on drop (a failed start-up) unless detached.
#[derive(Debug)]
struct DetachedProcess {
    child: Child,
    attached: bool,
}

impl DetachedProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Leave the server running when this handle drops.
    fn detach(&mut self) {
        self.attached = false;
    }
}

impl Started for DetachedProcess {
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for DetachedProcess {
    fn drop(&mut self) {
        if self.attached && self.exited().is_none() {
            let _ = stop("server", self.child.id());
            let _ = self.child.wait();
        }
    }
}

impl Spawner for DetachedSpawner {
    type Process = DetachedProcess;

    fn spawn(
        &mut self,
        what: &str,
        mut command: Command,
        log: &Path,
        _state: &Path,
    ) -> Result<DetachedProcess, Unavailable> {
        let open_log = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| {
                    Unavailable::failed(what, format!("cannot open log {}: {e}", log.display()))
                })
        };
        command
            .stdin(Stdio::null())
            .stdout(open_log()?)
            .stderr(open_log()?)
            .process_group(0);
        let child = command.spawn().map_err(|e| {
            Unavailable::failed(what, format!("cannot run {:?}: {e}", command.get_program()))
        })?;
        Ok(DetachedProcess {
            child,
            attached: true,
        })
    }
}
