//! A fresh cluster directory for one server: a copy of a cached, never-started `initdb`
//! template, or `initdb` itself when there is no usable template.
//!
//! `initdb` costs about 1.5 s of CPU, copying its result about 0.5 s, and every test that
//! starts PostgreSQL pays it on a 2-core CI machine. The first start on a machine runs `initdb`
//! into a staging directory and renames it into place (atomic, so a concurrent test sees either
//! no template or a complete one); later starts copy it with `cp -a`. A template is only used
//! when it belongs to the account the server runs as and no one else can read or write it.
//! It stays in the temporary directory, one per PostgreSQL major version and account.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use super::{SUPERUSER, WHAT};
use crate::Unavailable;
use crate::privilege::Account;

/// Bump when the `initdb` options change, so stale templates are not used.
const TEMPLATE_GENERATION: &str = "v1";

/// Create the cluster `data` (which must not exist) inside `dir`, as `account` when root.
pub(super) fn create(
    bin_dir: &Path,
    data: &Path,
    dir: &Path,
    account: Option<Account>,
) -> Result<(), Unavailable> {
    if let Some(template) = template(bin_dir, account) {
        if copy(&template, data, dir, account) {
            return Ok(());
        }
        // A partial copy would make initdb refuse the directory.
        let _ = std::fs::remove_dir_all(data);
    }
    initdb(bin_dir, data, dir, account)
}

/// The directory temporary directories go in: /tmp when the server runs as another account
/// (the test's TMPDIR may not be reachable by it), else the usual temporary directory.
fn temp_root(account: Option<Account>) -> PathBuf {
    match account {
        Some(_) => PathBuf::from("/tmp"),
        None => std::env::temp_dir(),
    }
}

/// A temporary directory for the cluster, owned by `account` when there is one.
pub(super) fn make_dir(account: Option<Account>) -> Result<TempDir, Unavailable> {
    let dir = tempfile::Builder::new()
        .prefix("nephrite-postgres-")
        .tempdir_in(temp_root(account))
        .map_err(|e| {
            Unavailable::failed(WHAT, format!("cannot create a temporary directory: {e}"))
        })?;
    hand_over(dir.path(), account)?;
    Ok(dir)
}

/// Give `path` to `account` (no-op without one).
fn hand_over(path: &Path, account: Option<Account>) -> Result<(), Unavailable> {
    let Some(a) = account else {
        return Ok(());
    };
    std::os::unix::fs::chown(path, Some(a.uid), Some(a.gid)).map_err(|e| {
        Unavailable::failed(
            WHAT,
            format!("cannot hand {} to uid {}: {e}", path.display(), a.uid),
        )
    })
}

/// Run the command as `account` (when root) in `dir`, with a neutral locale environment.
pub(super) fn as_account(command: &mut Command, dir: &Path, account: Option<Account>) {
    command
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("PGDATA");
    if let Some(a) = account {
        command
            .uid(a.uid)
            .gid(a.gid)
            .env("HOME", dir)
            .env("USER", SUPERUSER);
    }
}

/// The cached template for this major version and account, building it when absent; None
/// when it cannot be had (the caller then runs `initdb` itself).
fn template(bin_dir: &Path, account: Option<Account>) -> Option<PathBuf> {
    let uid = account.map_or_else(|| rustix::process::geteuid().as_raw(), |a| a.uid);
    let major = bin_dir.parent()?.file_name()?.to_str()?;
    let path = temp_root(account).join(format!(
        "nephrite-postgres-template-{TEMPLATE_GENERATION}-{major}-uid{uid}"
    ));
    if usable(&path, uid) {
        return Some(path);
    }
    let staging = tempfile::Builder::new()
        .prefix(".nephrite-postgres-template-")
        .tempdir_in(temp_root(account))
        .ok()?;
    hand_over(staging.path(), account).ok()?;
    let staged = staging.path().join("data");
    initdb(bin_dir, &staged, staging.path(), account).ok()?;
    // Fails when a concurrent test published its template first; either is as good.
    let _ = std::fs::rename(&staged, &path);
    usable(&path, uid).then_some(path)
}

/// Whether `path` is a complete cluster directory owned by `uid` and private to it (not a
/// symlink, mode without group or other bits).
pub(super) fn usable(path: &Path, uid: u32) -> bool {
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o077 == 0)
        && path.join("PG_VERSION").is_file()
        && path.join("global").join("pg_control").is_file()
}

/// `cp -a` the template to `data`, as `account`; whether it worked.
fn copy(template: &Path, data: &Path, dir: &Path, account: Option<Account>) -> bool {
    let mut command = Command::new("cp");
    command.arg("-a").arg("--").arg(template).arg(data);
    as_account(&mut command, dir, account);
    command.output().is_ok_and(|out| out.status.success())
}

/// `initdb` a fresh cluster in `data`: superuser `postgres`, trust authentication, UTF-8.
pub(super) fn initdb(
    bin_dir: &Path,
    data: &Path,
    dir: &Path,
    account: Option<Account>,
) -> Result<(), Unavailable> {
    let mut command = Command::new(bin_dir.join("initdb"));
    command.arg("-D").arg(data).args([
        "-U",
        SUPERUSER,
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]);
    as_account(&mut command, dir, account);
    let out = command.output().map_err(|e| {
        Unavailable::failed(
            WHAT,
            format!("cannot run {}/initdb: {e}", bin_dir.display()),
        )
    })?;
    if out.status.success() {
        return Ok(());
    }
    Err(Unavailable::failed(
        WHAT,
        format!(
            "initdb -D {} {}:\n{}{}",
            data.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

#[cfg(test)]
mod tests;
