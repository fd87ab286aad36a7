//! The programs the tests start or measure against, from Debian's packages.
//!
//! The test-services crate (`tests/services`) lists them (`DEBIAN_PACKAGES`) and starts them on
//! free loopback ports; this step only makes sure they are installed. As root (CI), missing packages are installed with
//! `apt-get update` then `apt-get install -y`; otherwise the step says what to install and the
//! tests that need a missing program say they are skipped (or fail, under `CI=true`).

use std::process::Command;

use anyhow::{Context, bail};
use nephrite_test_services::DEBIAN_PACKAGES;

/// Installs the missing packages when running as root; lists them otherwise.
pub fn ensure() -> anyhow::Result<()> {
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
    eprintln!("xtask: installing {}", missing.join(", "));
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

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}
