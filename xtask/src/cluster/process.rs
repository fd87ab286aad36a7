//! The cluster's processes: started detached with a pid file in the state directory, stopped
//! from those pid files by `down`, from any shell.
//!
//! Every process of a cluster names its state directory on its command line (a config file,
//! a data directory or a socket in it), so a pid file is trusted only while `/proc/PID/cmdline`
//! still names the directory: a pid the kernel has reused for something else is never
//! signalled. The same fact finds what the cluster's processes started themselves
//! (containerd's shims), which `down` stops after containerd.

use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long a process may take to exit after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);

/// One started process.
#[derive(Debug, Clone)]
pub struct Started {
    /// Its name (`etcd`, `kubelet`, …): the pid file's and the log's.
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// Its log (stdout and stderr).
    pub log: PathBuf,
}

/// Where the pid files of the cluster in `dir` live.
pub fn run_dir(dir: &Path) -> PathBuf {
    dir.join("run")
}

/// Where the logs of the cluster in `dir` live.
pub fn log_dir(dir: &Path) -> PathBuf {
    dir.join("logs")
}

/// Start `command` as `name`, detached (its own process group, so a Ctrl-C of `up` does not
/// reach it; stdin closed; stdout and stderr appended to `logs/<name>.log`), and record its
/// pid in `run/<name>.pid`.
pub fn spawn(dir: &Path, name: &str, mut command: Command) -> anyhow::Result<Started> {
    let logs = log_dir(dir);
    let run = run_dir(dir);
    for d in [&logs, &run] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let log = logs.join(format!("{name}.log"));
    let out = File::options()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let err = out
        .try_clone()
        .with_context(|| format!("opening {}", log.display()))?;
    command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let child = command
        .spawn()
        .with_context(|| format!("starting {name} ({:?})", command.get_program()))?;
    let pid = child.id();
    // Not waited for: `down` stops it, and init reaps it once `up` has exited.
    drop(child);
    let pid_file = run.join(format!("{name}.pid"));
    std::fs::write(&pid_file, format!("{pid}\n"))
        .with_context(|| format!("writing {}", pid_file.display()))?;
    Ok(Started {
        name: name.to_owned(),
        pid,
        log,
    })
}

/// Whether process `pid` is alive and names `dir` on its command line.
pub fn is_ours(pid: u32, dir: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    if is_zombie(pid) {
        return false;
    }
    let needle = dir.as_os_str().as_encoded_bytes();
    cmdline.windows(needle.len()).any(|w| w == needle)
}

/// Whether process `pid` exists and has not exited.
fn is_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)
}

/// A zombie has exited; only its parent's wait is missing.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Every live process naming `dir` on its command line, but this one.
pub fn processes_naming(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| pid != me && is_ours(pid, dir))
        .collect();
    pids.sort_unstable();
    pids
}

/// Stop the process recorded as `name` in `dir`'s pid files: SIGTERM, then SIGKILL after the
/// grace period. Its pid when it was running; the pid file is removed either way.
pub fn stop(dir: &Path, name: &str) -> anyhow::Result<Option<u32>> {
    let pid_file = run_dir(dir).join(format!("{name}.pid"));
    let text = match std::fs::read_to_string(&pid_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", pid_file.display())),
    };
    let pid: u32 = text
        .trim()
        .parse()
        .with_context(|| format!("{} holds no pid: {text:?}", pid_file.display()))?;
    let stopped = if is_ours(pid, dir) {
        terminate(pid, dir)?;
        Some(pid)
    } else {
        None
    };
    let _ = std::fs::remove_file(&pid_file);
    Ok(stopped)
}

/// SIGTERM `pid`, wait for it to go, SIGKILL it after [`STOP_GRACE`].
pub fn terminate(pid: u32, dir: &Path) -> anyhow::Result<()> {
    signal(pid, "TERM");
    let deadline = Instant::now() + STOP_GRACE;
    while is_ours(pid, dir) {
        if Instant::now() >= deadline {
            signal(pid, "KILL");
            let deadline = Instant::now() + Duration::from_secs(10);
            while is_ours(pid, dir) {
                if Instant::now() >= deadline {
                    bail!("process {pid} survived SIGKILL for 10 s");
                }
                thread::sleep(Duration::from_millis(100));
            }
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Send `SIG<name>` to `pid` with kill(1) (a process already gone is no error).
pub fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// The last `lines` lines of `log`, for an error message.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Poll `ready` every 250 ms until it holds, failing when `started` exits or after `timeout`,
/// with the tail of its log.
pub fn wait_ready(
    started: &Started,
    timeout: Duration,
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        // `up`'s own child: its pid cannot be reused before `up` exits, so being alive is
        // enough (its command line may not name the directory yet while it execs).
        if !is_alive(started.pid) {
            bail!(
                "{} exited before {what}; last lines of {}:\n{}",
                started.name,
                started.log.display(),
                log_tail(&started.log, 30)
            );
        }
        if Instant::now() >= deadline {
            bail!(
                "{} not {what} after {timeout:?}; last lines of {}:\n{}",
                started.name,
                started.log.display(),
                log_tail(&started.log, 30)
            );
        }
        thread::sleep(Duration::from_millis(250));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use super::{is_ours, processes_naming};

    #[test]
    fn a_process_is_ours_only_while_it_names_the_directory_and_lives() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new("sleep")
            .arg("30")
            .env("IGNORED", dir.path())
            .spawn()
            .unwrap();
        assert!(!is_ours(child.id(), dir.path()), "sleep does not name it");
        child.kill().unwrap();
        child.wait().unwrap();
        let marker = dir.path().join("marker");
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30; exit 0", "sh"])
            .arg(&marker)
            .spawn()
            .unwrap();
        // Until the child has exec'd `sh`, its command line is still this test's.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !is_ours(child.id(), dir.path()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(is_ours(child.id(), dir.path()));
        assert_eq!(processes_naming(dir.path()), [child.id()]);
        child.kill().unwrap();
        // A zombie (exited, not yet waited for) is not running.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!is_ours(child.id(), dir.path()));
        child.wait().unwrap();
        assert!(!is_ours(child.id(), Path::new("/")));
    }
}
