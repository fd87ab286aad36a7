//! Neutron 29's API: the WSGI application `neutron.wsgi.api` under gunicorn, ML2 and the
//! router plugin, no agents.
//!
//! Neutron 29 has no eventlet `neutron-server` any more; the API is a WSGI app configured
//! through `OS_NEUTRON_CONFIG_FILES`, served by [`gunicorn`](super::gunicorn). `transport_url = fake://` and no agents: ports stay `DOWN`, routers are
//! `ACTIVE`, and the floating-IP reachability check (`ExternalGatewayForFloatingIPNotFound`) is
//! Neutron's own. `auth_strategy = noauth`: every create body must carry `project_id`.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;

use rustix::process::Signal;
use tempfile::TempDir;

use super::venv::Venv;
use super::{READY_TIMEOUT, STOP_GRACE};
use crate::http::http_get;
use crate::port::free_loopback_port;
use crate::server_process::ServerProcess;
use crate::{MariaDb, Unavailable};

/// What error messages call this service.
const WHAT: &str = "Neutron";

/// Neutron's database in MariaDB.
const DATABASE: &str = "neutron";

/// How many ports to try when another process takes the chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// A running Neutron API; stopped and the directory removed on drop.
#[derive(Debug)]
pub(crate) struct Neutron {
    server: ServerProcess,
    port: u16,
    dir: TempDir,
}

impl Neutron {
    /// Write the configuration, migrate the database `neutron` of `mariadb`, start gunicorn
    /// and wait until `GET /v2.0/networks` answers.
    pub(crate) fn start(venv: &Venv, mariadb: &MariaDb) -> Result<Neutron, Unavailable> {
        let database_url = mariadb.sqlalchemy_url(DATABASE);
        let dir = tempfile::Builder::new()
            .prefix("nephrite-neutron-")
            .tempdir()
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
            })?;
        let paste = dir.path().join("api-paste.ini");
        let shipped = venv.dir().join("etc").join("neutron").join("api-paste.ini");
        std::fs::copy(&shipped, &paste).map_err(|e| {
            Unavailable::failed(
                WHAT,
                format!(
                    "cannot copy {} to {}: {e}",
                    shipped.display(),
                    paste.display()
                ),
            )
        })?;
        let config = dir.path().join("neutron.conf");
        let text = self::config(&database_url, &paste, &dir.path().join("lock"));
        std::fs::write(&config, text).map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot write {}: {e}", config.display()))
        })?;
        let mut migrate = venv.script("neutron-db-manage");
        migrate
            .arg("--config-file")
            .arg(&config)
            .args(["upgrade", "heads"])
            .current_dir(dir.path());
        let log = dir.path().join("db-manage.log");
        super::migrate(WHAT, venv, mariadb, DATABASE, migrate, &log)?;

        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_loopback_port().map_err(|e| {
                Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}"))
            })?;
            let mut command = super::gunicorn(WHAT, venv, dir.path(), "neutron.wsgi.api", port)?;
            command.env("OS_NEUTRON_CONFIG_FILES", &config);
            // QUIT: gunicorn's quick shutdown (TERM waits for requests up to 30 s).
            let mut server = ServerProcess::spawn(
                WHAT,
                command,
                &dir.path().join(format!("gunicorn-{attempt}.log")),
                Signal::QUIT,
                STOP_GRACE,
                dir.path(),
            )?;
            let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
            match server.wait_until_ready(READY_TIMEOUT, || answers(address)) {
                Ok(()) => return Ok(Neutron { server, port, dir }),
                Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
                Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
            }
        }
    }

    /// The API's base URL, `http://127.0.0.1:PORT` (the API is under `/v2.0/`).
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The process id of gunicorn's master.
    pub(crate) fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// The directory holding configuration and logs.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether the API answers `GET /v2.0/networks` with 200.
fn answers(address: SocketAddr) -> bool {
    http_get(address, "/v2.0/networks").is_ok_and(|(status, _)| status == 200)
}

/// The `neutron.conf`: ML2 with flat, VLAN and VXLAN networks, the router plugin, no agents,
/// no Nova, no Keystone.
pub(crate) fn config(database_url: &str, api_paste: &Path, lock_path: &Path) -> String {
    let api_paste = api_paste.display();
    let lock_path = lock_path.display();
    format!(
        "[DEFAULT]
core_plugin = ml2
service_plugins = router
auth_strategy = noauth
transport_url = fake://
allow_overlapping_ips = True
dhcp_agent_notification = False
notify_nova_on_port_status_changes = False
notify_nova_on_port_data_changes = False
api_paste_config = {api_paste}
use_stderr = true

[database]
connection = {database_url}

[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
mechanism_drivers = openvswitch
extension_drivers = port_security

[ml2_type_flat]
flat_networks = *

[ml2_type_vlan]
network_vlan_ranges = physnet1:100:200

[ml2_type_vxlan]
vni_ranges = 1:1000

[oslo_concurrency]
lock_path = {lock_path}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_runs_ml2_and_routers_without_agents_or_keystone() {
        let text = config(
            "mysql+pymysql://root@localhost/neutron?unix_socket=/s",
            Path::new("/v/etc/neutron/api-paste.ini"),
            Path::new("/d/lock"),
        );
        for line in [
            "connection = mysql+pymysql://root@localhost/neutron?unix_socket=/s",
            "core_plugin = ml2",
            "service_plugins = router",
            "auth_strategy = noauth",
            "transport_url = fake://",
            "api_paste_config = /v/etc/neutron/api-paste.ini",
            "flat_networks = *",
            "lock_path = /d/lock",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }
}
