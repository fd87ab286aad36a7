//! A throwaway single-member etcd for one test.
//!
//! Debian's `etcd-server` (`etcd`), its data in a temporary directory, client and peer ports
//! picked free on the address asked for, ready once `GET /health` answers `"health":"true"`.
//! It can run in a named network namespace (`ip netns exec NAME etcd ...`); the port choice
//! and the health checks then happen inside that namespace too.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use crate::Unavailable;
use crate::http::http_get;
use crate::netns::run_in_netns;
use crate::port::free_port_on;
use crate::privilege::running_as_root;
use crate::server_process::ServerProcess;
use crate::tool::{Tool, tool};

/// What error messages call this service.
const WHAT: &str = "etcd";

/// The member name; the cluster has only this member.
const MEMBER: &str = "nephrite-test";

/// How many port pairs to try when another process takes a chosen port first.
const PORT_ATTEMPTS: usize = 5;

/// How long etcd may take to elect itself and report healthy (generous: CI is 2 shared cores).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long etcd may take to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A running throwaway etcd; stopped and its data removed on drop.
///
/// ```no_run
/// use nephrite_test_services::Etcd;
/// let etcd = match Etcd::start() {
///     Ok(etcd) => etcd,
///     Err(e) => return e.skip("my_test"),
/// };
/// let endpoint = etcd.endpoint(); // http://127.0.0.1:PORT
/// # let _ = endpoint;
/// ```
#[derive(Debug)]
pub struct Etcd {
    // Declared before `dir`: the server stops before its directory is removed.
    process: ServerProcess,
    client: SocketAddr,
    peer: SocketAddr,
    netns: Option<String>,
    dir: TempDir,
}

impl Etcd {
    /// Start etcd on 127.0.0.1 and wait until it is healthy.
    pub fn start() -> Result<Etcd, Unavailable> {
        Etcd::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// Start etcd listening on `ip`, an address of this host in the caller's current network
    /// namespace, and wait until it is healthy.
    pub fn start_on(ip: IpAddr) -> Result<Etcd, Unavailable> {
        launch(ip, None)
    }

    /// Start etcd inside the named network namespace (`ip netns add NAME`) listening on `ip`,
    /// an address inside that namespace, and wait until it is healthy. Needs root.
    pub fn start_in_netns(netns: &str, ip: IpAddr) -> Result<Etcd, Unavailable> {
        if !running_as_root() {
            return Err(Unavailable::not_root(format!(
                "etcd runs via `ip netns exec {netns}`"
            )));
        }
        launch(ip, Some(netns))
    }

    /// The client URL, e.g. `http://127.0.0.1:PORT` (IPv6 addresses in brackets).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client)
    }

    /// The client address.
    pub fn client_addr(&self) -> SocketAddr {
        self.client
    }

    /// The peer (raft) address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The network namespace etcd runs in, when started with [`Etcd::start_in_netns`].
    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// The server's process id (the `etcd` process itself).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The directory holding the data and logs (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn launch(ip: IpAddr, netns: Option<&str>) -> Result<Etcd, Unavailable> {
    let etcd = tool(Tool::EtcdServer)?;
    let ip_command = match netns {
        Some(_) => Some(tool(Tool::Ip)?),
        None => None,
    };
    let dir = tempfile::Builder::new()
        .prefix("nephrite-etcd-")
        .tempdir()
        .map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
        })?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (client, peer) = run_in_netns(netns, || {
            Ok::<_, std::io::Error>((free_port_on(ip)?, free_port_on(ip)?))
        })
        .map_err(|e| Unavailable::failed(WHAT, e))?
        .map_err(|e| {
            Unavailable::failed(
                WHAT,
                format!(
                    "no free port on {ip} (is it an address of this host{}?): {e}",
                    netns
                        .map(|n| format!(" in network namespace {n}"))
                        .unwrap_or_default()
                ),
            )
        })?;
        let client = SocketAddr::new(ip, client);
        let peer = SocketAddr::new(ip, peer);
        let data = dir.path().join(format!("data-{attempt}"));
        let log = dir.path().join(format!("etcd-{attempt}.log"));

        let mut command = match (&ip_command, netns) {
            (Some(ip_command), Some(netns)) => {
                let mut c = Command::new(ip_command);
                c.args(["netns", "exec", netns]).arg(&etcd);
                c
            }
            _ => Command::new(&etcd),
        };
        let client_url = format!("http://{client}");
        let peer_url = format!("http://{peer}");
        command
            .args(["--name", MEMBER, "--data-dir"])
            .arg(&data)
            .args([
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("{MEMBER}={peer_url}")])
            .args([
                "--initial-cluster-token",
                &format!("{MEMBER}-{}", client.port()),
            ])
            .args(["--initial-cluster-state", "new"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .current_dir(dir.path());
        neutral_environment(&mut command);

        let mut process =
            ServerProcess::spawn(WHAT, command, &log, Signal::TERM, STOP_GRACE, dir.path())?;
        let ready = run_in_netns(netns, || {
            process.wait_until_ready(READY_TIMEOUT, || healthy(client))
        })
        .map_err(|e| Unavailable::failed(WHAT, e))?;
        match ready {
            Ok(()) => {
                return Ok(Etcd {
                    process,
                    client,
                    peer,
                    netns: netns.map(str::to_owned),
                    dir,
                });
            }
            Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
            Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
        }
    }
}

/// etcd reads every `ETCD_*` variable as a flag and refuses to start when one conflicts with a
/// command-line flag, so none leak in from the test's environment. On arm64, etcd 3.4 refuses
/// to start unless told the architecture is acceptable.
fn neutral_environment(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ETCD_") {
            command.env_remove(key);
        }
    }
    if std::env::consts::ARCH == "aarch64" {
        command.env("ETCD_UNSUPPORTED_ARCH", "arm64");
    }
}

/// Whether `GET /health` on `client` answers 200 with `"health":"true"`.
fn healthy(client: SocketAddr) -> bool {
    http_get(client, "/health").is_ok_and(|(status, body)| status == 200 && health_is_true(&body))
}

/// Whether an etcd `/health` body says healthy (`{"health":"true"...}`, any spacing).
pub(crate) fn health_is_true(body: &str) -> bool {
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    compact.contains("\"health\":\"true\"")
}

#[cfg(test)]
mod tests;
