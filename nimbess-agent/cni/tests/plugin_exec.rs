//! The `nimbess-cni` binary executed the way a runtime executes it (exactly the CNI
//! environment, the network configuration on stdin), where it answers without an agent: the
//! VERSION command, bad environments and configurations, an agent that never answers, an
//! endless stdin, and a person asking `--version` or `--help`. The calls that reach an agent
//! are tested beside the agent (`nimbess-agent/tests/cni_plugin.rs`, `cni_credentials.rs`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_test_services::cni::exec_plugin;
use serde_json::{Value, json};

const PLUGIN: &str = env!("CARGO_BIN_EXE_nimbess-cni");

/// Execute the plugin with exactly `env` and `stdin`; returns (exit code, stdout JSON).
fn run_plugin(env: &BTreeMap<&str, String>, stdin: &str) -> (i32, Value) {
    exec_plugin(
        Path::new(PLUGIN),
        env.iter().map(|(k, v)| (*k, v.as_str())),
        stdin,
    )
}

#[test]
fn version_needs_no_agent() {
    let env = BTreeMap::from([("CNI_COMMAND", "VERSION".to_string())]);
    let (code, out) = run_plugin(&env, r#"{"cniVersion":"1.0.0"}"#);
    assert_eq!(code, 0);
    assert_eq!(out["cniVersion"], "1.0.0");
    assert_eq!(out["supportedVersions"], json!(["0.4.0", "1.0.0", "1.1.0"]));
}

#[test]
fn bad_environment_and_bad_config_codes() {
    let conf = r#"{"cniVersion":"1.1.0","name":"blue","type":"nimbess-cni","agentSocket":"/nonexistent/x.sock"}"#;
    let (code, out) = run_plugin(&BTreeMap::new(), conf);
    assert_eq!((code, out["code"].as_u64()), (1, Some(4)), "{out}");
    assert_eq!(out["cniVersion"], "1.1.0");
    let add = |extra: &[(&'static str, &str)]| {
        let mut env = BTreeMap::from([("CNI_COMMAND", "ADD".to_string())]);
        for (k, v) in extra {
            env.insert(*k, v.to_string());
        }
        env
    };
    let (_, out) = run_plugin(
        &add(&[("CNI_CONTAINERID", "c"), ("CNI_IFNAME", "eth0")]),
        conf,
    );
    assert_eq!(out["code"], 4, "missing CNI_NETNS: {out}");
    assert!(out["msg"].as_str().unwrap_or("").contains("CNI_NETNS"));
    let full = add(&[
        ("CNI_CONTAINERID", "c"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_NETNS", "/proc/self/ns/net"),
    ]);
    let (code, out) = run_plugin(&full, "{oops");
    assert_eq!((code, out["code"].as_u64()), (1, Some(6)), "{out}");
    let (_, out) = run_plugin(&full, r#"{"cniVersion":"1.1.0","type":"nimbess-cni"}"#);
    assert_eq!(out["code"], 7, "{out}");
}

#[test]
fn no_agent_is_try_again_later_after_waiting() {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("none.sock");
    let conf = json!({"cniVersion":"1.0.0","name":"blue","type":"nimbess-cni","agentSocket":sock})
        .to_string();
    let env = BTreeMap::from([("CNI_COMMAND", "STATUS".to_string())]);
    let started = Instant::now();
    let (code, out) = run_plugin(&env, &conf);
    assert_eq!((code, out["code"].as_u64()), (1, Some(11)), "{out}");
    assert_eq!(out["cniVersion"], "1.0.0");
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "it retried for 10 s"
    );
}

#[test]
fn an_endless_stdin_is_cut_off_not_buffered() {
    let mut child = Command::new(PLUGIN)
        .env_clear()
        .env("CNI_COMMAND", "ADD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("plugin");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let chunk = vec![b' '; 64 * 1024];
        // 64 MiB at most; the plugin stops reading after 1 MiB (broken pipe)
        for _ in 0..1024 {
            if stdin.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (out.status.code(), doc["code"].as_u64()),
        (Some(1), Some(6)),
        "{doc}"
    );
    assert!(
        doc["msg"].as_str().unwrap_or("").contains("1048576 bytes"),
        "{doc}"
    );
}

#[test]
fn a_person_asking_gets_the_version_and_the_help() {
    let version = Command::new(PLUGIN)
        .arg("--version")
        .env_remove("CNI_COMMAND")
        .output()
        .expect("plugin");
    assert!(version.status.success());
    let text = String::from_utf8_lossy(&version.stdout);
    assert_eq!(
        text.trim(),
        format!(
            "nimbess-cni {} (CNI 0.4.0, 1.0.0, 1.1.0)",
            env!("CARGO_PKG_VERSION")
        )
    );
    let help = Command::new(PLUGIN)
        .arg("--help")
        .env_remove("CNI_COMMAND")
        .output()
        .expect("plugin");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("\"type\": \"nimbess-cni\""), "{text}");
    assert!(text.contains("Usage: nimbess-cni"), "{text}");
}
