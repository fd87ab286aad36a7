//! `kuryr-l7 vif-handler` refusing to start, as an operator sees it: the message names the
//! file, line and option, or the backend, and nothing else runs.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

fn start(conf: &str, backend: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kuryr.conf");
    std::fs::write(&path, conf).unwrap();
    let output = Command::new(BIN)
        .args(["vif-handler", "--source", "kube", "--backend", backend])
        .arg("--config-file")
        .arg(&path)
        .env("KUBECONFIG", dir.path().join("no-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).replace(&path.display().to_string(), "kuryr.conf"),
    )
}

#[test]
fn an_unknown_vif_driver_stops_the_handler_naming_file_line_and_driver() {
    let (ok, stderr) = start(
        "[kubernetes]\n# typo below\nenabled_vif_drivers = sriov, additonal_subnets\n",
        "neutron",
    );
    assert!(!ok);
    assert!(
        stderr.contains("kuryr.conf:3: [kubernetes] enabled_vif_drivers: unknown VIF driver \"additonal_subnets\""),
        "{stderr}"
    );
}

#[test]
fn the_neutron_backend_needs_credentials() {
    let (ok, stderr) = start("[kubernetes]\nenabled_vif_drivers = sriov\n", "neutron");
    assert!(!ok);
    assert!(
        stderr.contains("kuryr.conf: the neutron backend needs [neutron] auth_type"),
        "{stderr}"
    );
}

#[test]
fn the_nimbess_backend_needs_the_pod_network() {
    let (ok, stderr) = start("[kubernetes]\nenabled_vif_drivers = sriov\n", "nimbess");
    assert!(!ok);
    assert!(
        stderr.contains("the nimbess backend needs --pod-network"),
        "{stderr}"
    );
}

#[test]
fn a_source_other_than_kube_or_dir_is_refused_by_the_command_line() {
    let output = Command::new(BIN)
        .args([
            "vif-handler",
            "--source",
            "nfs:/tmp",
            "--config-file",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid value 'nfs:/tmp' for '--source")
            && stderr.contains("expected kube or dir:PATH"),
        "{stderr}"
    );
}
