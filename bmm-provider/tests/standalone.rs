//! `bmm-provider apply -f / status / delete` (the real binary) against bmm-sim behind the
//! contract proxy.

mod support;

use std::path::Path;
use std::process::Command;

use nephrite_bmm_sim::{Kind, SimConfig};
use serde_json::Value;
use support::{Harness, ORG, fast_config};

fn provider(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bmm-provider"))
        .args(args)
        .current_dir(dir)
        .env_remove("BMM_ENDPOINT")
        .output()
        .expect("run bmm-provider")
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

async fn in_background(dir: std::path::PathBuf, args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        provider(&dir, &refs)
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_is_idempotent_status_reports_and_delete_leaves_nothing() {
    let h = Harness::start(SimConfig {
        fault_rate: 0.05,
        ..fast_config()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let token = support::token();
    std::fs::write(dir.path().join("token"), format!("{}\n", token.expose())).expect("token file");
    let file = examples().join("cluster.yaml");
    let apply_args = vec![
        "apply".to_string(),
        "-f".into(),
        file.display().to_string(),
        "--endpoint".into(),
        h.url.clone(),
        "--org".into(),
        ORG.into(),
        "--token-file".into(),
        "token".into(),
        "--state".into(),
        "state.json".into(),
        "--poll-interval".into(),
        "50ms".into(),
        "--timeout".into(),
        "60s".into(),
    ];
    let out = in_background(dir.path().into(), apply_args.clone()).await;
    assert!(
        out.status.success(),
        "apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("machine") && l.contains(" true "))
            .count(),
        3,
        "{table}"
    );
    let created: Vec<u64> = Kind::ALL.iter().map(|k| h.sim.created(*k)).collect();
    assert_eq!(
        created,
        vec![1, 1, 2, 1, 3],
        "ipblock, vpc, subnets, nsg, instances"
    );

    let state_text = std::fs::read_to_string(dir.path().join("state.json")).expect("state");
    assert!(
        !state_text.contains(token.expose()),
        "the state file never holds the token"
    );
    let state: Value = serde_json::from_str(&state_text).expect("json");
    assert_eq!(state["org"], ORG);
    assert_eq!(state["tokenFile"], "token");
    let cp = &state["machines"][0];
    let provider_id = cp["spec"]["providerID"].as_str().expect("provider id");
    assert!(
        provider_id.starts_with(&format!("nvidia-bmm://{}/", h.sim.site_id())),
        "{provider_id}"
    );
    let endpoint = &state["clusters"][0]["controlPlaneEndpoint"];
    assert_eq!(endpoint["port"], 6443);
    assert_eq!(
        endpoint["host"], cp["status"]["addresses"][0]["address"],
        "first control-plane address"
    );

    // Again: nothing changes in the platform.
    let out = in_background(dir.path().into(), apply_args).await;
    assert!(
        out.status.success(),
        "second apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: Vec<u64> = Kind::ALL.iter().map(|k| h.sim.created(*k)).collect();
    assert_eq!(again, created);

    // status from the state file alone, as JSON.
    let out = provider(
        dir.path(),
        &["status", "--state", "state.json", "-o", "json"],
    );
    assert!(out.status.success());
    let status: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(status["machines"].as_array().map(Vec::len), Some(3));
    // ... and as a table for people: a header, then a line per cluster and per machine.
    let out = provider(
        dir.path(),
        &["status", "--state", "state.json", "-o", "table"],
    );
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["KIND", "NAME", "READY", "STATE", "DETAIL"],
        "{table}"
    );
    let machines: Vec<&str> = lines.filter(|l| l.starts_with("machine ")).collect();
    assert_eq!(machines.len(), 3, "{table}");
    assert!(
        machines
            .iter()
            .all(|l| l.split_whitespace().nth(2) == Some("true")),
        "{table}"
    );

    // delete from the state file alone.
    let out = in_background(
        dir.path().into(),
        vec![
            "delete".into(),
            "--state".into(),
            "state.json".into(),
            "--poll-interval".into(),
            "50ms".into(),
            "--timeout".into(),
            "60s".into(),
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "delete failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for kind in Kind::ALL {
        assert_eq!(h.sim.live(kind), 0, "{kind:?} leaked");
    }
    h.assert_contract_held();
}

#[tokio::test]
async fn a_bad_cidr_is_refused_naming_the_field_before_any_call() {
    let h = Harness::start(fast_config()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("token"), support::token().expose()).expect("token");
    let file = examples().join("bad-cidr.yaml");
    let out = provider(
        dir.path(),
        &[
            "apply",
            "-f",
            &file.display().to_string(),
            "--endpoint",
            &h.url,
            "--org",
            ORG,
            "--token-file",
            "token",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.subnets[0].cidr") && err.contains("host bits"),
        "{err}"
    );
    assert!(
        h.operations_seen().is_empty(),
        "no API call: {:?}",
        h.operations_seen()
    );
}

#[test]
fn output_into_a_closed_pipe_is_not_a_crash() {
    // `bmm-provider status -o json | head` closes the pipe early: exit 0, no panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_bmm-provider"))
        .arg("crds")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run bmm-provider");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn crds_prints_the_four_crds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = provider(dir.path(), &["crds"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let kinds: Vec<String> = serde_norway::Deserializer::from_str(&text)
        .map(|d| {
            let v = <Value as serde::Deserialize>::deserialize(d).expect("yaml");
            v["spec"]["names"]["kind"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "NvidiaBMMCluster",
            "NvidiaBMMClusterTemplate",
            "NvidiaBMMMachine",
            "NvidiaBMMMachineTemplate"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_right_after_create_with_a_rotated_token_leaks_nothing() {
    let h = Harness::start(SimConfig {
        provision_delay: std::time::Duration::from_secs(2),
        ..fast_config()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A token that expires almost at once.
    let now = jiff::Timestamp::now().as_second() as u64;
    let short =
        nephrite_bmm_sim::auth::issue(support::SECRET, ORG, now, std::time::Duration::from_secs(2))
            .expect("token");
    std::fs::write(dir.path().join("token"), &short).expect("token file");
    let file = examples().join("cluster.yaml");
    let out = in_background(
        dir.path().into(),
        [
            "apply",
            "-f",
            &file.display().to_string(),
            "--endpoint",
            &h.url,
            "--org",
            ORG,
            "--token-file",
            "token",
            "--state",
            "state.json",
            "--poll-interval",
            "50ms",
            "--timeout",
            "1s",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(
        !out.status.success(),
        "the machines cannot be Ready within 1s"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not Ready after") && err.contains("machine default/demo-cp-0"),
        "names what did not get there: {err}"
    );
    assert_eq!(
        h.sim.created(Kind::Vpc),
        1,
        "the network was created before the timeout"
    );
    let instances = h.sim.created(Kind::Instance);

    // The old token expires; the user rotates the file. Delete re-reads it.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    std::fs::write(dir.path().join("token"), support::token().expose()).expect("rotate");
    let out = in_background(
        dir.path().into(),
        [
            "delete",
            "--state",
            "state.json",
            "--poll-interval",
            "50ms",
            "--timeout",
            "60s",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(
        out.status.success(),
        "delete failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for kind in Kind::ALL {
        assert_eq!(h.sim.live(kind), 0, "{kind:?} leaked");
    }
    assert_eq!(
        h.sim.created(Kind::Instance),
        instances,
        "delete creates nothing"
    );
    assert!(instances <= 3, "no instance created twice");
    h.assert_contract_held();
}

#[test]
fn bmm_provider_answers_version() {
    let out = Command::new(env!("CARGO_BIN_EXE_bmm-provider"))
        .arg("--version")
        .output()
        .expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("bmm-provider {}", env!("CARGO_PKG_VERSION"))
    );
}
