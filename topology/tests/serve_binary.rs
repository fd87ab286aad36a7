//! `ntc serve --backend porch` as a user runs it: the real binary with a kubeconfig pointing at
//! the in-memory API server; it takes the leader-election Lease, creates the
//! PackageVariantSets, stops cleanly on SIGTERM (releasing the Lease), and a second run takes
//! the Lease at once and rewrites nothing.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use nephrite_ntc::porch::resources;
use support::*;

fn kubeconfig(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: \"{server}\"}}\n\
             contexts:\n- name: t\n  context: {{cluster: t, user: t}}\nusers:\n- name: t\n  user: {{}}\n\
             current-context: t\n"
        ),
    )
    .expect("kubeconfig written");
    path
}

/// The running binary; killed if a test fails before it is terminated.
struct Ntc(Child);

impl Drop for Ntc {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

fn spawn(kubeconfig: &std::path::Path) -> Ntc {
    let child = Command::new(env!("CARGO_BIN_EXE_ntc"))
        .args([
            "serve",
            "--backend",
            "porch",
            "--listen",
            "127.0.0.1:0",
            // The Lease beside the example (the in-memory server has no nephrite-system): the
            // second run takes it over from the first, which released it on SIGTERM.
            "--lease-namespace",
            NS,
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .env_remove("NTC_POLICY")
        .env_remove("NTC_BACKEND")
        .env_remove("NTC_NO_LEADER_ELECTION")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ntc starts");
    Ntc(child)
}

async fn terminate(mut ntc: Ntc) -> anyhow::Result<String> {
    let child = &mut ntc.0;
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill failed");
    for _ in 0..200 {
        if let Some(status) = child.try_wait()? {
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                std::io::Read::read_to_string(&mut pipe, &mut stderr)?;
            }
            anyhow::ensure!(status.success(), "ntc exited with {status}: {stderr}");
            return Ok(stderr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("ntc did not stop within 10 s of SIGTERM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_stops_on_sigterm_and_restarts_without_writes() -> anyhow::Result<()> {
    let (server, client) = server_with_example().await?;
    let dir = tempfile::tempdir()?;
    let config = kubeconfig(dir.path(), &server.url());
    create_all(&client, &example("topology.yaml")).await?;

    let ntc = spawn(&config);
    let pvs = api(&client, &resources::package_variant_set());
    if let Err(error) = eventually("four PackageVariantSets", || async {
        Ok((list(&pvs).await?.len() == 4).then_some(()))
    })
    .await
    {
        let log = terminate(ntc).await.unwrap_or_else(|e| e.to_string());
        anyhow::bail!("{error}; ntc's log:\n{log}");
    }
    let log = terminate(ntc).await?;
    assert!(log.contains("received SIGTERM"), "{log}");
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), NS);
    let lease = leases.get("ntc").await?;
    assert_eq!(
        lease.spec.and_then(|spec| spec.holder_identity),
        None,
        "released on SIGTERM"
    );

    server.requests().reset();
    let ntc = spawn(&config);
    eventually("the second run reconciles", || async {
        Ok((server.requests().count("list", "workloadclusters") > 0).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    terminate(ntc).await?;
    assert_eq!(list(&pvs).await?.len(), 4);
    assert_eq!(server.requests().writes("packagevariantsets"), 0);
    assert_eq!(server.requests().writes("capacities"), 0);
    server.shutdown().await?;
    Ok(())
}
