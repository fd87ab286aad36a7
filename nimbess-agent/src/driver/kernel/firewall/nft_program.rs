//! The `nft` program, which renders the Services' and the policies'
//! tables from text (`nft -f -`, one transaction per script) and reads
//! tables back as JSON (`nft -j list table`). The kernel driver refuses to
//! start without it ([`require`]): every Service and NetworkPolicy would
//! otherwise fail one by one, long after start, in the log only.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::driver::DriverError;

/// The program.
pub const PROGRAM: &str = "nft";
/// The Debian (and Ubuntu) package that installs it.
pub const PACKAGE: &str = "nftables";

/// The first executable file named `program` in the directories of a
/// `PATH`-style list.
pub fn find_program(program: &str, path: &OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Check `nft` is on the `PATH` the agent runs with (`path`, the value of
/// `PATH`); returns where.
///
/// # Errors
/// [`DriverError::MissingProgram`], naming the package to install.
pub fn require(path: Option<&OsStr>) -> Result<PathBuf, DriverError> {
    path.and_then(|p| find_program(PROGRAM, p))
        .ok_or_else(|| DriverError::MissingProgram {
            program: PROGRAM,
            package: PACKAGE,
            needed_for: "Services and NetworkPolicies",
            path: path.map_or_else(
                || "(PATH is not set)".to_string(),
                |p| p.to_string_lossy().into_owned(),
            ),
        })
}

/// Load `script` with `nft -f -` (one transaction; empty: nothing to do).
///
/// # Errors
/// `nft` could not run, or refused the script (its message included);
/// `what` names the change.
pub fn load(script: &str, what: &str) -> Result<(), DriverError> {
    if script.is_empty() {
        return Ok(());
    }
    let os = |source| DriverError::Os {
        what: format!("run {PROGRAM} -f - ({what})"),
        source,
    };
    let mut child = Command::new(PROGRAM)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(os)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes()).map_err(os)?;
    }
    let out = child.wait_with_output().map_err(os)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(DriverError::State(format!(
            "{PROGRAM} refused the rules ({what}): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The items of table `table` (family `ip`) as `nft -j list` writes them
/// (`None`: no such table, or `nft` could not list it).
pub fn list_table(table: &str) -> Option<Vec<serde_json::Value>> {
    let out = Command::new(PROGRAM)
        .args(["-j", "list", "table", "ip", table])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    match json.get_mut("nftables").map(serde_json::Value::take) {
        Some(serde_json::Value::Array(items)) => Some(items),
        _ => None,
    }
}

/// The rules each chain of table `table` (family `ip`) holds, by chain
/// (`None`: no such table).
pub fn listed_rules(table: &str) -> Option<BTreeMap<String, usize>> {
    let mut chains = BTreeMap::new();
    for item in list_table(table)? {
        if let Some(name) = item["chain"]["name"].as_str() {
            chains.entry(name.to_string()).or_insert(0);
        }
        if let Some(name) = item["rule"]["chain"].as_str() {
            *chains.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    Some(chains)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn executable(dir: &Path, name: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let file = dir.join(name);
        std::fs::write(&file, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        file
    }

    #[test]
    fn nft_is_found_in_the_first_directory_holding_an_executable_one() {
        let (a, b, c) = (
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
            tempfile::tempdir().expect("dir"),
        );
        // a directory named nft, and a file without the execute bits, are skipped
        std::fs::create_dir(a.path().join("nft")).expect("mkdir");
        executable(b.path(), "nft", 0o644);
        let want = executable(c.path(), "nft", 0o755);
        let path = std::env::join_paths([a.path(), b.path(), c.path()]).expect("PATH");
        assert_eq!(require(Some(&path)).expect("found"), want);
    }

    #[test]
    fn without_nft_the_error_names_the_package_and_the_path_searched() {
        let empty = tempfile::tempdir().expect("dir");
        let path = empty.path().as_os_str();
        let e = require(Some(path)).expect_err("no nft there");
        let message = e.to_string();
        assert!(message.contains("`nft`"), "{message}");
        assert!(message.contains("package nftables"), "{message}");
        assert!(
            message.contains(&empty.path().display().to_string()),
            "{message}"
        );
        let e = require(None).expect_err("no PATH");
        assert!(e.to_string().contains("PATH is not set"), "{e}");
    }
}
