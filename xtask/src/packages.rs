//! The programs the tests start or measure against, from Debian's packages.
//!
//! The test-services crate (`tests/services`) lists them (`DEBIAN_PACKAGES`) and starts them on
//! free loopback ports; this step only makes sure they are installed. As root (CI), missing packages are installed with
//! `apt-get update` then `apt-get install -y`; otherwise the step says what to install and the
//! tests that need a missing program say they are skipped (or fail, under `CI=true`).
//!
//! Several of the packages (PostgreSQL, etcd, MariaDB, RabbitMQ, nginx, HAProxy) start a system
//! service when installed. The tests start private instances on free ports instead, so the
//! install runs with a `policy-rc.d` that forbids every service start (Debian's
//! `invoke-rc.d` protocol: exit code 101), removed again afterwards.

use std::process::Command;

use anyhow::{Context, bail};
use nephrite_test_services::DEBIAN_PACKAGES;

/// Installs the missing packages when running as root (listing them otherwise), then the
/// OpenStack API servers' Python environments.
pub fn ensure() -> anyhow::Result<()> {
    disk();
    debian()?;
    python()
}

/// Below this much free space a cold build of the workspace, its test binaries and the Python
/// environments may not fit (a full debug build of every test is ~15 GB).
const DISK_WARNING_BYTES: u64 = 20 << 30;

/// Says how much space the workspace's file system has left, loudly when it is little: a full
/// disk surfaces later as a compiler, linker or pip failure whose log may be empty (nothing can
/// be written), which reads like a different problem.
fn disk() {
    match free_bytes() {
        Some(free) if free < DISK_WARNING_BYTES => eprintln!(
            "xtask: WARNING: only {:.1} GiB free on the file system of {}; a cold build and its \
             test environments need ~20 GiB, and a full disk shows up as failures with empty logs",
            gib(free),
            crate::workspace_root().display()
        ),
        Some(free) => eprintln!("xtask: {:.1} GiB free for the build", gib(free)),
        None => eprintln!("xtask: cannot tell the free disk space (`df` failed)"),
    }
}

/// Free bytes on the workspace's file system, from `df` (POSIX output format).
pub(crate) fn free_bytes() -> Option<u64> {
    let output = Command::new("df")
        .args(["-P", "-k"])
        .arg(crate::workspace_root())
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let kib: u64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}

/// The Octavia and Neutron venvs under `target/`, built once per constraints file (pip, from
/// PyPI). Without them the OpenStack tests skip loudly, or fail under `CI=true`; so does this.
fn python() -> anyhow::Result<()> {
    match nephrite_test_services::install_venvs() {
        Ok(venvs) => {
            for venv in venvs {
                eprintln!("xtask: Python environment ready: {}", venv.display());
            }
            Ok(())
        }
        Err(unavailable) if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            let free = free_bytes().map_or_else(
                || "unknown".to_owned(),
                |free| format!("{:.1} GiB", gib(free)),
            );
            bail!("the OpenStack Python environments: {unavailable} (free disk: {free})")
        }
        Err(unavailable) => {
            eprintln!(
                "xtask: the OpenStack Python environments are not installed ({unavailable}); \
                 the tests that need them will say they are skipped"
            );
            Ok(())
        }
    }
}

/// The Debian packages of [`DEBIAN_PACKAGES`].
fn debian() -> anyhow::Result<()> {
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|name| !installed(name))
        .collect();
    if missing.is_empty() {
        eprintln!("xtask: every test package is installed");
        return Ok(());
    }
    if !is_root() {
        eprintln!(
            "xtask: not root, so not installing {}; install them with\n  sudo apt-get install -y {}\n\
             the tests that need them will say they are skipped",
            missing.join(", "),
            missing.join(" ")
        );
        return Ok(());
    }
    install(missing)
}

/// Installs those of `packages` that are missing (as root; the caller has checked), with no
/// system service started.
pub fn install_missing(packages: &[&str]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|name| !installed(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    install(missing)
}

fn install(missing: Vec<&str>) -> anyhow::Result<()> {
    eprintln!(
        "xtask: installing {} (with a policy-rc.d that starts no system service)",
        missing.join(", ")
    );
    let _no_services = NoServiceStarts::install()?;
    apt(&["update"])?;
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(&missing);
    apt(&args)?;
    let still: Vec<&str> = missing.into_iter().filter(|n| !installed(n)).collect();
    if !still.is_empty() {
        bail!("apt-get did not install {}", still.join(", "));
    }
    Ok(())
}

/// Where Debian's `invoke-rc.d` asks whether a package's maintainer script may start a service.
const POLICY_RC_D: &str = "/usr/sbin/policy-rc.d";

/// Forbids service starts while it lives: writes `policy-rc.d` (exit 101, "action forbidden")
/// unless one exists already, and removes only the file it wrote.
struct NoServiceStarts {
    wrote: bool,
}

impl NoServiceStarts {
    fn install() -> anyhow::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        if std::path::Path::new(POLICY_RC_D).exists() {
            return Ok(Self { wrote: false });
        }
        std::fs::write(
            POLICY_RC_D,
            "#!/bin/sh\n# written by cargo xtask while it installs test packages\nexit 101\n",
        )
        .with_context(|| format!("writing {POLICY_RC_D}"))?;
        std::fs::set_permissions(POLICY_RC_D, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {POLICY_RC_D} executable"))?;
        Ok(Self { wrote: true })
    }
}

impl Drop for NoServiceStarts {
    fn drop(&mut self) {
        if self.wrote
            && let Err(err) = std::fs::remove_file(POLICY_RC_D)
        {
            eprintln!("xtask: could not remove {POLICY_RC_D}: {err}");
        }
    }
}

fn apt(args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get")?;
    if !status.success() {
        bail!("`apt-get {}` exited with {status}", args.join(" "));
    }
    Ok(())
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| {
            out.status.success() && String::from_utf8_lossy(&out.stdout).ends_with(" installed")
        })
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}
