//! A throwaway RabbitMQ node on loopback, for Octavia's API to reach its worker.
//!
//! Octavia's API casts every change to `octavia-worker` over oslo.messaging; the in-process
//! `fake://` transport never reaches another process and the Redis one crashes the worker, so
//! a real broker is needed. Debian's `rabbitmq-server`, run directly from
//! `/usr/lib/rabbitmq/bin` (the `/usr/sbin` wrappers switch to the `rabbitmq` account and the
//! system directories): a private `epmd` on a free loopback port, then the node with its
//! AMQP, distribution and epmd ports free on 127.0.0.1, its database, logs, cookie (`HOME`)
//! and plugin list in a temporary directory, and no system configuration read.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use crate::Unavailable;
use crate::port::free_loopback_port;
use crate::server_process::ServerProcess;
use crate::tool::{find_executable, program};

/// What error messages call this service.
const WHAT: &str = "RabbitMQ";

/// The Debian package with the broker.
const PACKAGE: &str = "rabbitmq-server";

/// Where Debian keeps the real scripts (the `/usr/sbin` ones are `su` wrappers).
const SCRIPTS: &str = "/usr/lib/rabbitmq/bin";

/// How many port sets to try when another process takes a chosen port first.
const PORT_ATTEMPTS: usize = 5;

/// How long the node may take to boot (5–7 s on an idle 2-core machine).
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How long the node may take to stop after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// A running throwaway RabbitMQ node and its `epmd`; stopped and the directory removed on drop.
///
/// ```no_run
/// use nephrite_test_services::RabbitMq;
/// let mq = match RabbitMq::start() {
///     Ok(mq) => mq,
///     Err(e) => return e.skip("my_test"),
/// };
/// let url = mq.transport_url(); // rabbit://guest:guest@127.0.0.1:PORT/
/// # let _ = url;
/// ```
#[derive(Debug)]
pub struct RabbitMq {
    // Declared in stop order: the node, then epmd, then the directory.
    node: ServerProcess,
    epmd: ServerProcess,
    ports: Ports,
    ctl: PathBuf,
    log: PathBuf,
    dir: TempDir,
}

/// The loopback ports one node uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ports {
    amqp: u16,
    distribution: u16,
    epmd: u16,
}

impl RabbitMq {
    /// Start `epmd` and a RabbitMQ node on free loopback ports and wait until the node accepts
    /// AMQP connections.
    ///
    /// Err is [`Unavailable`]: not installed (naming `rabbitmq-server`), or installed but the
    /// node failed to start (with its log's tail).
    pub fn start() -> Result<RabbitMq, Unavailable> {
        let scripts = [PathBuf::from(SCRIPTS)];
        let server = find_executable("rabbitmq-server", &scripts).ok_or_else(|| {
            Unavailable::not_installed("RabbitMQ (rabbitmq-server)", PACKAGE, scripts.to_vec())
        })?;
        let ctl = find_executable("rabbitmqctl", &scripts).ok_or_else(|| {
            Unavailable::not_installed("RabbitMQ (rabbitmqctl)", PACKAGE, scripts.to_vec())
        })?;
        let epmd_program = program("epmd", PACKAGE)?;
        let dir = tempfile::Builder::new()
            .prefix("nephrite-rabbitmq-")
            .tempdir()
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
            })?;
        let plugins = dir.path().join("enabled_plugins");
        std::fs::write(&plugins, "[].\n").map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot write {}: {e}", plugins.display()))
        })?;

        let mut attempt = 0;
        loop {
            attempt += 1;
            let ports = Ports {
                amqp: free_port()?,
                distribution: free_port()?,
                epmd: free_port()?,
            };
            let epmd_log = dir.path().join(format!("epmd-{attempt}.log"));
            let mut command = Command::new(&epmd_program);
            command
                .args(["-address", "127.0.0.1", "-port", &ports.epmd.to_string()])
                .current_dir(dir.path());
            let mut epmd = ServerProcess::spawn(
                "RabbitMQ's epmd",
                command,
                &epmd_log,
                Signal::TERM,
                STOP_GRACE,
                dir.path(),
            )?;
            match epmd.wait_until_ready(READY_TIMEOUT, || accepts(ports.epmd)) {
                Ok(()) => {}
                Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
                Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
            }

            let log = dir.path().join(format!("rabbitmq-{attempt}.log"));
            let mut command = Command::new(&server);
            node_environment(&mut command, dir.path(), ports, attempt);
            let mut node =
                ServerProcess::spawn(WHAT, command, &log, Signal::TERM, STOP_GRACE, dir.path())?;
            match node.wait_until_ready(READY_TIMEOUT, || accepts(ports.amqp)) {
                Ok(()) => {
                    return Ok(RabbitMq {
                        node,
                        epmd,
                        ports,
                        ctl,
                        log,
                        dir,
                    });
                }
                Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
                Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
            }
        }
    }

    /// The oslo.messaging transport URL: `rabbit://guest:guest@127.0.0.1:PORT/`.
    pub fn transport_url(&self) -> String {
        format!("rabbit://guest:guest@127.0.0.1:{}/", self.ports.amqp)
    }

    /// The AMQP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.ports.amqp
    }

    /// How many consumers the queue `queue` has (0 when it does not exist yet), through
    /// `rabbitmqctl list_queues`; None when `rabbitmqctl` fails.
    pub fn consumers(&self, queue: &str) -> Option<u64> {
        let mut command = Command::new(&self.ctl);
        node_environment(&mut command, self.dir.path(), self.ports, 0);
        let out = command
            .args(["--quiet", "list_queues", "name", "consumers"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        Some(consumers_of(&String::from_utf8_lossy(&out.stdout), queue))
    }

    /// The node's log (its standard output: `RABBITMQ_LOGS=-`).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The process id of the node's start script (which stops the node on SIGTERM).
    pub fn pid(&self) -> u32 {
        self.node.pid()
    }

    /// The process id of the node's `epmd`.
    pub fn epmd_pid(&self) -> u32 {
        self.epmd.pid()
    }

    /// The directory holding the node's database, logs and cookie (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Everything that points a `rabbitmq-server` or `rabbitmqctl` at the private node and away
/// from `/etc/rabbitmq` and `/var/lib/rabbitmq`. `attempt` keeps a retried node's files apart.
fn node_environment(command: &mut Command, dir: &Path, ports: Ports, attempt: usize) {
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("RABBITMQ_") || key_text.starts_with("ERL_") {
            command.env_remove(key);
        }
    }
    let path = |name: &str| dir.join(name).into_os_string();
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env(
            "RABBITMQ_NODENAME",
            format!("nephrite-{}@localhost", ports.amqp),
        )
        .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
        .env("RABBITMQ_NODE_PORT", ports.amqp.to_string())
        .env("RABBITMQ_DIST_PORT", ports.distribution.to_string())
        .env("ERL_EPMD_ADDRESS", "127.0.0.1")
        .env("ERL_EPMD_PORT", ports.epmd.to_string())
        .env(
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
            "-kernel inet_dist_use_interface {127,0,0,1}",
        )
        .env("RABBITMQ_MNESIA_BASE", path(&format!("mnesia-{attempt}")))
        .env("RABBITMQ_LOG_BASE", path("log"))
        .env("RABBITMQ_LOGS", "-")
        .env("RABBITMQ_PID_FILE", path("rabbitmq.pid"))
        .env("RABBITMQ_ENABLED_PLUGINS_FILE", path("enabled_plugins"))
        .env("RABBITMQ_CONFIG_FILE", path("rabbitmq.conf"))
        .env("RABBITMQ_ADVANCED_CONFIG_FILE", path("advanced.config"))
        .env("RABBITMQ_CONF_ENV_FILE", path("rabbitmq-env.conf"));
}

/// The consumer count of `queue` in `rabbitmqctl list_queues name consumers` output
/// (tab-separated lines), 0 when the queue is not listed.
pub(crate) fn consumers_of(list: &str, queue: &str) -> u64 {
    list.lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(name, _)| *name == queue)
        .and_then(|(_, count)| count.trim().parse().ok())
        .unwrap_or(0)
}

fn free_port() -> Result<u16, Unavailable> {
    free_loopback_port()
        .map_err(|e| Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}")))
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
fn accepts(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
        Duration::from_secs(1),
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::consumers_of;

    #[test]
    fn consumers_are_read_from_the_queue_listing() {
        let list = "octavia_provisioning_v2\t1\nreply_abc\t0\n";
        assert_eq!(consumers_of(list, "octavia_provisioning_v2"), 1);
        assert_eq!(consumers_of(list, "reply_abc"), 0);
        assert_eq!(consumers_of(list, "missing"), 0);
        assert_eq!(consumers_of("", "octavia_provisioning_v2"), 0);
    }
}
