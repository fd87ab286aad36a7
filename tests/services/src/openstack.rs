//! The real OpenStack APIs kuryr-l7 talks to, Octavia 19 and Neutron 29 (and, on demand,
//! Barbican 23 for TLS certificates), on loopback.
//!
//! A home-made simulator would agree with the client that wrote it; these are the servers
//! themselves, from PyPI ([`install_venvs`]), on a private MariaDB and RabbitMQ, without
//! Keystone (`noauth`: the project is a header or a body field), with Octavia's noop drivers so
//! that statuses move as in a cloud and nothing is booted. Starting them costs 15–45 s and
//! ~900 MB, so a test binary starts them once ([`OpenStack::shared`]) and every test works in
//! its own project ([`new_project_id`]).
//!
//! Under nextest every test is its own process, so "once per binary" is once per test: keep an
//! OpenStack test binary to one `#[test]` that runs its scenarios in turn.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::server_process::log_tail;
use crate::{MariaDb, RabbitMq, Unavailable};

mod barbican;
mod keystone;
mod neutron;
mod octavia;
mod venv;

use barbican::Barbican;
pub use keystone::Keystone;
use neutron::Neutron;
use octavia::Octavia;
pub use venv::install_venvs;

/// How long one OpenStack server may take to become ready (API imports take 8–40 s on a
/// loaded 2-core machine).
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How long a server may take to exit on its stop signal before it is killed.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// Octavia's and Neutron's APIs with what they run on; stopped on drop (API servers first).
///
/// ```no_run
/// use nephrite_test_services::{OpenStack, new_project_id};
/// let cloud = match OpenStack::shared() {
///     Ok(cloud) => cloud,
///     Err(e) => return e.skip("my_test"),
/// };
/// let octavia = cloud.octavia_url(); // http://127.0.0.1:PORT, API under /v2/lbaas/
/// let neutron = cloud.neutron_url(); // http://127.0.0.1:PORT, API under /v2.0/
/// let project = new_project_id(); // send as X-Project-Id / body project_id
/// # let _ = (octavia, neutron, project);
/// ```
#[derive(Debug)]
pub struct OpenStack {
    // Declared in stop order: the APIs, then the broker and the database under them.
    barbican: OnceLock<Result<Barbican, Unavailable>>,
    octavia: Octavia,
    neutron: Neutron,
    rabbitmq: RabbitMq,
    mariadb: MariaDb,
    started_in: Duration,
}

/// The services of this test binary, started by the first [`OpenStack::shared`].
static SHARED: OnceLock<Result<OpenStack, Unavailable>> = OnceLock::new();

impl OpenStack {
    /// The services shared by every test of this binary, started by the first call (others
    /// wait for it). They are never dropped: when the test process exits, each server's
    /// watchdog stops it and removes its directory.
    ///
    /// Err is the first start's [`Unavailable`], returned to every caller.
    pub fn shared() -> Result<&'static OpenStack, Unavailable> {
        SHARED
            .get_or_init(OpenStack::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Start a private set: the Python environments (installed when missing), MariaDB and
    /// RabbitMQ, then Octavia (API and worker) and Neutron, in parallel where they do not
    /// depend on each other; wait until both APIs answer and Octavia's worker listens.
    ///
    /// Err is [`Unavailable`]: a Debian package missing (`mariadb-server`, `rabbitmq-server`,
    /// `python3-venv`, `openssl`), the environments not installable (offline), or a server
    /// that failed to start (with its log's tail).
    pub fn start() -> Result<OpenStack, Unavailable> {
        let began = Instant::now();
        let (octavia_venv, neutron_venv, mariadb, rabbitmq) = thread::scope(|s| {
            let octavia_venv = s.spawn(|| venv::ensure(venv::OCTAVIA));
            let neutron_venv = s.spawn(|| venv::ensure(venv::NEUTRON));
            let mariadb = s.spawn(MariaDb::start);
            let rabbitmq = s.spawn(RabbitMq::start);
            (
                joined(octavia_venv.join(), "Octavia's Python environment"),
                joined(neutron_venv.join(), "Neutron's Python environment"),
                joined(mariadb.join(), "MariaDB"),
                joined(rabbitmq.join(), "RabbitMQ"),
            )
        });
        let (octavia_venv, neutron_venv, mariadb, rabbitmq) =
            (octavia_venv?, neutron_venv?, mariadb?, rabbitmq?);
        for name in ["octavia", "neutron"] {
            mariadb
                .create_database(name)
                .map_err(|e| Unavailable::failed("MariaDB", e.to_string()))?;
        }
        let (octavia, neutron) = thread::scope(|s| {
            let octavia = s.spawn(|| Octavia::start(&octavia_venv, &mariadb, &rabbitmq));
            let neutron = s.spawn(|| Neutron::start(&neutron_venv, &mariadb));
            (
                joined(octavia.join(), "Octavia"),
                joined(neutron.join(), "Neutron"),
            )
        });
        Ok(OpenStack {
            barbican: OnceLock::new(),
            octavia: octavia?,
            neutron: neutron?,
            rabbitmq,
            mariadb,
            started_in: began.elapsed(),
        })
    }

    /// Octavia's API, `http://127.0.0.1:PORT` (load balancers under `/v2/lbaas/`).
    pub fn octavia_url(&self) -> String {
        self.octavia.url()
    }

    /// Neutron's API, `http://127.0.0.1:PORT` (networks under `/v2.0/`).
    pub fn neutron_url(&self) -> String {
        self.neutron.url()
    }

    /// Barbican's API, `http://127.0.0.1:PORT` (secrets and containers under `/v1/`, the
    /// project as `X-Project-Id`), started by the first call (its Python environment installed
    /// when missing; 5–40 s) and kept with these services. Octavia takes the container
    /// references Barbican hands out without reading them (`noop_cert_manager`: its Barbican
    /// client needs Keystone), so a test reads the containers back from here.
    ///
    /// Err is the first start's [`Unavailable`], returned to every caller.
    pub fn barbican_url(&self) -> Result<String, Unavailable> {
        self.barbican
            .get_or_init(|| Barbican::start(&venv::ensure(venv::BARBICAN)?))
            .as_ref()
            .map(Barbican::url)
            .map_err(Clone::clone)
    }

    /// How long [`OpenStack::start`] took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The MariaDB both APIs keep their state in (databases `octavia` and `neutron`); another
    /// service (Keystone) may add its own database.
    pub fn mariadb(&self) -> &MariaDb {
        &self.mariadb
    }

    /// The process ids of every server started (their children not included): Octavia's API
    /// and worker, Neutron's gunicorn, RabbitMQ's node and epmd, MariaDB, then Barbican's
    /// gunicorn once [`OpenStack::barbican_url`] started it.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = self.octavia.pids().to_vec();
        pids.extend([
            self.neutron.pid(),
            self.rabbitmq.pid(),
            self.rabbitmq.epmd_pid(),
            self.mariadb.pid(),
        ]);
        if let Some(Ok(barbican)) = self.barbican.get() {
            pids.push(barbican.pid());
        }
        pids
    }

    /// Barbican's directory (configuration, SQLite database, logs) once
    /// [`OpenStack::barbican_url`] started it.
    pub fn barbican_dir(&self) -> Option<&Path> {
        match self.barbican.get() {
            Some(Ok(barbican)) => Some(barbican.dir()),
            _ => None,
        }
    }

    /// The directories holding each server's configuration and logs (Octavia, Neutron,
    /// RabbitMQ, MariaDB), for a failing test to point at.
    pub fn dirs(&self) -> [&Path; 4] {
        [
            self.octavia.dir(),
            self.neutron.dir(),
            self.rabbitmq.dir(),
            self.mariadb.dir(),
        ]
    }
}

/// A project id nobody else uses (32 hex digits, like Keystone's): every test works in its own
/// project so tests sharing the services never see each other's objects.
pub fn new_project_id() -> String {
    use std::hash::{BuildHasher, Hasher, RandomState};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Each RandomState has fresh keys (random per process, then stepped per call).
    let half = |salt: u64| {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(n);
        hasher.write_u64(salt);
        hasher.write_u32(std::process::id());
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// The value of a start-up thread, a panic in it turned into a failure of `what`.
pub(crate) fn joined<T>(
    result: thread::Result<Result<T, Unavailable>>,
    what: &str,
) -> Result<T, Unavailable> {
    result.unwrap_or_else(|_| Err(Unavailable::failed(what, "its start-up thread panicked")))
}

/// Migrate `database` with `migrate` (its output in `log`), or load the schema an earlier
/// migration from the same Python environment left beside it: the migrations cost 5–30 s
/// (Neutron's are the longest), loading their result 2–4 s. The cache is written once the
/// migration succeeded, atomically; a cache that fails to load is dropped and the migration
/// runs.
pub(crate) fn migrate(
    what: &str,
    venv: &venv::Venv,
    mariadb: &MariaDb,
    database: &str,
    migrate: Command,
    log: &Path,
) -> Result<(), Unavailable> {
    let cache = venv.dir().join(format!("nephrite-schema-{database}.sql"));
    if let Ok(script) = std::fs::read_to_string(&cache) {
        if mariadb.load(database, &script).is_ok() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&cache);
        let quoted = crate::mariadb::quote_identifier(database);
        mariadb
            .sql(
                "mysql",
                &format!("DROP DATABASE {quoted}; CREATE DATABASE {quoted} CHARACTER SET utf8mb4"),
            )
            .map_err(|e| Unavailable::failed("MariaDB", e.to_string()))?;
    }
    run_to_completion(what, migrate, log)?;
    if let Ok(script) = mariadb.dump(database) {
        let staged = cache.with_extension(format!("sql.{}", std::process::id()));
        if std::fs::write(&staged, script).is_ok() {
            let _ = std::fs::rename(&staged, &cache);
        }
        let _ = std::fs::remove_file(&staged);
    }
    Ok(())
}

/// gunicorn (one worker) serving the WSGI application `wsgi_app` (e.g. `neutron.wsgi.api`) on
/// 127.0.0.1:`port`, from `dir`. Importing an OpenStack WSGI app parses `sys.argv` with
/// oslo.config, which would choke on gunicorn's arguments, so gunicorn loads a module written
/// into `dir` that clears `sys.argv` first. The caller adds the configuration's variable.
pub(crate) fn gunicorn(
    what: &str,
    venv: &venv::Venv,
    dir: &Path,
    wsgi_app: &str,
    port: u16,
) -> Result<Command, Unavailable> {
    const MODULE: &str = "nephrite_wsgi_app";
    let module = dir.join(format!("{MODULE}.py"));
    std::fs::write(
        &module,
        format!(
            "import sys\nsys.argv = sys.argv[:1]\nfrom {wsgi_app} import application  # noqa\n"
        ),
    )
    .map_err(|e| Unavailable::failed(what, format!("cannot write {}: {e}", module.display())))?;
    let mut command = venv.script("gunicorn");
    command
        .args(["--bind", &format!("127.0.0.1:{port}")])
        .args(["--workers", "1", "--timeout", "120", "--chdir"])
        .arg(dir)
        .arg(format!("{MODULE}:application"))
        .current_dir(dir);
    Ok(command)
}

/// Run a one-shot command (migrations, `openssl`) to completion, its output in `log`; a
/// failure is `what` failing, with the log's tail.
pub(crate) fn run_to_completion(
    what: &str,
    mut command: Command,
    log: &Path,
) -> Result<(), Unavailable> {
    let file = std::fs::File::create(log)
        .and_then(|file| Ok((file.try_clone()?, file)))
        .map_err(|e| Unavailable::failed(what, format!("cannot create {}: {e}", log.display())))?;
    let status = command
        .stdin(std::process::Stdio::null())
        .stdout(file.0)
        .stderr(file.1)
        .status()
        .map_err(|e| {
            Unavailable::failed(what, format!("cannot run {:?}: {e}", command.get_program()))
        })?;
    if status.success() {
        return Ok(());
    }
    Err(Unavailable::failed(
        what,
        format!(
            "{:?} {:?} {status}; last lines of {}:\n{}",
            command.get_program(),
            command.get_args().collect::<Vec<_>>(),
            log.display(),
            log_tail(log)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::new_project_id;

    #[test]
    fn project_ids_are_32_hex_digits_and_never_repeat() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_project_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(id.len(), 32, "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
    }
}
