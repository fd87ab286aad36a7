//! Executing a CNI plugin the way a container runtime does: exactly the CNI environment (no
//! inherited variables), the network configuration on stdin, the result as JSON on stdout.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Runs `plugin` with exactly `env` and `stdin`; its exit code (-1 when killed by a signal)
/// and its stdout as JSON (`Value::Null` when it printed nothing).
///
/// # Panics
///
/// When the plugin cannot be started or prints something that is not JSON: both are test
/// failures, named with the plugin's path and what it printed.
pub fn exec_plugin<'a>(
    plugin: &Path,
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
    stdin: &str,
) -> (i32, Value) {
    let mut child = Command::new(plugin)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting CNI plugin {}: {e}", plugin.display()));
    if let Some(mut input) = child.stdin.take() {
        // A plugin that exits before reading all of stdin closes the pipe: its answer says why.
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for CNI plugin {}: {e}", plugin.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    let value = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "CNI plugin {} printed something that is not JSON ({e}): {text:?}; stderr: {}",
                plugin.display(),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    (out.status.code().unwrap_or(-1), value)
}
