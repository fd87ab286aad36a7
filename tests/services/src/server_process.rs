//! A server process a test started, which must not outlive the test.
//!
//! [`ServerProcess`] owns the child from the moment it is spawned, so an early `?` during
//! start-up stops it too. Dropping it sends the server's own shutdown signal, waits a grace
//! period, then kills and reaps it. A test process killed outright (SIGKILL by a timeout) runs
//! no destructors, so each server also gets a watchdog: a `sh` that blocks reading a pipe whose
//! only writer is the test process; when the test process dies the pipe closes and the watchdog
//! stops the server and removes its directory.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::Unavailable;
use crate::port::says_address_in_use;

/// How long to wait between readiness or exit checks.
const POLL: Duration = Duration::from_millis(25);

/// How much of a server log an error message quotes.
const LOG_TAIL_BYTES: u64 = 4096;

/// A running server child that is stopped on drop.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    what: String,
    child: Child,
    log: PathBuf,
    stop_signal: Signal,
    grace: Duration,
    watchdog: Option<Child>,
}

/// How a server failed to become ready.
#[derive(Debug)]
pub(crate) struct NotReady {
    /// What went wrong, with the log tail.
    pub(crate) detail: String,
    /// The log says the listening address was taken: worth retrying on another port.
    pub(crate) address_in_use: bool,
}

impl NotReady {
    /// The failure as an [`Unavailable`] for `what`.
    pub(crate) fn into_unavailable(self, what: &str) -> Unavailable {
        Unavailable::failed(what, self.detail)
    }
}

impl ServerProcess {
    /// Spawn `command` with stdout and stderr appended to `log`, stopping it with
    /// `stop_signal` (then SIGKILL after `grace`). `cleanup_dir` is removed by the watchdog if
    /// the test process dies without stopping the server.
    pub(crate) fn spawn(
        what: &str,
        mut command: Command,
        log: &Path,
        stop_signal: Signal,
        grace: Duration,
        cleanup_dir: &Path,
    ) -> Result<Self, Unavailable> {
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
            .stderr(open_log()?);
        let child = command.spawn().map_err(|e| {
            Unavailable::failed(what, format!("cannot run {:?}: {e}", command.get_program()))
        })?;
        let mut process = ServerProcess {
            what: what.to_owned(),
            child,
            log: log.to_path_buf(),
            stop_signal,
            grace,
            watchdog: None,
        };
        process.watchdog = spawn_watchdog(process.child.id(), stop_signal, cleanup_dir);
        Ok(process)
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, when the server has already exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Poll `ready` until it is true, the server exits, or `timeout` passes.
    pub(crate) fn wait_until_ready(
        &mut self,
        timeout: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), NotReady> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Err(self.not_ready(&format!("exited during start-up ({status})")));
            }
            if ready() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.not_ready(&format!("not ready after {timeout:?}")));
            }
            thread::sleep(POLL);
        }
    }

    fn not_ready(&self, how: &str) -> NotReady {
        let tail = log_tail(&self.log);
        NotReady {
            detail: format!(
                "{} {how}; last lines of {}:\n{tail}",
                self.what,
                self.log.display()
            ),
            address_in_use: says_address_in_use(&tail),
        }
    }

    /// Stop the server: its shutdown signal, `grace` to exit, then SIGKILL; always reaped.
    pub(crate) fn stop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            // The watchdog must not act on a pid that is about to be reaped and reused.
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        if self.exited().is_some() {
            return;
        }
        if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
            let _ = kill_process(pid, self.stop_signal);
        }
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            thread::sleep(POLL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A `sh` that stops `pid` (signal, 5 s, SIGKILL) and removes `cleanup_dir` once its stdin
/// reaches end of file, which happens when the test process exits in any way. None when no
/// shell can be run; the server is then only stopped by [`ServerProcess`]'s drop.
fn spawn_watchdog(pid: u32, stop_signal: Signal, cleanup_dir: &Path) -> Option<Child> {
    // Ignoring TERM, INT and HUP lets it outlive a signal sent to the whole process group
    // (nextest's timeout, Ctrl-C) long enough to clean up after the server.
    const SCRIPT: &str = "trap '' TERM INT HUP; \
                          while read -r _; do :; done; \
                          kill -s \"$1\" \"$0\" 2>/dev/null; \
                          i=0; while kill -0 \"$0\" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
                          kill -s KILL \"$0\" 2>/dev/null; \
                          rm -rf -- \"$2\"";
    Command::new("/bin/sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg(pid.to_string())
        .arg(signal_name(stop_signal))
        .arg(cleanup_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

fn signal_name(signal: Signal) -> &'static str {
    if signal == Signal::INT {
        "INT"
    } else if signal == Signal::QUIT {
        "QUIT"
    } else {
        "TERM"
    }
}

/// The last few KiB of `log`, or a note that it cannot be read.
pub(crate) fn log_tail(log: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = File::open(log)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) if text.trim().is_empty() => "(log is empty)".to_owned(),
        Ok(text) => text,
        Err(e) => format!("(cannot read log: {e})"),
    }
}

#[cfg(test)]
mod tests;
