//! Octavia 19's API and worker with the `amphora` provider on the noop drivers.
//!
//! The `noop_driver` *provider* never moves a status (a load balancer stays `PENDING_CREATE`
//! and every later change answers 409), so the real `amphora` provider runs with
//! `octavia-worker` and noop compute, network, amphora, image and volume drivers: statuses
//! move through `PENDING_*` to `ACTIVE` as in a cloud, in 0.1–1 s, and nothing is booted.
//! The worker needs a certificate authority to exist (a throwaway one made with `openssl`),
//! the API casts to it over RabbitMQ, and both keep their state in MariaDB. The API runs with
//! `auth_strategy = noauth`: the project comes from `X-Project-Id` or a body's `project_id`.
//!
//! The certificate manager is `noop_cert_manager`: Octavia's `barbican_cert_manager` reaches
//! Barbican only through a Keystone session (its API calls `set_acls` with the service user's
//! Keystone id, and its worker loads every TLS listener's certificate when it creates it), so
//! with noauth a `TERMINATED_HTTPS` listener would stay `PENDING_CREATE`. The noop manager takes
//! a container reference as it is; what [Barbican](super::barbican) holds is read by the test.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use super::venv::Venv;
use super::{READY_TIMEOUT, STOP_GRACE, run_to_completion};
use crate::http::http_get;
use crate::port::free_loopback_port;
use crate::rabbitmq::RabbitMq;
use crate::server_process::ServerProcess;
use crate::tool::program;
use crate::{MariaDb, Unavailable};

/// What error messages call this service.
const WHAT: &str = "Octavia";

/// Octavia's database in MariaDB.
const DATABASE: &str = "octavia";

/// The queue `octavia-worker` consumes; the API's casts are lost until it does.
const WORKER_QUEUE: &str = "octavia_provisioning_v2";

/// How many ports to try when another process takes the chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// A running Octavia API and worker; both stopped and the directory removed on drop.
#[derive(Debug)]
pub(crate) struct Octavia {
    // Declared in stop order: the API (no new work), the worker, then the directory.
    api: ServerProcess,
    worker: ServerProcess,
    port: u16,
    dir: TempDir,
}

/// What the configuration file is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) database_url: String,
    pub(crate) transport_url: String,
    pub(crate) port: u16,
    pub(crate) ca_certificate: PathBuf,
    pub(crate) ca_private_key: PathBuf,
    pub(crate) lock_path: PathBuf,
}

impl Octavia {
    /// Make a CA, write the configuration, migrate the database `octavia` of `mariadb`, start
    /// the worker and the API, and wait until the API answers and the worker consumes its
    /// queue.
    pub(crate) fn start(
        venv: &Venv,
        mariadb: &MariaDb,
        rabbitmq: &RabbitMq,
    ) -> Result<Octavia, Unavailable> {
        let dir = tempfile::Builder::new()
            .prefix("nephrite-octavia-")
            .tempdir()
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
            })?;
        let ca_certificate = dir.path().join("ca.pem");
        let ca_private_key = dir.path().join("ca.key");
        make_ca(&ca_certificate, &ca_private_key, dir.path())?;
        let lock_path = dir.path().join("lock");
        let config = dir.path().join("octavia.conf");
        let mut settings = Settings {
            database_url: mariadb.sqlalchemy_url(DATABASE),
            transport_url: rabbitmq.transport_url(),
            port: 0,
            ca_certificate,
            ca_private_key,
            lock_path,
        };
        write_config(&config, &settings)?;
        let mut migrate = venv.script("octavia-db-manage");
        migrate
            .arg("--config-file")
            .arg(&config)
            .args(["upgrade", "head"])
            .current_dir(dir.path());
        let log = dir.path().join("db-manage.log");
        super::migrate(WHAT, venv, mariadb, DATABASE, migrate, &log)?;

        let mut worker = venv.script("octavia-worker");
        worker
            .arg("--config-file")
            .arg(&config)
            .current_dir(dir.path());
        let worker = ServerProcess::spawn(
            "Octavia's worker",
            worker,
            &dir.path().join("worker.log"),
            Signal::TERM,
            STOP_GRACE,
            dir.path(),
        )?;

        let mut attempt = 0;
        let api = loop {
            attempt += 1;
            settings.port = free_loopback_port().map_err(|e| {
                Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}"))
            })?;
            write_config(&config, &settings)?;
            let mut command = venv.script("octavia-api");
            command
                .arg("--config-file")
                .arg(&config)
                .current_dir(dir.path());
            let mut api = ServerProcess::spawn(
                WHAT,
                command,
                &dir.path().join(format!("api-{attempt}.log")),
                Signal::TERM,
                STOP_GRACE,
                dir.path(),
            )?;
            let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, settings.port));
            match api.wait_until_ready(READY_TIMEOUT, || answers(address)) {
                Ok(()) => break api,
                Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
                Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
            }
        };
        let mut octavia = Octavia {
            api,
            worker,
            port: settings.port,
            dir,
        };
        octavia.wait_for_worker(rabbitmq)?;
        Ok(octavia)
    }

    /// Wait until the worker consumes its queue (it may still be importing when the API is up).
    fn wait_for_worker(&mut self, rabbitmq: &RabbitMq) -> Result<(), Unavailable> {
        self.worker
            .wait_until_ready(READY_TIMEOUT, || {
                let consuming = rabbitmq.consumers(WORKER_QUEUE).unwrap_or(0) > 0;
                if !consuming {
                    // Each rabbitmqctl call boots an Erlang VM: do not spin.
                    std::thread::sleep(Duration::from_millis(500));
                }
                consuming
            })
            .map_err(|not_ready| not_ready.into_unavailable("Octavia's worker"))
    }

    /// The API's base URL, `http://127.0.0.1:PORT` (the API is under `/v2/lbaas/`).
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The process ids of the API and the worker's master process.
    pub(crate) fn pids(&self) -> [u32; 2] {
        [self.api.pid(), self.worker.pid()]
    }

    /// The directory holding configuration, CA and logs.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether the API answers `GET /v2/lbaas/providers` with 200.
fn answers(address: SocketAddr) -> bool {
    http_get(address, "/v2/lbaas/providers").is_ok_and(|(status, _)| status == 200)
}

/// A self-signed CA (RSA 2048, two days) for the worker's certificate generator.
fn make_ca(certificate: &Path, key: &Path, dir: &Path) -> Result<(), Unavailable> {
    let openssl = program("openssl", "openssl")?;
    let mut command = Command::new(openssl);
    command
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=nephrite-test-octavia-ca", "-keyout"])
        .arg(key)
        .arg("-out")
        .arg(certificate)
        .current_dir(dir);
    run_to_completion("Octavia's CA (openssl req)", command, &dir.join("ca.log"))
}

fn write_config(path: &Path, settings: &Settings) -> Result<(), Unavailable> {
    std::fs::write(path, config(settings))
        .map_err(|e| Unavailable::failed(WHAT, format!("cannot write {}: {e}", path.display())))
}

/// The `octavia.conf` for `settings`.
pub(crate) fn config(settings: &Settings) -> String {
    let Settings {
        database_url,
        transport_url,
        port,
        ca_certificate,
        ca_private_key,
        lock_path,
    } = settings;
    let ca_certificate = ca_certificate.display();
    let ca_private_key = ca_private_key.display();
    let lock_path = lock_path.display();
    format!(
        "[DEFAULT]
transport_url = {transport_url}
use_stderr = true

[database]
connection = {database_url}

[api_settings]
auth_strategy = noauth
bind_host = 127.0.0.1
bind_port = {port}
enabled_provider_drivers = amphora:The Octavia Amphora driver (noop drivers).
default_provider_driver = amphora

[controller_worker]
amphora_driver = amphora_noop_driver
compute_driver = compute_noop_driver
network_driver = network_noop_driver
image_driver = image_noop_driver
volume_driver = volume_noop_driver
loadbalancer_topology = SINGLE
workers = 1
client_ca = {ca_certificate}

[certificates]
cert_manager = noop_cert_manager
cert_generator = local_cert_generator
ca_certificate = {ca_certificate}
ca_private_key = {ca_private_key}

[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 0

[oslo_concurrency]
lock_path = {lock_path}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_runs_the_amphora_provider_on_noop_drivers_without_keystone() {
        let text = config(&Settings {
            database_url: "mysql+pymysql://root@localhost/octavia?unix_socket=/s".to_owned(),
            transport_url: "rabbit://guest:guest@127.0.0.1:5672/".to_owned(),
            port: 9876,
            ca_certificate: PathBuf::from("/d/ca.pem"),
            ca_private_key: PathBuf::from("/d/ca.key"),
            lock_path: PathBuf::from("/d/lock"),
        });
        for line in [
            "connection = mysql+pymysql://root@localhost/octavia?unix_socket=/s",
            "transport_url = rabbit://guest:guest@127.0.0.1:5672/",
            "bind_port = 9876",
            "auth_strategy = noauth",
            "default_provider_driver = amphora",
            "compute_driver = compute_noop_driver",
            "network_driver = network_noop_driver",
            "amphora_driver = amphora_noop_driver",
            "client_ca = /d/ca.pem",
            "cert_manager = noop_cert_manager",
            "ca_private_key = /d/ca.key",
            "heartbeat_timeout_threshold = 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }
}
