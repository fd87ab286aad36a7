//! The cluster under test: `cargo xtask cluster up --dir D` in a fresh temporary directory,
//! `cargo xtask cluster down --dir D` when the [`Cluster`] is dropped (a failing test unwinds
//! through it too), and kubectl of the same release against its admin kubeconfig.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use nephrite_test_services::kube_apiserver::{bin_dir, kube_root};

/// The variable naming a running cluster's directory to test instead of starting one (kept
/// running afterwards): for trying cases against `cargo xtask cluster up --dir D`.
pub const CLUSTER_DIR_ENV: &str = "NEPHRITE_TEST_CLUSTER_DIR";

/// A running one-node cluster, removed on drop unless it was given by [`CLUSTER_DIR_ENV`].
#[derive(Debug)]
pub struct Cluster {
    /// Whether this test started it (and removes it).
    owned: bool,
    /// The temporary directory holding the cluster's directory.
    parent: PathBuf,
    /// The cluster's state directory (`--dir`).
    dir: PathBuf,
    /// The admin kubeconfig.
    kubeconfig: PathBuf,
    /// kubectl of the cluster's release.
    kubectl: PathBuf,
}

/// The workspace's root (this crate is `tests/cluster`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The variable naming the xtask binary to run (`cargo xtask cluster test` and `cargo xtask
/// test` set it to themselves); without it the tests `cargo run` xtask.
pub const XTASK_ENV: &str = "NEPHRITE_XTASK";

/// The variable that, set to `1`, has the tests take the workspace binaries in `target/debug`
/// as they are when there (`cargo xtask test` has just built them all).
pub const PREBUILT_ENV: &str = "NEPHRITE_CLUSTER_PREBUILT";

/// Whether [`PREBUILT_ENV`] says to take the built binaries as they are.
pub fn prebuilt() -> bool {
    std::env::var_os(PREBUILT_ENV).is_some_and(|v| v == "1")
}

/// `cargo xtask <args> --dir <dir>`: the binary [`XTASK_ENV`] names, else the alias spelt out
/// (`cargo run -p xtask --`), from the workspace root.
fn xtask(args: &[&str], dir: &Path) -> Command {
    let mut command = match std::env::var_os(XTASK_ENV).filter(|x| !x.is_empty()) {
        Some(xtask) => Command::new(xtask),
        None => {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut command = Command::new(cargo);
            command.args(["run", "--quiet", "--package", "xtask", "--"]);
            command
        }
    };
    command
        .args(args)
        .arg("--dir")
        .arg(dir)
        .current_dir(workspace_root());
    command
}

impl Cluster {
    /// Start the cluster (building what `cluster up` builds when missing). On failure what did
    /// start is removed again before the error returns.
    pub fn up() -> anyhow::Result<Cluster> {
        if let Some(dir) = std::env::var_os(CLUSTER_DIR_ENV).filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            eprintln!(
                "cluster test: testing the running cluster in {} ({CLUSTER_DIR_ENV}); it stays up",
                dir.display()
            );
            return Ok(Cluster {
                owned: false,
                kubeconfig: dir.join("kubeconfig"),
                kubectl: bin_dir(&kube_root()).join("kubectl"),
                parent: dir.clone(),
                dir,
            });
        }
        let parent = tempfile::Builder::new()
            .prefix("nephrite-cluster-test-")
            .tempdir()
            .context("creating a temporary directory")?
            .keep();
        let dir = parent.join("cluster");
        let cluster = Cluster {
            owned: true,
            kubeconfig: dir.join("kubeconfig"),
            kubectl: bin_dir(&kube_root()).join("kubectl"),
            parent,
            dir,
        };
        eprintln!(
            "cluster test: cargo xtask cluster up --dir {}",
            cluster.dir.display()
        );
        let status = xtask(&["cluster", "up"], &cluster.dir)
            .status()
            .context("running cargo xtask cluster up")?;
        anyhow::ensure!(
            status.success(),
            "cargo xtask cluster up --dir {} failed ({status}); its logs are in {}/logs",
            cluster.dir.display(),
            cluster.dir.display()
        );
        Ok(cluster)
    }

    /// The cluster's state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// containerd's socket (for `ctr`).
    pub fn containerd_socket(&self) -> PathBuf {
        self.dir.join("containerd").join("containerd.sock")
    }

    /// `kubectl --kubeconfig <admin> <args>`, its standard output on success.
    pub fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        self.kubectl_with_input(args, None)
    }

    /// `kubectl apply -f -` of `object` (JSON, which kubectl reads as YAML).
    pub fn apply(&self, object: &serde_json::Value) -> anyhow::Result<()> {
        self.kubectl_with_input(&["apply", "-f", "-"], Some(&object.to_string()))
            .with_context(|| format!("applying {object}"))
            .map(drop)
    }

    /// `kubectl get <args> -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let text = self.kubectl(&all)?;
        serde_json::from_str(&text).with_context(|| format!("kubectl {all:?} printed {text}"))
    }

    fn kubectl_with_input(&self, args: &[&str], input: Option<&str>) -> anyhow::Result<String> {
        let mut command = Command::new(&self.kubectl);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .with_context(|| format!("running {}", self.kubectl.display()))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(input.as_bytes())
                .context("writing kubectl's input")?;
        }
        let output = child.wait_with_output().context("waiting for kubectl")?;
        anyhow::ensure!(
            output.status.success(),
            "kubectl {args:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        eprintln!(
            "cluster test: cargo xtask cluster down --dir {}",
            self.dir.display()
        );
        match xtask(&["cluster", "down"], &self.dir).status() {
            Ok(status) if status.success() => {
                let _ = std::fs::remove_dir_all(&self.parent);
            }
            Ok(status) => eprintln!(
                "cluster test: WARNING: cargo xtask cluster down --dir {} failed ({status}); \
                 what it could not remove is named above",
                self.dir.display()
            ),
            Err(e) => eprintln!(
                "cluster test: WARNING: could not run cargo xtask cluster down --dir {}: {e}",
                self.dir.display()
            ),
        }
    }
}
