//! `cargo xtask kube up` / `down` as the README walk-through runs them: up writes a kubeconfig
//! that kubectl uses to apply our CRDs, a second up on the same directory is refused, and
//! down stops both servers and leaves nothing behind.

use std::path::Path;
use std::process::{Command, Output};

use nephrite_test_services::kube_apiserver::KubeBinaries;
use nephrite_test_services::process::runs;
use nephrite_test_services::{Unavailable, program};
use serde_json::Value;

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("running xtask")
}

fn kubectl(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("running kubectl")
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The binaries and kubectl, or None after saying why the test is skipped.
fn requirements(test: &str) -> Option<std::path::PathBuf> {
    let found: Result<_, Unavailable> =
        KubeBinaries::find().and_then(|_| program("kubectl", "kubernetes-client"));
    match found {
        Ok(kubectl) => Some(kubectl),
        Err(e) => {
            e.skip(test);
            None
        }
    }
}

#[test]
fn up_serves_our_crds_to_kubectl_and_down_stops_everything_and_removes_the_state() {
    let Some(kubectl_path) = requirements("up_serves_our_crds_to_kubectl") else {
        return;
    };
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("cluster");
    let dir_arg = dir.to_str().unwrap();

    let up = xtask(&["kube", "up", "--dir", dir_arg]);
    assert!(up.status.success(), "kube up failed:\n{}", text(&up));
    assert!(
        text(&up).contains(&format!("export KUBECONFIG={dir_arg}/kubeconfig")),
        "{}",
        text(&up)
    );
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap()).unwrap();
    let pids: Vec<u32> = ["kube-apiserver", "etcd"]
        .iter()
        .map(|what| record["pids"][what].as_u64().unwrap() as u32)
        .collect();
    assert!(pids.iter().all(|&pid| runs(pid)), "{record}");

    let again = xtask(&["kube", "up", "--dir", dir_arg]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("already holds a kube-apiserver"),
        "{}",
        text(&again)
    );

    let kubeconfig = dir.join("kubeconfig");
    let apply = kubectl(
        &kubectl_path,
        &kubeconfig,
        &["apply", "--server-side", "-f", "topology/deploy/crds.yaml"],
    );
    assert!(apply.status.success(), "{}", text(&apply));
    let wait = kubectl(
        &kubectl_path,
        &kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/nftopologies.topology.nephio.org",
        ],
    );
    assert!(wait.status.success(), "{}", text(&wait));
    let crds = kubectl(&kubectl_path, &kubeconfig, &["get", "crd", "-o", "name"]);
    assert!(
        text(&crds).contains(
            "customresourcedefinition.apiextensions.k8s.io/nftopologies.topology.nephio.org"
        ),
        "{}",
        text(&crds)
    );

    let down = xtask(&["kube", "down", "--dir", dir_arg]);
    assert!(down.status.success(), "kube down failed:\n{}", text(&down));
    for pid in pids {
        assert!(!runs(pid), "pid {pid} still runs after down");
    }
    assert!(!dir.exists(), "{} left behind", dir.display());

    let twice = xtask(&["kube", "down", "--dir", dir_arg]);
    assert!(!twice.status.success());
    assert!(
        text(&twice).contains("holds no cluster"),
        "{}",
        text(&twice)
    );
}
