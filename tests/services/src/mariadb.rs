//! A throwaway MariaDB server, reached through a unix socket only.
//!
//! Octavia's and Neutron's schema migrations need MariaDB (Octavia's fail on SQLite and on
//! PostgreSQL). Debian's `mariadb-server`: `mariadb-install-db` into a fresh temporary
//! directory, then `mariadbd` with no defaults files read, no TCP listener (`--skip-networking`),
//! its socket in that directory, durability off for speed. Every instance has its own temporary
//! directory *and* `TMPDIR`: two `mariadb-install-db` runs sharing `/tmp` break each other.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use tempfile::TempDir;

use crate::server_process::ServerProcess;
use crate::tool::program;
use crate::{SqlError, Unavailable};

/// What error messages call this service.
const WHAT: &str = "MariaDB";

/// The Debian package with the server and its tools.
const PACKAGE: &str = "mariadb-server";

/// How long the server may take to accept connections (generous: CI is 2 shared cores).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a clean shutdown may take before the server is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Options for both `mariadb-install-db` and `mariadbd`: the data is thrown away, so nothing
/// is flushed to disk; small logs and buffers so several servers fit side by side.
const SETTINGS: &[&str] = &[
    "--skip-log-bin",
    "--innodb-flush-log-at-trx-commit=0",
    "--innodb-doublewrite=0",
    // One tablespace: creating the ~120 tables of a schema is twice as fast.
    "--innodb-file-per-table=0",
    "--innodb-log-file-size=16M",
    "--innodb-buffer-pool-size=64M",
    "--character-set-server=utf8mb4",
    "--collation-server=utf8mb4_general_ci",
    "--max-connections=300",
];

/// A running throwaway MariaDB; stopped and its directory removed on drop.
///
/// The `root` account has no password; connect through [`MariaDb::socket`].
///
/// ```no_run
/// use nephrite_test_services::MariaDb;
/// let db = match MariaDb::start() {
///     Ok(db) => db,
///     Err(e) => return e.skip("my_test"),
/// };
/// let url = db.create_database("octavia").unwrap();
/// // mysql+pymysql://root@localhost/octavia?unix_socket=/tmp/nephrite-mariadb-…/mysqld.sock
/// # let _ = url;
/// ```
#[derive(Debug)]
pub struct MariaDb {
    // Declared before `dir`: the server stops before its directory is removed.
    process: ServerProcess,
    socket: PathBuf,
    client: PathBuf,
    dump: PathBuf,
    log: PathBuf,
    dir: TempDir,
}

impl MariaDb {
    /// Initialise a data directory and start MariaDB on a unix socket; wait until it accepts
    /// connections.
    ///
    /// Err is [`Unavailable`]: not installed (naming `mariadb-server`), or installed but failed
    /// to initialise or start (with the log's tail).
    pub fn start() -> Result<MariaDb, Unavailable> {
        let install_db = program("mariadb-install-db", PACKAGE)?;
        let server = program("mariadbd", PACKAGE)?;
        let client = program("mariadb", PACKAGE)?;
        let dump = program("mariadb-dump", PACKAGE)?;
        let dir = tempfile::Builder::new()
            .prefix("nephrite-mariadb-")
            .tempdir()
            .map_err(|e| {
                Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
            })?;
        let data = dir.path().join("data");
        let tmp = dir.path().join("tmp");
        let socket = dir.path().join("mysqld.sock");
        std::fs::create_dir(&tmp).map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot create {}: {e}", tmp.display()))
        })?;
        // mariadbd refuses to run as root unless told to; the directory is the test's own.
        let user = format!("--user={}", current_user());

        let mut init = Command::new(&install_db);
        init.arg("--no-defaults")
            .arg(&user)
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(SETTINGS)
            .env("TMPDIR", &tmp)
            .current_dir(dir.path());
        let out = init.output().map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot run {}: {e}", install_db.display()))
        })?;
        if !out.status.success() {
            return Err(Unavailable::failed(
                WHAT,
                format!(
                    "{} --datadir={} {}:\n{}{}",
                    install_db.display(),
                    data.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            ));
        }

        let log = dir.path().join("mariadbd.log");
        let mut command = Command::new(&server);
        command
            .arg("--no-defaults")
            .arg(&user)
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!(
                "--pid-file={}",
                dir.path().join("mariadbd.pid").display()
            ))
            .arg("--skip-networking")
            .args(SETTINGS)
            .env("TMPDIR", &tmp)
            .current_dir(dir.path());
        let mut process =
            ServerProcess::spawn(WHAT, command, &log, Signal::TERM, STOP_GRACE, dir.path())?;
        process
            .wait_until_ready(READY_TIMEOUT, || UnixStream::connect(&socket).is_ok())
            .map_err(|not_ready| not_ready.into_unavailable(WHAT))?;
        Ok(MariaDb {
            process,
            socket,
            client,
            dump,
            log,
            dir,
        })
    }

    /// The server's unix socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The SQLAlchemy URL (PyMySQL driver) of `database` as `root`:
    /// `mysql+pymysql://root@localhost/DATABASE?unix_socket=SOCKET`.
    pub fn sqlalchemy_url(&self, database: &str) -> String {
        format!(
            "mysql+pymysql://root@localhost/{database}?unix_socket={}",
            self.socket.display()
        )
    }

    /// Create the database `name` (utf8mb4) and return its [`MariaDb::sqlalchemy_url`].
    pub fn create_database(&self, name: &str) -> Result<String, SqlError> {
        self.sql(
            "mysql",
            &format!(
                "CREATE DATABASE {} CHARACTER SET utf8mb4",
                quote_identifier(name)
            ),
        )?;
        Ok(self.sqlalchemy_url(name))
    }

    /// Run `sql` on `database` with the `mariadb` client as `root`; returns the rows printed
    /// in batch form (tab-separated columns, one row per line, no header).
    pub fn sql(&self, database: &str, sql: &str) -> Result<String, SqlError> {
        let failed = |detail: String| SqlError {
            database: database.to_owned(),
            sql: sql.to_owned(),
            detail,
        };
        let out = Command::new(&self.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["--user=root", "--batch", "--skip-column-names"])
            .args(["--database", database, "--execute", sql])
            .output()
            .map_err(|e| failed(format!("cannot run {}: {e}", self.client.display())))?;
        if !out.status.success() {
            return Err(failed(format!(
                "mariadb {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The whole of `database` (schema and rows) as SQL, through `mariadb-dump`.
    pub fn dump(&self, database: &str) -> Result<String, SqlError> {
        let failed = |detail: String| SqlError {
            database: database.to_owned(),
            sql: "(mariadb-dump)".to_owned(),
            detail,
        };
        let out = Command::new(&self.dump)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["--user=root", "--skip-comments", "--skip-dump-date"])
            .args(["--single-transaction", database])
            .output()
            .map_err(|e| failed(format!("cannot run {}: {e}", self.dump.display())))?;
        if !out.status.success() {
            return Err(failed(format!(
                "mariadb-dump {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        String::from_utf8(out.stdout).map_err(|e| failed(format!("not UTF-8: {e}")))
    }

    /// Run the SQL script `script` (e.g. a [`MariaDb::dump`]) on `database`.
    pub fn load(&self, database: &str, script: &str) -> Result<(), SqlError> {
        let failed = |detail: String| SqlError {
            database: database.to_owned(),
            sql: "(script)".to_owned(),
            detail,
        };
        let mut child = Command::new(&self.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["--user=root", "--batch", "--database", database])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot run {}: {e}", self.client.display())))?;
        let written = child
            .stdin
            .take()
            .map(|mut stdin| std::io::Write::write_all(&mut stdin, script.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| failed(format!("mariadb: {e}")))?;
        if let Some(Err(e)) = written {
            return Err(failed(format!("cannot send the script: {e}")));
        }
        if !out.status.success() {
            return Err(failed(format!(
                "mariadb {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// The server's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The directory holding the data, socket and log (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The name of the account the test runs as, for `--user` (`root` when root).
fn current_user() -> String {
    let uid = rustix::process::geteuid().as_raw();
    if uid == 0 {
        return "root".to_owned();
    }
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.get(2)? == &uid.to_string()).then(|| fields[0].to_owned())
            })
        })
        .unwrap_or_else(|| uid.to_string())
}

/// `name` as a back-quoted MariaDB identifier.
pub(crate) fn quote_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::quote_identifier;

    #[test]
    fn identifiers_are_back_quoted_with_back_quotes_doubled() {
        assert_eq!(quote_identifier("octavia"), "`octavia`");
        assert_eq!(quote_identifier("a`b"), "`a``b`");
    }
}
