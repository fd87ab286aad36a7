//! Keystone 30, the real identity service, for authentication tests.
//!
//! Octavia and Neutron run `noauth` here (Octavia's own Neutron client cannot use keystoneauth's
//! `none` plugin), so token handling is tested against Keystone alone: password and
//! application-credential tokens, the service catalog, a revoked token answering 401.
//! `keystone-manage` migrates a MariaDB database, creates the fernet and credential keys in the
//! temporary directory and bootstraps an `admin` user and project (domain `Default`) with the
//! identity endpoint in region `RegionOne`; the WSGI app `keystone.wsgi.api` runs under
//! [`gunicorn`](super::gunicorn) as Neutron's is.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::process::Command;

use rustix::process::Signal;
use tempfile::TempDir;

use super::venv::{self, Venv};
use super::{READY_TIMEOUT, STOP_GRACE, joined, run_to_completion};
use crate::http::http_get;
use crate::port::free_loopback_port;
use crate::server_process::ServerProcess;
use crate::{MariaDb, Unavailable};

/// What error messages call this service.
const WHAT: &str = "Keystone";

/// The bootstrapped administrator's password.
const ADMIN_PASSWORD: &str = "nephrite-admin";

/// A running Keystone on its own MariaDB; both stopped on drop.
///
/// ```no_run
/// use nephrite_test_services::Keystone;
/// let keystone = match Keystone::start() {
///     Ok(k) => k,
///     Err(e) => return e.skip("my_test"),
/// };
/// let auth_url = keystone.auth_url(); // http://127.0.0.1:PORT/v3
/// let (user, password) = (keystone.admin_user(), keystone.admin_password());
/// # let _ = (auth_url, user, password);
/// ```
#[derive(Debug)]
pub struct Keystone {
    // Declared in stop order: Keystone, then its database, then the directory.
    server: ServerProcess,
    mariadb: MariaDb,
    port: u16,
    dir: TempDir,
}

impl Keystone {
    /// Install the environment when missing, start MariaDB, migrate, make keys, bootstrap the
    /// `admin` user, start the API and wait until `GET /v3` answers.
    pub fn start() -> Result<Keystone, Unavailable> {
        let (venv, mariadb) = std::thread::scope(|s| {
            let venv = s.spawn(|| venv::ensure(venv::KEYSTONE));
            let mariadb = s.spawn(MariaDb::start);
            (
                joined(venv.join(), "Keystone's Python environment"),
                joined(mariadb.join(), "MariaDB"),
            )
        });
        let (venv, mariadb) = (venv?, mariadb?);
        let database = mariadb
            .create_database("keystone")
            .map_err(|e| Unavailable::failed("MariaDB", e.to_string()))?;
        let dir = tempfile::Builder::new()
            .prefix("nephrite-keystone-")
            .tempdir()
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
            })?;
        let port = free_loopback_port()
            .map_err(|e| Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}")))?;
        let config = dir.path().join("keystone.conf");
        std::fs::write(&config, self::config(&database, dir.path())).map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot write {}: {e}", config.display()))
        })?;

        let (user, group) = (id("-un")?, id("-gn")?);
        let url = format!("http://127.0.0.1:{port}/v3");
        let steps: [&[&str]; 4] = [
            &["db_sync"],
            &[
                "fernet_setup",
                "--keystone-user",
                &user,
                "--keystone-group",
                &group,
            ],
            &[
                "credential_setup",
                "--keystone-user",
                &user,
                "--keystone-group",
                &group,
            ],
            &[
                "bootstrap",
                "--bootstrap-password",
                ADMIN_PASSWORD,
                "--bootstrap-admin-url",
                &url,
                "--bootstrap-internal-url",
                &url,
                "--bootstrap-public-url",
                &url,
                "--bootstrap-region-id",
                "RegionOne",
            ],
        ];
        for (i, step) in steps.iter().enumerate() {
            let mut command = manage(&venv, &config, dir.path());
            command.args(*step);
            let log = dir.path().join(format!("manage-{i}.log"));
            if step[0] == "db_sync" {
                super::migrate(WHAT, &venv, &mariadb, "keystone", command, &log)?;
            } else {
                run_to_completion(WHAT, command, &log)?;
            }
        }

        let mut command = super::gunicorn(WHAT, &venv, dir.path(), "keystone.wsgi.api", port)?;
        command.env("OS_KEYSTONE_CONFIG_FILES", &config);
        let mut server = ServerProcess::spawn(
            WHAT,
            command,
            &dir.path().join("gunicorn.log"),
            Signal::QUIT,
            STOP_GRACE,
            dir.path(),
        )?;
        let address = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        server
            .wait_until_ready(READY_TIMEOUT, || {
                http_get(address, "/v3").is_ok_and(|(status, _)| status == 200)
            })
            .map_err(|not_ready| not_ready.into_unavailable(WHAT))?;
        Ok(Keystone {
            server,
            mariadb,
            port,
            dir,
        })
    }

    /// The `auth_url`: `http://127.0.0.1:PORT/v3`.
    pub fn auth_url(&self) -> String {
        format!("http://127.0.0.1:{}/v3", self.port)
    }

    /// The bootstrapped administrator (`admin`, domain `Default`, project `admin`).
    pub fn admin_user(&self) -> &'static str {
        "admin"
    }

    /// The administrator's password.
    pub fn admin_password(&self) -> &'static str {
        ADMIN_PASSWORD
    }

    /// The process ids of gunicorn's master and of MariaDB.
    pub fn pids(&self) -> [u32; 2] {
        [self.server.pid(), self.mariadb.pid()]
    }

    /// The directory holding configuration, keys and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// `keystone-manage --config-file CONFIG …` in `dir`.
fn manage(venv: &Venv, config: &Path, dir: &Path) -> Command {
    let mut command = venv.script("keystone-manage");
    command.arg("--config-file").arg(config).current_dir(dir);
    command
}

/// `id -un` / `id -gn`: the account fernet keys are handed to.
fn id(flag: &str) -> Result<String, Unavailable> {
    let out = Command::new("id")
        .arg(flag)
        .output()
        .map_err(|e| Unavailable::failed(WHAT, format!("cannot run id {flag}: {e}")))?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || name.is_empty() {
        return Err(Unavailable::failed(
            WHAT,
            format!("id {flag} {}: no account name", out.status),
        ));
    }
    Ok(name)
}

/// The `keystone.conf`: fernet tokens valid an hour, keys in `dir`.
pub(crate) fn config(database_url: &str, dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "[DEFAULT]
use_stderr = true

[database]
connection = {database_url}

[token]
provider = fernet
expiration = 3600

[fernet_tokens]
key_repository = {dir}/fernet-keys

[fernet_receipts]
key_repository = {dir}/fernet-receipts

[credential]
key_repository = {dir}/credential-keys
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_keeps_keys_in_the_directory_and_state_in_mariadb() {
        let text = config("mysql+pymysql://root@localhost/keystone", Path::new("/d"));
        for line in [
            "connection = mysql+pymysql://root@localhost/keystone",
            "provider = fernet",
            "key_repository = /d/fernet-keys",
            "key_repository = /d/credential-keys",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }
}
