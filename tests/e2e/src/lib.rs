//! The daemons together, as their binaries run: the stages of the path `cargo xtask demo`
//! walks (BMM clusters → preparer sites → ntc's topology → nimbess pods → kuryr-l7 routes), and
//! the lab they run in, shared by the demo and the cross-daemon tests under `tests/`.
//!
//! Everything here drives the real binaries from the workspace's `target/debug` over their
//! command lines and APIs, as an operator would; nothing links a daemon's library.

pub mod bmm;
pub mod demo;
pub mod http;
pub mod interrupt;
pub mod lab;
pub mod pki;
pub mod pods;
pub mod progress;
pub mod router;
pub mod tko;

use std::path::{Path, PathBuf};

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Where the daemons' dev-profile binaries are: `$CARGO_TARGET_DIR/debug`, else
/// `target/debug` under the workspace.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("debug")
}

/// A lab over [`bin_dir`] for a cross-daemon test, or `None` once it has said, loudly, why the
/// test is skipped: one of `binaries` is not built (the workspace's test build puts them
/// there). Under `CI=true` a missing binary fails the test instead.
///
/// # Panics
/// When a binary is missing under `CI=true`, or the lab's temporary directory cannot be made.
pub fn test_lab(binaries: &[&str]) -> Option<lab::Lab> {
    let missing: Vec<&&str> = binaries
        .iter()
        .filter(|b| !bin_dir().join(b).exists())
        .collect();
    if missing.is_empty() {
        return Some(lab::Lab::new(bin_dir()).expect("a lab"));
    }
    let why = format!(
        "the binaries {missing:?} are not in {}: build the workspace's tests first \
         (cargo xtask test does)",
        bin_dir().display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("SKIPPED: {why}");
    None
}
