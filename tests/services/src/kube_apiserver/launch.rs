//! Starting etcd, then kube-apiserver on it, in one state directory, and waiting until the
//! API answers `/readyz`.
//!
//! Written once for the two ways the pair runs: owned by a test (stopped on drop, watched by
//! the crate's watchdog) and detached for `cargo xtask kube up` (left running, stopped later
//! from its pid files). The difference is only how a process is spawned, so that is the one
//! thing the [`Spawner`] supplies.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use super::KubeEndpoint;
use super::binaries::{KubeBinaries, WHAT};
use super::flags::{EtcdPorts, apiserver_args, etcd_args};
use super::https::HttpsProbe;
use super::pki::{ADMIN_USER, Pki};
use crate::Unavailable;
use crate::etcd::health_is_true;
use crate::http::http_get;
use crate::port::says_address_in_use;
use crate::server_process::{NotReady, ServerProcess, log_tail};

/// How many times to pick fresh ports when another process takes a chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// How long etcd may take to elect itself and report healthy.
const ETCD_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long kube-apiserver may take to answer `/readyz` (its post-start hooks install the
/// RBAC bootstrap policy; generous, CI is 2 shared cores).
const APISERVER_READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(100);

/// A process the launcher started: all it needs to know is whether it has exited.
pub(crate) trait Started {
    /// The exit status, when the process has already exited.
    fn exited(&mut self) -> Option<ExitStatus>;
}

impl Started for ServerProcess {
    fn exited(&mut self) -> Option<ExitStatus> {
        ServerProcess::exited(self)
    }
}

/// How the launcher starts a process, with stdout and stderr appended to `log`; a process is
/// stopped when its handle drops until the caller decides otherwise.
pub(crate) trait Spawner {
    /// The handle of a started process.
    type Process: Started;
    /// Start `command` as `what`; `state` is the directory to clean up if the caller dies.
    fn spawn(
        &mut self,
        what: &str,
        command: Command,
        log: &Path,
        state: &Path,
    ) -> Result<Self::Process, Unavailable>;
}

/// A pair that answered `/readyz`.
#[derive(Debug)]
pub(crate) struct Launched<P> {
    /// kube-apiserver (stop it first).
    pub(crate) apiserver: P,
    /// etcd under it.
    pub(crate) etcd: P,
    /// How to reach the API.
    pub(crate) endpoint: KubeEndpoint,
    /// Where etcd listens.
    pub(crate) etcd_ports: EtcdPorts,
    /// From the first spawn to `/readyz` answering 200.
    pub(crate) started_in: Duration,
}

/// The state directory's files, relative to it.
pub(crate) fn etcd_log(state: &Path) -> PathBuf {
    state.join("etcd.log")
}

/// kube-apiserver's log in `state`.
pub(crate) fn apiserver_log(state: &Path) -> PathBuf {
    state.join("kube-apiserver.log")
}

/// Make fresh credentials in `state/pki`, start etcd (data in `state/etcd`) and kube-apiserver
/// on free loopback ports, and wait until the API is ready.
pub(crate) fn launch<S: Spawner>(
    spawner: &mut S,
    binaries: &KubeBinaries,
    state: &Path,
) -> Result<Launched<S::Process>, Unavailable> {
    let began = Instant::now();
    let pki_dir = state.join("pki");
    std::fs::create_dir_all(&pki_dir).map_err(|e| {
        Unavailable::failed(WHAT, format!("cannot create {}: {e}", pki_dir.display()))
    })?;
    let pki = Pki::create(&pki_dir).map_err(|e| Unavailable::failed(WHAT, e.to_string()))?;
    let probe =
        HttpsProbe::trusting(&pki.ca_pem).map_err(|e| Unavailable::failed(WHAT, e.to_string()))?;

    let (mut etcd, etcd_ports) = start_etcd(spawner, binaries, state)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let [secure] = free_loopback_ports::<1>()?;
        let mut command = Command::new(&binaries.kube_apiserver);
        command
            .args(apiserver_args(secure, etcd_ports.client, &pki, &pki_dir))
            .current_dir(state);
        let log = apiserver_log(state);
        let mut apiserver = spawner.spawn(WHAT, command, &log, state)?;
        let ready = wait_until_ready(&mut apiserver, WHAT, &log, APISERVER_READY_TIMEOUT, || {
            if etcd.exited().is_some() {
                return false;
            }
            probe
                .get(secure, &pki.admin_token, "/readyz")
                .is_ok_and(|(status, _)| status == 200)
        });
        match ready {
            Ok(()) => {
                return Ok(Launched {
                    apiserver,
                    etcd,
                    endpoint: KubeEndpoint {
                        addr: secure,
                        ca_pem: pki.ca_pem,
                        admin_user: ADMIN_USER.to_owned(),
                        admin_token: pki.admin_token,
                    },
                    etcd_ports,
                    started_in: began.elapsed(),
                });
            }
            Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
            Err(not_ready) => {
                let etcd_state = match etcd.exited() {
                    Some(status) => format!(
                        "\netcd exited ({status}); last lines of its log:\n{}",
                        log_tail(&etcd_log(state))
                    ),
                    None => String::new(),
                };
                return Err(Unavailable::failed(
                    WHAT,
                    format!("{}{etcd_state}", not_ready.detail),
                ));
            }
        }
    }
}

/// Start etcd on free loopback ports, retrying when a port was taken meanwhile.
fn start_etcd<S: Spawner>(
    spawner: &mut S,
    binaries: &KubeBinaries,
    state: &Path,
) -> Result<(S::Process, EtcdPorts), Unavailable> {
    const ETCD: &str = "etcd (for kube-apiserver)";
    let mut attempt = 0;
    loop {
        attempt += 1;
        let [client, peer] = free_loopback_ports::<2>()?;
        let ports = EtcdPorts { client, peer };
        let mut command = Command::new(&binaries.etcd);
        command
            .args(etcd_args(ports, &state.join(format!("etcd-{attempt}"))))
            .current_dir(state);
        // etcd reads every ETCD_* variable as a flag and refuses conflicts with the command line.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("ETCD_") {
                command.env_remove(key);
            }
        }
        let log = etcd_log(state);
        let mut etcd = spawner.spawn(ETCD, command, &log, state)?;
        let ready = wait_until_ready(&mut etcd, ETCD, &log, ETCD_READY_TIMEOUT, || {
            http_get(client, "/health")
                .is_ok_and(|(status, body)| status == 200 && health_is_true(&body))
        });
        match ready {
            Ok(()) => return Ok((etcd, ports)),
            Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
            Err(not_ready) => return Err(not_ready.into_unavailable(ETCD)),
        }
    }
}

/// `N` distinct TCP ports on 127.0.0.1 that were free a moment ago (held together while
/// chosen, so they differ).
fn free_loopback_ports<const N: usize>() -> Result<[SocketAddr; N], Unavailable> {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<_, _>>()
        .map_err(|e| Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}")))?;
    let mut addrs = [SocketAddr::from((Ipv4Addr::LOCALHOST, 0)); N];
    for (addr, listener) in addrs.iter_mut().zip(&listeners) {
        *addr = listener
            .local_addr()
            .map_err(|e| Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}")))?;
    }
    Ok(addrs)
}

/// Poll `ready` until it is true, the process exits, or `timeout` passes.
fn wait_until_ready<P: Started>(
    process: &mut P,
    what: &str,
    log: &Path,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), NotReady> {
    let deadline = Instant::now() + timeout;
    let not_ready = |how: String| {
        let tail = log_tail(log);
        NotReady {
            address_in_use: says_address_in_use(&tail),
            detail: format!("{what} {how}; last lines of {}:\n{tail}", log.display()),
        }
    };
    loop {
        if let Some(status) = process.exited() {
            return Err(not_ready(format!("exited during start-up ({status})")));
        }
        if ready() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(not_ready(format!("not ready after {timeout:?}")));
        }
        thread::sleep(POLL);
    }
}
