//! The Python environments Octavia, Neutron, Keystone and Barbican run from: installed from PyPI once, then kept
//! under the workspace's `target/` directory.
//!
//! Debian packages neither service, and an unpinned `pip install` pulls newer libraries
//! (SQLAlchemy, oslo) than the releases were tested with. So each environment is installed
//! with the `pip freeze` of one that worked as constraints (`openstack/*-constraints.txt` in
//! this crate), into `target/openstack-venvs/<name>-<key>`, where the key is a hash of the
//! constraints and the requirements: changing either installs a fresh environment, and an
//! unchanged one is reused across test runs (a cold install is 26–45 s and ~300 MB each).
//!
//! Test binaries of one `cargo test` run start at the same time, so installs are serialised by
//! an exclusive lock on `<name>-<key>.lock`; a directory counts as installed only once the
//! marker written after `pip` succeeded is there, so an interrupted install is redone.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Unavailable;
use crate::server_process::log_tail;
use crate::tool::program;

/// One service's Python environment: what `pip` installs into it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    /// Directory prefix and the name in messages.
    pub(crate) name: &'static str,
    /// The `pip freeze` of a working environment, passed to `pip install -c`.
    constraints: &'static str,
    /// What `pip install` is asked for.
    requirements: &'static [&'static str],
}

/// Octavia 19 (API and worker) with the MariaDB driver.
pub(crate) const OCTAVIA: Spec = Spec {
    name: "octavia",
    constraints: include_str!("../../openstack/octavia-constraints.txt"),
    requirements: &["octavia==19.0.0", "PyMySQL"],
};

/// Neutron 29 (the WSGI API) with the MariaDB driver and gunicorn to serve it.
pub(crate) const NEUTRON: Spec = Spec {
    name: "neutron",
    constraints: include_str!("../../openstack/neutron-constraints.txt"),
    requirements: &["neutron==29.0.0", "PyMySQL", "gunicorn"],
};

/// Keystone 30 (identity, for authentication tests) with the MariaDB driver and gunicorn.
pub(crate) const KEYSTONE: Spec = Spec {
    name: "keystone",
    constraints: include_str!("../../openstack/keystone-constraints.txt"),
    requirements: &["keystone==30.0.0", "PyMySQL", "gunicorn"],
};

/// Barbican 23 (the key manager, for Octavia's TLS listeners) with gunicorn to serve it.
pub(crate) const BARBICAN: Spec = Spec {
    name: "barbican",
    constraints: include_str!("../../openstack/barbican-constraints.txt"),
    requirements: &["barbican==23.0.0", "gunicorn"],
};

/// Written into an environment once `pip install` succeeded.
const COMPLETE_MARKER: &str = ".nephrite-venv-complete";

/// An installed environment.
#[derive(Debug, Clone)]
pub(crate) struct Venv {
    dir: PathBuf,
}

impl Venv {
    /// The environment's root directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// A command running the environment's console script `script` through its Python, so a
    /// long shebang line or a moved directory does not matter.
    pub(crate) fn script(&self, script: &str) -> Command {
        let mut command = Command::new(self.dir.join("bin").join("python"));
        command
            .arg(self.dir.join("bin").join(script))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env_remove("PYTHONPATH")
            .env_remove("PYTHONHOME");
        command
    }
}

/// Install (or find already installed) the Octavia, Neutron, Keystone and Barbican environments under the
/// workspace's `target/openstack-venvs/`, and return their directories.
///
/// `cargo xtask test` calls this before the test run so the tests do not pay for it; a test
/// starting [`OpenStack`](crate::OpenStack) installs whatever is missing itself.
///
/// Err is [`Unavailable`]: no `python3` with the `venv` module, or `pip` failed (offline,
/// PyPI unreachable), with pip's output.
pub fn install_venvs() -> Result<Vec<PathBuf>, Unavailable> {
    let installs: Vec<_> = [OCTAVIA, NEUTRON, KEYSTONE, BARBICAN]
        .into_iter()
        .map(|spec| std::thread::spawn(move || ensure(spec)))
        .collect();
    installs
        .into_iter()
        .map(|install| {
            install
                .join()
                .unwrap_or_else(|_| {
                    Err(Unavailable::failed(
                        "OpenStack Python environments",
                        "the install thread panicked",
                    ))
                })
                .map(|venv| venv.dir)
        })
        .collect()
}

/// The environment for `spec`, installing it when it is not there yet.
pub(crate) fn ensure(spec: Spec) -> Result<Venv, Unavailable> {
    let what = format!("{}'s Python environment", title(spec));
    let root = cache_root();
    std::fs::create_dir_all(&root).map_err(|e| {
        Unavailable::failed(&what, format!("cannot create {}: {e}", root.display()))
    })?;
    let stem = format!("{}-{}", spec.name, key(spec));
    let dir = root.join(&stem);
    let venv = Venv { dir: dir.clone() };
    if dir.join(COMPLETE_MARKER).is_file() {
        return Ok(venv);
    }
    let lock_path = root.join(format!("{stem}.lock"));
    let lock = File::create(&lock_path)
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|e| {
            Unavailable::failed(&what, format!("cannot lock {}: {e}", lock_path.display()))
        })?;
    // Another test binary may have installed it while this one waited for the lock.
    if !dir.join(COMPLETE_MARKER).is_file() {
        install(spec, &dir, &what)?;
    }
    drop(lock);
    Ok(venv)
}

/// `python3 -m venv` and `pip install -c` into `dir` (removed first: a leftover is partial).
fn install(spec: Spec, dir: &Path, what: &str) -> Result<(), Unavailable> {
    let python = program("python3", "python3-venv")?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| {
            Unavailable::failed(what, format!("cannot remove {}: {e}", dir.display()))
        })?;
    }
    let how = format!(
        "cargo xtask test, or: python3 -m venv {dir} && {dir}/bin/pip install -c \
         {constraints} {requirements}",
        dir = dir.display(),
        constraints = constraints_file(spec),
        requirements = spec.requirements.join(" "),
    );
    let venv = Command::new(&python)
        .args(["-m", "venv"])
        .arg(dir)
        .output()
        .map_err(|e| Unavailable::failed(what, format!("cannot run {}: {e}", python.display())))?;
    if !venv.status.success() {
        // Debian's python3 lacks ensurepip without python3-venv.
        return Err(Unavailable::not_installed(
            format!(
                "python3's venv module ({} -m venv {} {}: {})",
                python.display(),
                dir.display(),
                venv.status,
                String::from_utf8_lossy(&venv.stderr).trim()
            ),
            "python3-venv",
            vec![python],
        ));
    }
    let constraints = dir.join("constraints.txt");
    std::fs::write(&constraints, spec.constraints).map_err(|e| {
        Unavailable::failed(what, format!("cannot write {}: {e}", constraints.display()))
    })?;
    let log = dir.join("pip-install.log");
    let log_file = File::create(&log)
        .and_then(|file| Ok((file.try_clone()?, file)))
        .map_err(|e| Unavailable::failed(what, format!("cannot create {}: {e}", log.display())))?;
    let status = Command::new(dir.join("bin").join("python"))
        .args(["-m", "pip", "install", "--quiet", "--no-input", "-c"])
        .arg(&constraints)
        .args(spec.requirements)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .stdout(log_file.0)
        .stderr(log_file.1)
        .status()
        .map_err(|e| Unavailable::failed(what, format!("cannot run pip: {e}")))?;
    if !status.success() {
        return Err(Unavailable::not_provisioned(
            what,
            format!(
                "pip install into {} {status}; last lines of {}:\n{}",
                dir.display(),
                log.display(),
                log_tail(&log)
            ),
            how,
        ));
    }
    std::fs::write(dir.join(COMPLETE_MARKER), spec.requirements.join("\n")).map_err(|e| {
        Unavailable::failed(what, format!("cannot mark {} complete: {e}", dir.display()))
    })
}

/// Where `spec`'s constraints are in the workspace, for a person installing by hand.
fn constraints_file(spec: Spec) -> String {
    format!("tests/services/openstack/{}-constraints.txt", spec.name)
}

/// "Octavia" for "octavia".
fn title(spec: Spec) -> String {
    let mut chars = spec.name.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `target/openstack-venvs` of this workspace: `CARGO_TARGET_DIR` when the environment sets
/// it (relative to the workspace root when relative), else the workspace's `target/`.
pub(crate) fn cache_root() -> PathBuf {
    // This crate is tests/services inside the workspace.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    target_dir(&workspace, std::env::var_os("CARGO_TARGET_DIR").as_deref()).join("openstack-venvs")
}

/// The cargo target directory for `workspace` given `CARGO_TARGET_DIR`'s value.
pub(crate) fn target_dir(workspace: &Path, cargo_target_dir: Option<&std::ffi::OsStr>) -> PathBuf {
    match cargo_target_dir.filter(|d| !d.is_empty()) {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    }
}

/// The cache key of `spec`: 16 hex digits of an FNV-1a hash over its constraints and
/// requirements (stable across Rust releases and machines, unlike `DefaultHasher`).
pub(crate) fn key(spec: Spec) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let parts = std::iter::once(spec.constraints).chain(spec.requirements.iter().copied());
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests;
