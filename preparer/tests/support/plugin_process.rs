//! A plugin example (`annotate_plugin`, `replicas_validator`, `capacity_scheduler`) run as a
//! real process, killed when dropped.

use std::path::PathBuf;
use std::process::Child;

/// A running plugin and the loopback port it serves on.
pub struct PluginProcess {
    pub child: Child,
    pub port: u16,
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The built example `name` beside this test executable (`cargo test` builds the examples).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let debug = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = debug.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p nephrite-preparer` (it builds the examples)",
        path.display()
    );
    path
}
