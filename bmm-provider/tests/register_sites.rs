//! `bmm-provider apply --register-sites` (the real binary): the provisioned cluster becomes a
//! Site of the real preparer (in-process, SQLite, requiring a bearer token) with the
//! cluster's labels and BMM site as metadata; a token the preparer does not know is refused
//! and the error names the cluster.

mod support;

use std::path::Path;
use std::process::Command;

use clap::Parser as _;
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::ClientArgs;
use support::{Harness, ORG, fast_config};

/// `preparer serve` flags, parsed as the binary parses them.
#[derive(clap::Parser)]
struct PreparerFlags {
    #[command(flatten)]
    serve: ServeCommand,
}

fn apply(dir: &Path, bmm: &str, preparer: &str, token_file: &str) -> std::process::Output {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.yaml");
    Command::new(env!("CARGO_BIN_EXE_bmm-provider"))
        .args(["apply", "-f"])
        .arg(file)
        .args(["--endpoint", bmm, "--org", ORG, "--token-file", "token"])
        .args(["--state", "state.json", "--poll-interval", "50ms"])
        .args(["--timeout", "60s", "--register-sites", preparer])
        .args(["--preparer-token-file", token_file])
        .current_dir(dir)
        .env_remove("BMM_ENDPOINT")
        .output()
        .expect("run bmm-provider")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioned_clusters_become_sites_with_their_labels() {
    let h = Harness::start(fast_config()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("token"),
        format!("{}\n", support::token().expose()),
    )
    .expect("token file");
    std::fs::write(dir.path().join("tokens.csv"), "t-bmm,bmm-provider\n").expect("tokens");
    std::fs::write(dir.path().join("preparer-token"), "t-bmm\n").expect("token");
    std::fs::write(dir.path().join("wrong-token"), "t-guess\n").expect("token");
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let tokens = dir.path().join("tokens.csv").display().to_string();
    let command = PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--auth-tokens",
        &tokens,
    ])
    .expect("preparer flags")
    .serve;
    let preparer = start(&command, false).await.expect("preparer");
    let url = preparer.endpoint.to_string();

    // Unknown token: the clusters are provisioned, the registration is refused, named.
    let (d, bmm, u) = (dir.path().to_owned(), h.url.clone(), url.clone());
    let out = tokio::task::spawn_blocking(move || apply(&d, &bmm, &u, "wrong-token"))
        .await
        .expect("join");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("registering cluster demo as a site") && stderr.contains("Unauthenticated"),
        "{stderr}"
    );
    assert!(!stderr.contains("t-guess"), "{stderr}");

    let (d, bmm, u) = (dir.path().to_owned(), h.url.clone(), url.clone());
    let out = tokio::task::spawn_blocking(move || apply(&d, &bmm, &u, "preparer-token"))
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("site demo registered at {url}")),
        "{stdout}"
    );

    let channel = ClientArgs {
        token_file: Some(dir.path().join("preparer-token")),
        ..ClientArgs::default()
    }
    .dial(&preparer.endpoint)
    .await
    .expect("dial");
    let site = DataClient::new(channel)
        .get_site(pb::GetRequest { id: "demo".into() })
        .await
        .expect("site demo")
        .into_inner();
    let metadata = site.info.expect("info").metadata;
    assert_eq!(metadata["Site.nephio.org/site-type"], "edge");
    assert_eq!(metadata["Site.nephio.org/region"], "us-west");
    assert_eq!(metadata["Site.bmm.nvidia.com/site"], "sim-site");

    // Applying again updates the site; nothing is provisioned twice.
    let instances = h.sim.created(nephrite_bmm_sim::Kind::Instance);
    let (d, bmm, u) = (dir.path().to_owned(), h.url.clone(), url.clone());
    let out = tokio::task::spawn_blocking(move || apply(&d, &bmm, &u, "preparer-token"))
        .await
        .expect("join");
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("site demo updated"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(h.sim.created(nephrite_bmm_sim::Kind::Instance), instances);
    preparer.stop().await.expect("stop");
}
