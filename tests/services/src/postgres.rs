//! A throwaway PostgreSQL server for one test.
//!
//! Debian's `postgresql` package: `initdb` and `postgres` of the highest major version under
//! `/usr/lib/postgresql/*/bin`, a fresh cluster in a temporary directory, listening on a free
//! port of 127.0.0.1 (and a unix socket inside that directory), with trust authentication and
//! durability off for speed. PostgreSQL refuses to run as root, so a root test process runs
//! `initdb` and `postgres` as the `postgres` account and hands it the directory.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use crate::Unavailable;
use crate::port::free_loopback_port;
use crate::privilege::{lookup_account, running_as_root};
use crate::server_process::ServerProcess;
use crate::tool::{find_executable, postgresql_bin_dirs};

/// What error messages call this service.
const WHAT: &str = "PostgreSQL";

/// The superuser `initdb` creates, and the account a root test process runs the server as.
const SUPERUSER: &str = "postgres";

/// How many ports to try when another process takes the chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// How long the server may take to accept connections (generous: CI is 2 shared cores).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a fast shutdown may take before the server is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Settings passed to `postgres -c`: durability off (the cluster is thrown away), small memory
/// so many tests can run side by side.
const SETTINGS: &[&str] = &[
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "shared_buffers=16MB",
    "max_connections=100",
];

/// A running throwaway PostgreSQL; stopped (fast shutdown) and its directory removed on drop.
///
/// ```no_run
/// use nephrite_test_services::Postgres;
/// let pg = match Postgres::start() {
///     Ok(pg) => pg,
///     Err(e) => return e.skip("my_test"),
/// };
/// let url = pg.url(); // postgres://postgres@127.0.0.1:PORT/postgres
/// # let _ = url;
/// ```
#[derive(Debug)]
pub struct Postgres {
    // Declared before `dir`: the server stops before its directory is removed.
    process: ServerProcess,
    port: u16,
    bin_dir: PathBuf,
    log: PathBuf,
    dir: TempDir,
}

/// A SQL statement run through a database's command-line client (`psql`, `mariadb`) failed.
#[derive(Debug, thiserror::Error)]
#[error("SQL on database {database:?} failed running {sql:?}: {detail}")]
pub struct SqlError {
    /// The database the statement ran against.
    pub database: String,
    /// The statement.
    pub sql: String,
    /// The client's exit status and error output, or why the client could not run.
    pub detail: String,
}

impl Postgres {
    /// Start a fresh PostgreSQL on a free port of 127.0.0.1 and wait until it accepts
    /// connections.
    ///
    /// Err is [`Unavailable`]: not installed (naming the `postgresql` package), or installed
    /// but failed to initialise or start (with the server log's tail).
    pub fn start() -> Result<Postgres, Unavailable> {
        let search = postgresql_bin_dirs(Path::new("/usr/lib/postgresql"));
        let bin_dir = search
            .iter()
            .find(|dir| {
                let dirs = [dir.to_path_buf()];
                find_executable("initdb", &dirs).is_some()
                    && find_executable("postgres", &dirs).is_some()
            })
            .cloned()
            .ok_or_else(|| {
                Unavailable::not_installed("PostgreSQL (initdb, postgres)", "postgresql", search)
            })?;
        let account = if running_as_root() {
            Some(lookup_account(SUPERUSER).ok_or_else(|| {
                Unavailable::not_installed(
                    "PostgreSQL's `postgres` account (PostgreSQL refuses to run as root)",
                    "postgresql",
                    vec![PathBuf::from("/etc/passwd")],
                )
            })?)
        } else {
            None
        };
        let dir = cluster::make_dir(account)?;
        let data = dir.path().join("data");
        let sockets = dir.path().join("sockets");
        std::fs::create_dir(&sockets)
            .and_then(|()| match account {
                Some(a) => std::os::unix::fs::chown(&sockets, Some(a.uid), Some(a.gid)),
                None => Ok(()),
            })
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create {}: {e}", sockets.display()))
            })?;
        cluster::create(&bin_dir, &data, dir.path(), account)?;

        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_loopback_port().map_err(|e| {
                Unavailable::failed(WHAT, format!("no free port on 127.0.0.1: {e}"))
            })?;
            let log = dir.path().join(format!("postgres-{attempt}.log"));
            let mut command = Command::new(bin_dir.join("postgres"));
            command
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
                .arg(&sockets);
            for setting in SETTINGS {
                command.args(["-c", setting]);
            }
            cluster::as_account(&mut command, dir.path(), account);
            let mut process =
                ServerProcess::spawn(WHAT, command, &log, Signal::INT, STOP_GRACE, dir.path())?;
            match process.wait_until_ready(READY_TIMEOUT, || accepts_connections(&data, port)) {
                Ok(()) => {
                    return Ok(Postgres {
                        process,
                        port,
                        bin_dir,
                        log,
                        dir,
                    });
                }
                Err(not_ready) if not_ready.address_in_use && attempt < PORT_ATTEMPTS => continue,
                Err(not_ready) => return Err(not_ready.into_unavailable(WHAT)),
            }
        }
    }

    /// The connection URL of the `postgres` database as the `postgres` superuser (no password,
    /// trust authentication): `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// The connection URL of `database` (name percent-encoded) as the `postgres` superuser.
    pub fn url_for(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@127.0.0.1:{}/{}",
            self.port,
            percent_encode(database)
        )
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log file (stdout and stderr), for a test that wants to show it.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The server's process id (the `postgres` process itself).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The directory holding the cluster, sockets and logs (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Create the database `name` and return its URL.
    pub fn create_database(&self, name: &str) -> Result<String, SqlError> {
        self.psql(
            "postgres",
            &format!("CREATE DATABASE {}", quote_identifier(name)),
        )?;
        Ok(self.url_for(name))
    }

    /// Run `sql` (one or more statements) on `database` with the `psql` client as the
    /// superuser, stopping at the first error; returns the rows printed, unaligned (`-At`:
    /// columns separated by `|`, one row per line).
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, SqlError> {
        let failed = |detail: String| SqlError {
            database: database.to_owned(),
            sql: sql.to_owned(),
            detail,
        };
        let dirs = [self.bin_dir.clone(), PathBuf::from("/usr/bin")];
        let psql = find_executable("psql", &dirs).ok_or_else(|| {
            failed(format!(
                "no psql in {} or /usr/bin (install: apt-get install -y postgresql-client)",
                self.bin_dir.display()
            ))
        })?;
        let out = Command::new(&psql)
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-U",
                SUPERUSER,
            ])
            .args(["-p", &self.port.to_string(), "-d", database, "-c", sql])
            .env("PGCONNECT_TIMEOUT", "10")
            .env_remove("PGOPTIONS")
            .env_remove("PGPASSWORD")
            .env_remove("PGSERVICE")
            .output()
            .map_err(|e| failed(format!("cannot run {}: {e}", psql.display())))?;
        if !out.status.success() {
            return Err(failed(format!(
                "psql {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The server reports "ready" in `postmaster.pid` for `port` and its TCP port accepts.
fn accepts_connections(data: &Path, port: u16) -> bool {
    let Ok(pid_file) = std::fs::read_to_string(data.join("postmaster.pid")) else {
        return false;
    };
    postmaster_ready(&pid_file, port)
        && TcpStream::connect_timeout(
            &SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
            Duration::from_secs(1),
        )
        .is_ok()
}

/// Whether `postmaster.pid` text (line 4: port, line 8: status) says the server on `port`
/// accepts connections; PostgreSQL 10+ writes the status, as `pg_ctl` reads it.
pub(crate) fn postmaster_ready(pid_file: &str, port: u16) -> bool {
    let lines: Vec<&str> = pid_file.lines().collect();
    lines.get(3).is_some_and(|p| p.trim() == port.to_string())
        && lines.get(7).is_some_and(|status| status.trim() == "ready")
}

/// `name` as a double-quoted SQL identifier.
pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `segment` with everything but RFC 3986 unreserved characters percent-encoded.
pub(crate) fn percent_encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

mod cluster;

#[cfg(test)]
mod tests;
