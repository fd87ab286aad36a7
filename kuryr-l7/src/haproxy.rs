//! The `haproxy` driver: the controller's rules drive a local HAProxy 2.6.
//!
//! Every new snapshot's configuration is rendered ([`nephrite_l7::haproxy::render`], pure), its files written
//! (certificates with their keys mode 0600), checked with `haproxy -c`, and only then put in
//! place and loaded: HAProxy runs in master-worker mode, and a reload (SIGUSR2 to the master)
//! starts new workers that take the listening sockets over from the old ones (`expose-fd
//! listeners`), while the old workers finish their connections — no connection is refused or
//! reset. A configuration HAProxy refuses is logged and the running one kept.
//!
//! The master's pid is kept in `haproxy.pid` in the state directory. A controller killed
//! before it could stop HAProxy (SIGKILL, a crash) leaves that HAProxy serving; the next start
//! on the same directory finds it there (the pid still runs HAProxy on this directory's
//! configuration) and takes over: the new HAProxy binds, then tells the old one to finish its
//! connections and leave (`-sf`), so the old rules never keep a share of the new connections.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nephrite_l7::haproxy::{ConfigFile, RenderSettings, Rendered};
use nephrite_l7::{Certificate, L7Config};
use tokio::process::{Child, Command};
use tokio::sync::{Mutex, watch};

use crate::router::tls::certified_key;
use crate::source::Snapshot;

/// Where and how HAProxy runs.
#[derive(Debug, Clone)]
pub struct HaproxySettings {
    /// The `haproxy` binary.
    pub binary: PathBuf,
    /// Its plain HTTP address.
    pub listen: std::net::SocketAddr,
    /// Its TLS address (termination by SNI, passthrough); `None`: plain HTTP only.
    pub listen_tls: Option<std::net::SocketAddr>,
    /// Directory for the configuration, sockets, certificates and CA files.
    pub dir: PathBuf,
    /// PEM certificate chain and key for TLS hosts without their own certificate.
    pub default_certificate: Option<(String, String)>,
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
    /// The default certificate does not parse.
    #[error("the default certificate: {0}")]
    DefaultCertificate(String),
    /// The state directory cannot be named in HAProxy's files.
    #[error("--haproxy-dir {0} holds whitespace, which HAProxy's crt-list cannot name")]
    BadDirectory(PathBuf),
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
    /// What HAProxy was last loaded with (configuration and files: a renewed certificate
    /// changes only a file).
    rendered: Rendered,
}

/// A running HAProxy under the controller's control.
#[derive(Clone)]
pub struct Haproxy {
    settings: HaproxySettings,
    running: Arc<Mutex<Running>>,
}

fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> HaproxyError + '_ {
    move |source| HaproxyError::Write {
        path: path.to_owned(),
        source,
    }
}

fn write(path: &Path, text: &str) -> Result<(), HaproxyError> {
    std::fs::write(path, text).map_err(write_error(path))
}

/// Writes `text` to `path` readable by its owner only (also when the file existed).
fn write_private(path: &Path, text: &str) -> Result<(), HaproxyError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(write_error(path))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(write_error(path))?;
    file.write_all(text.as_bytes()).map_err(write_error(path))
}

/// Writes the rendered files into `dir`, and removes certificate files of earlier
/// configurations (no private key is left behind).
fn write_files(dir: &Path, files: &[ConfigFile]) -> Result<(), HaproxyError> {
    for file in files {
        let path = dir.join(&file.name);
        if file.private {
            write_private(&path, &file.content)?;
        } else {
            write(&path, &file.content)?;
        }
    }
    let entries = std::fs::read_dir(dir).map_err(write_error(dir))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = (name.starts_with("cert_") && name.ends_with(".pem"))
            || name == nephrite_l7::haproxy::DEFAULT_CERTIFICATE;
        if ours && !files.iter().any(|f| f.name == name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// The certificates HAProxy can load: one that does not parse is logged and left out (its
/// hosts get the default certificate), as the embedded router does, instead of making
/// `haproxy -c` refuse the whole configuration.
fn loadable(certificates: &[Certificate]) -> Vec<Certificate> {
    certificates
        .iter()
        .filter(|c| match certified_key(&c.cert_pem, &c.key_pem) {
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(origin = %c.origin, "certificate left out: {err}");
                false
            }
        })
        .cloned()
        .collect()
}

impl Haproxy {
    fn config_path(&self) -> PathBuf {
        self.settings.dir.join("haproxy.cfg")
    }

    /// Renders `config` (pure; nothing is written).
    fn render(settings: &HaproxySettings, config: &L7Config) -> Rendered {
        let certificates = loadable(&config.certificates);
        let config = L7Config {
            certificates,
            ..config.clone()
        };
        let render_settings = RenderSettings {
            listen: settings.listen,
            listen_tls: settings.listen_tls,
            stats_socket: settings.dir.join("haproxy.sock").display().to_string(),
            files_dir: settings.dir.display().to_string(),
            default_certificate: settings.default_certificate.as_ref().map(|(cert, key)| {
                Certificate {
                    hosts: Vec::new(),
                    cert_pem: cert.clone(),
                    key_pem: key.clone(),
                    origin: "the default certificate".into(),
                }
            }),
        };
        nephrite_l7::haproxy::render(&config, &render_settings)
    }

    /// Writes the files of `rendered` and checks its configuration with `haproxy -c` (written
    /// to `candidate`).
    async fn check(
        settings: &HaproxySettings,
        candidate: &Path,
        rendered: &Rendered,
    ) -> Result<(), HaproxyError> {
        write_files(&settings.dir, &rendered.files)?;
        write(candidate, &rendered.config)?;
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
        snapshot: &Snapshot,
    ) -> Result<Self, HaproxyError> {
        if settings
            .dir
            .display()
            .to_string()
            .contains(char::is_whitespace)
        {
            return Err(HaproxyError::BadDirectory(settings.dir));
        }
        if let Some((cert, key)) = &settings.default_certificate {
            certified_key(cert, key).map_err(HaproxyError::DefaultCertificate)?;
        }
        std::fs::create_dir_all(&settings.dir).map_err(write_error(&settings.dir))?;
        let rendered = Self::render(&settings, &snapshot.translation.config);
        let path = settings.dir.join("haproxy.cfg");
        Self::check(&settings, &path, &rendered).await?;
        let pidfile = settings.dir.join("haproxy.pid");
        let stale = stale_master(&pidfile, &path);
        let mut command = Command::new(&settings.binary);
        command
            .arg("-W")
            .arg("-f")
            .arg(&path)
            .arg("-p")
            .arg(&pidfile);
        if let Some(pid) = stale {
            tracing::warn!(
                pid,
                "an earlier haproxy still runs on {}: taking over, it finishes its connections and leaves",
                settings.dir.display()
            );
            // `-sf` takes every argument after it as a pid: it comes last.
            command.arg("-sf").arg(pid.to_string());
        }
        let master = command
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| HaproxyError::Run {
                binary: settings.binary.clone(),
                source,
            })?;
        let own = master.id();
        let haproxy = Haproxy {
            running: Arc::new(Mutex::new(Running { master, rendered })),
            settings,
        };
        for _ in 0..200 {
            if let Ok(Some(status)) = haproxy.running.lock().await.master.try_wait() {
                return Err(HaproxyError::Exited(status.to_string()));
            }
            // Listening is not enough while an earlier HAProxy also listens there: the new
            // master writes its pid once it is up.
            let started = stale.is_none() || own.is_some_and(|own| read_pid(&pidfile) == Some(own));
            if started
                && tokio::net::TcpStream::connect(haproxy.settings.listen)
                    .await
                    .is_ok()
            {
                tracing::info!("haproxy serving on {}", haproxy.settings.listen);
                return Ok(haproxy);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(HaproxyError::NotListening(haproxy.settings.listen))
    }

    /// Loads `snapshot` if it differs from what runs: render, `haproxy -c`, then a hitless
    /// reload. Returns whether HAProxy was reloaded.
    pub async fn apply(&self, snapshot: &Snapshot) -> Result<bool, HaproxyError> {
        let mut running = self.running.lock().await;
        let rendered = Self::render(&self.settings, &snapshot.translation.config);
        if rendered == running.rendered {
            return Ok(false);
        }
        let candidate = self.settings.dir.join("haproxy.cfg.new");
        Self::check(&self.settings, &candidate, &rendered).await?;
        std::fs::rename(&candidate, self.config_path())
            .map_err(write_error(&self.config_path()))?;
        let pid = running
            .master
            .id()
            .ok_or_else(|| HaproxyError::Signal("the haproxy master has exited".into()))?;
        let pid = nix::unistd::Pid::from_raw(
            i32::try_from(pid).map_err(|_| HaproxyError::Signal(format!("pid {pid}")))?,
        );
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR2)
            .map_err(|err| HaproxyError::Signal(err.to_string()))?;
        running.rendered = rendered;
        tracing::info!("haproxy reloaded");
        Ok(true)
    }

    /// Applies every snapshot `snapshots` carries until the sender is gone.
    pub async fn follow(self, mut snapshots: watch::Receiver<Arc<Snapshot>>) {
        loop {
            let snapshot = snapshots.borrow_and_update().clone();
            if let Err(err) = self.apply(&snapshot).await {
                tracing::error!("haproxy keeps its current configuration: {err}");
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

/// The pid recorded in `pidfile`, if it holds one.
fn read_pid(pidfile: &Path) -> Option<u32> {
    std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()
}

/// The pid of an HAProxy master left running on `config` by an earlier start: the pid in
/// `pidfile`, if that process is alive (not a zombie) and runs with `config` on its command
/// line (a pid reused by anything else is left alone).
fn stale_master(pidfile: &Path, config: &Path) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt as _;
    let pid = read_pid(pidfile)?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    if stat
        .rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let config = config.as_os_str().as_bytes();
    cmdline
        .split(|&byte| byte == 0)
        .any(|arg| arg == config)
        .then_some(pid)
}
