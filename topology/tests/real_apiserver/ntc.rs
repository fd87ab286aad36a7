//! `ntc serve --backend porch` as deployed: the real binary, its kubeconfig carrying only the
//! token minted for ServiceAccount `nephrite-system/ntc` after `deploy/kubernetes.yaml`'s
//! RBAC was applied. Its log goes to a file the test reads when it stops, so that every
//! refusal the API server gave ntc ("forbidden") fails the scenario even when ntc recovered.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use nephrite_test_services::KubeApiServer;

use super::cluster::crate_file;

/// The manifest ntc is deployed with, relative to the crate.
pub const MANIFEST: &str = "deploy/kubernetes.yaml";

/// ntc's ServiceAccount, as the manifest names it.
pub const ACCOUNT: &str = "nephrite-system/ntc";

/// The Namespace of ntc's leader-election Lease, where the manifest's Role grants Leases.
pub const LEASE_NAMESPACE: &str = "nephrite-system";

/// One replica: its identity in the Lease (also its field manager, so `managedFields` says
/// which replica wrote what) and the Lease it campaigns for.
pub struct Replica<'a> {
    /// `--identity` and `--field-manager`.
    pub identity: &'a str,
    /// `--lease-name` (one per scenario: the server is shared).
    pub lease: &'a str,
}

/// A running ntc; killed if the test fails before [`Ntc::stop`].
pub struct Ntc {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Ntc {
    /// Applies ntc's access from its manifest, mints its token and starts the binary watching
    /// namespace `ns` with only that token, alone on the Lease `ntc-<ns>`.
    pub async fn start(kube: &KubeApiServer, ns: &str) -> anyhow::Result<Ntc> {
        let lease = format!("ntc-{ns}");
        let replica = Replica {
            identity: "ntc",
            lease: &lease,
        };
        Ntc::start_replica(kube, ns, &replica).await
    }

    /// As [`Ntc::start`], as `replica`, with a short lease (6 s, renewed every second, given
    /// up after 4 s without renewal) so a takeover after a kill is quick.
    pub async fn start_replica(
        kube: &KubeApiServer,
        ns: &str,
        replica: &Replica<'_>,
    ) -> anyhow::Result<Ntc> {
        let manifest = crate_file(MANIFEST)?;
        let credentials = kube
            .endpoint()
            .apply_access(MANIFEST, &manifest, ACCOUNT)
            .await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, &credentials.kubeconfig)?;
        let log = dir.path().join("ntc.log");
        let child = Command::new(env!("CARGO_BIN_EXE_ntc"))
            .args([
                "serve",
                "--backend",
                "porch",
                "--listen",
                "127.0.0.1:0",
                "--namespace",
                ns,
                "--log-format",
                "text",
                "--identity",
                replica.identity,
                "--field-manager",
                replica.identity,
                "--lease-namespace",
                LEASE_NAMESPACE,
                "--lease-name",
                replica.lease,
                "--lease-duration",
                "6",
                "--lease-renew-deadline",
                "4",
                "--lease-retry-period",
                "1",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .env_remove("NTC_POLICY")
            .env_remove("NTC_NO_POLICY")
            .env_remove("NTC_BACKEND")
            .env_remove("NTC_NO_LEADER_ELECTION")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting ntc")?;
        Ok(Ntc {
            child,
            log,
            _dir: dir,
        })
    }

    /// What ntc logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines ntc logged, for a failure's context.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills ntc with SIGKILL (it releases nothing) and returns its log.
    pub fn kill(mut self) -> anyhow::Result<String> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(self.log())
    }

    /// Stops ntc with SIGTERM and returns its log; fails if it did not exit 0 or if the API
    /// server refused it anything.
    pub async fn stop(mut self) -> anyhow::Result<String> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        ensure!(status.success(), "kill -TERM {} failed", self.child.id());
        for _ in 0..400 {
            if let Some(status) = self.child.try_wait()? {
                let log = self.log();
                ensure!(status.success(), "ntc exited with {status}:\n{log}");
                let refused: Vec<&str> = log
                    .lines()
                    .filter(|l| l.contains("forbidden") || l.contains("Forbidden"))
                    .collect();
                ensure!(
                    refused.is_empty(),
                    "the API server refused ntc (its RBAC in {MANIFEST} lacks a verb):\n{}",
                    refused.join("\n")
                );
                return Ok(log);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "ntc did not stop within 20 s of SIGTERM:\n{}",
            self.log_tail(40)
        )
    }
}

impl Drop for Ntc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            eprintln!("ntc's log (last 40 lines):\n{}", self.log_tail(40));
        }
        let _ = self.child.wait();
    }
}
