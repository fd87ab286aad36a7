//! The `haproxy` driver: the controller's rules drive a local HAProxy 2.6.
//!
//! Every new snapshot is rendered ([`render`]), checked with `haproxy -c`, and only then put in
//! place and loaded: HAProxy runs in master-worker mode, and a reload (SIGUSR2 to the master)
//! starts new workers that take the listening sockets over from the old ones (`expose-fd
//! listeners`), while the old workers finish their connections — no connection is refused or
//! reset. A configuration HAProxy refuses is logged and the running one kept.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nephrite_proto::kuryr::l7::v1 as pb;
use tokio::process::{Child, Command};
use tokio::sync::{Mutex, watch};

use crate::wire::{from_wire, short};

pub mod render;

use render::{RenderSettings, pool_files};

/// Where and how HAProxy runs.
#[derive(Debug, Clone)]
pub struct HaproxySettings {
    /// The `haproxy` binary.
    pub binary: PathBuf,
    /// Its plain HTTP address.
    pub listen: std::net::SocketAddr,
    /// Directory for the configuration, sockets and CA files.
    pub dir: PathBuf,
}

/// What went wrong with HAProxy.
#[derive(Debug, thiserror::Error)]
pub enum HaproxyError {
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `haproxy` could not be run.
    #[error("running {binary}: {source}")]
    Run {
        /// The binary.
        binary: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `haproxy -c` refused the configuration.
    #[error("haproxy -c refused {path}: {output}")]
    Invalid {
        /// The configuration file.
        path: PathBuf,
        /// What HAProxy said.
        output: String,
    },
    /// The snapshot could not be read.
    #[error(transparent)]
    Wire(#[from] crate::wire::WireError),
    /// HAProxy did not start listening.
    #[error("haproxy did not listen on {0} within 10 s")]
    NotListening(std::net::SocketAddr),
    /// HAProxy exited while starting.
    #[error("haproxy exited while starting ({0}); see its messages above")]
    Exited(String),
    /// The reload signal could not be sent.
    #[error("signalling haproxy: {0}")]
    Signal(String),
}

struct Running {
    master: Child,
    config: String,
    version: String,
}

/// A running HAProxy under the controller's control.
#[derive(Clone)]
pub struct Haproxy {
    settings: HaproxySettings,
    running: Arc<Mutex<Running>>,
}

fn write(path: &Path, text: &str) -> Result<(), HaproxyError> {
    std::fs::write(path, text).map_err(|source| HaproxyError::Write {
        path: path.to_owned(),
        source,
    })
}

impl Haproxy {
    fn config_path(&self) -> PathBuf {
        self.settings.dir.join("haproxy.cfg")
    }

    fn render(settings: &HaproxySettings, snapshot: &pb::Snapshot) -> Result<String, HaproxyError> {
        let config = from_wire(snapshot)?.translation.config;
        let render_settings = RenderSettings {
            listen: settings.listen,
            stats_socket: settings.dir.join("haproxy.sock").display().to_string(),
            files_dir: settings.dir.display().to_string(),
        };
        for (name, pem) in pool_files(&config) {
            write(&settings.dir.join(name), &pem)?;
        }
        Ok(render::render(&config, &render_settings))
    }

    /// Checks `text` with `haproxy -c` (written to `candidate`).
    async fn check(
        settings: &HaproxySettings,
        candidate: &Path,
        text: &str,
    ) -> Result<(), HaproxyError> {
        write(candidate, text)?;
        let output = Command::new(&settings.binary)
            .arg("-c")
            .arg("-f")
            .arg(candidate)
            .output()
            .await
            .map_err(|source| HaproxyError::Run {
                binary: settings.binary.clone(),
                source,
            })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(HaproxyError::Invalid {
                path: candidate.to_owned(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                )
                .trim()
                .to_owned(),
            })
        }
    }

    /// Renders `snapshot`, checks it and starts HAProxy on it; returns once it listens.
    pub async fn start(
        settings: HaproxySettings,
        snapshot: &pb::Snapshot,
    ) -> Result<Self, HaproxyError> {
        std::fs::create_dir_all(&settings.dir).map_err(|source| HaproxyError::Write {
            path: settings.dir.clone(),
            source,
        })?;
        let text = Self::render(&settings, snapshot)?;
        let path = settings.dir.join("haproxy.cfg");
        Self::check(&settings, &path, &text).await?;
        let master = Command::new(&settings.binary)
            .arg("-W")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| HaproxyError::Run {
                binary: settings.binary.clone(),
                source,
            })?;
        let haproxy = Haproxy {
            running: Arc::new(Mutex::new(Running {
                master,
                config: text,
                version: snapshot.version.clone(),
            })),
            settings,
        };
        for _ in 0..200 {
            if let Ok(Some(status)) = haproxy.running.lock().await.master.try_wait() {
                return Err(HaproxyError::Exited(status.to_string()));
            }
            if tokio::net::TcpStream::connect(haproxy.settings.listen)
                .await
                .is_ok()
            {
                tracing::info!(
                    version = short(&snapshot.version),
                    "haproxy serving on {}",
                    haproxy.settings.listen
                );
                return Ok(haproxy);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(HaproxyError::NotListening(haproxy.settings.listen))
    }

    /// Loads `snapshot` if it differs from what runs: render, `haproxy -c`, then a hitless
    /// reload. Returns whether HAProxy was reloaded.
    pub async fn apply(&self, snapshot: &pb::Snapshot) -> Result<bool, HaproxyError> {
        let mut running = self.running.lock().await;
        if running.version == snapshot.version {
            return Ok(false);
        }
        let text = Self::render(&self.settings, snapshot)?;
        if text == running.config {
            running.version = snapshot.version.clone();
            return Ok(false);
        }
        let candidate = self.settings.dir.join("haproxy.cfg.new");
        Self::check(&self.settings, &candidate, &text).await?;
        std::fs::rename(&candidate, self.config_path()).map_err(|source| HaproxyError::Write {
            path: self.config_path(),
            source,
        })?;
        let pid = running
            .master
            .id()
            .ok_or_else(|| HaproxyError::Signal("the haproxy master has exited".into()))?;
        let pid = nix::unistd::Pid::from_raw(
            i32::try_from(pid).map_err(|_| HaproxyError::Signal(format!("pid {pid}")))?,
        );
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR2)
            .map_err(|err| HaproxyError::Signal(err.to_string()))?;
        running.config = text;
        running.version = snapshot.version.clone();
        tracing::info!(version = short(&snapshot.version), "haproxy reloaded");
        Ok(true)
    }

    /// Applies every snapshot `snapshots` carries until the sender is gone.
    pub async fn follow(self, mut snapshots: watch::Receiver<Arc<pb::Snapshot>>) {
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            if let Err(err) = self.apply(&snapshot).await {
                tracing::error!(
                    version = short(&snapshot.version),
                    "haproxy keeps its current configuration: {err}"
                );
            }
            if snapshots.changed().await.is_err() {
                return;
            }
        }
    }

    /// Stops HAProxy (SIGUSR1: soft stop, connections finish), then waits for it.
    pub async fn stop(&self) {
        let mut running = self.running.lock().await;
        if let Some(pid) = running.master.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGUSR1,
            );
        }
        if tokio::time::timeout(Duration::from_secs(10), running.master.wait())
            .await
            .is_err()
        {
            let _ = running.master.kill().await;
        }
    }
}
