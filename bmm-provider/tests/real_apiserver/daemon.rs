//! The `bmm-provider` binary run with only a ServiceAccount's kubeconfig, its log kept in a
//! file so that a scenario that waits in vain says what the daemon printed (a 403 from RBAC
//! shows up there, not in the test).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::setup::DeployedAs;

/// How many lines of the daemon's log a failure shows.
const LOG_TAIL_LINES: usize = 40;

/// A running `bmm-provider`, killed on drop.
pub struct Daemon {
    child: Child,
    log: PathBuf,
    role: String,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts the binary as `deployed` says, with `kubeconfig` (written to a private file and
    /// given as `KUBECONFIG`) and none of the caller's `BMM_*`, `NEPHRITE_*` or `KUBECONFIG`.
    pub fn start(role: &str, deployed: &DeployedAs, kubeconfig: &str) -> anyhow::Result<Daemon> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("bmm-{role}-"))
            .tempdir()?;
        let kubeconfig_path = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig_path, kubeconfig)?;
        let log = dir.path().join("log");
        let log_file = std::fs::File::create(&log)?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_bmm-provider"));
        for (name, _) in std::env::vars() {
            if name.starts_with("BMM_") || name.starts_with("NEPHRITE_") || name == "KUBECONFIG" {
                command.env_remove(name);
            }
        }
        command
            .args(&deployed.args)
            .envs(deployed.env.iter().map(|(n, v)| (n, v)))
            .env("KUBECONFIG", &kubeconfig_path)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        let child = command
            .spawn()
            .with_context(|| format!("starting bmm-provider {}", deployed.args.join(" ")))?;
        Ok(Daemon {
            child,
            log,
            role: role.to_string(),
            _dir: dir,
        })
    }

    /// The last lines the daemon printed.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// Polls `check` every 100 ms until it gives `Some`; fails after `limit`, or as soon as
    /// the daemon exits, saying what was awaited and what the daemon printed.
    pub async fn until<T, F, Fut>(
        &mut self,
        what: &str,
        limit: Duration,
        mut check: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(found) = check().await? {
                return Ok(found);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "bmm-provider {} exited ({status}) while waiting for {what}; it printed:\n{}",
                    self.role,
                    self.log_tail()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "{what}: not within {limit:?}; bmm-provider {} printed:\n{}",
                    self.role,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
