//! Validation plugins, out of process (the `replicas_validator` example, run as a real
//! process, registered with the CLI as `--type validate`): the preparer asks them about every
//! prepared deployment holding one of their trigger kinds before it is marked prepared and
//! approved. A refusal keeps the deployment unprepared and unapproved with the plugin's
//! reasons as its error (the CLI's `deployment list` and the package's `Prepared` condition
//! show them; an approval is refused); a fixed package written by a person is validated again
//! and approved; a validator that cannot be reached keeps its deployments unapproved too; a
//! package without its trigger kinds is not held up.

mod support;

use std::process::{Command, Stdio};

use nephrite_krm::Package;
use nephrite_merge::DeploymentResource;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use std::process::Output;

use support::binary::ok;
use support::plugin_process::{PluginProcess, example_binary};
use support::*;

fn port() -> u16 {
    nephrite_test_services::free_loopback_port().expect("free port")
}

async fn spawn_validator() -> PluginProcess {
    let port = port();
    let child = Command::new(example_binary("replicas_validator"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("validator starts");
    wait_for(&format!("validator on port {port}"), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    PluginProcess { child, port }
}

/// The real CLI, off the runtime's threads (the daemon under test runs on them).
async fn cli(server: &str, args: &[&str]) -> Output {
    let server = server.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::binary::cli(&server, &args)
    })
    .await
    .expect("cli task")
}

fn scaler(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: example.org/v1\nkind: Scaler\nmetadata: {{name: {name}}}\nspec: {{replicas: {replicas}}}\n---\n{GATEWAY}"
    )
}

async fn wait_error(client: &mut Client, id: &str) -> pb::DeploymentInfo {
    let client = client.clone();
    let id = id.to_owned();
    wait_for(&format!("error on {id}"), || {
        let mut client = client.clone();
        let id = id.clone();
        async move {
            let info = get(&mut client, &id).await.info.unwrap();
            (!info.error.is_empty()).then_some(info)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validator_refusing_a_package_keeps_it_unapproved_with_its_reasons() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    let server = format!("http://{}", daemon.endpoint().trim_start_matches("tcp://"));
    let validator = spawn_validator().await;
    let dead = port();

    let endpoint = format!("http://127.0.0.1:{}", validator.port);
    ok(cli(
        &server,
        &[
            "plugin",
            "register",
            "replicas",
            "--type",
            "validate",
            "--endpoint",
            &endpoint,
            "--trigger",
            "example.org/v1/Scaler",
        ],
    )
    .await);
    let unreachable = format!("http://127.0.0.1:{dead}");
    ok(cli(
        &server,
        &[
            "plugin",
            "register",
            "gone",
            "--type",
            "validate",
            "--endpoint",
            &unreachable,
            "--trigger",
            "example.org/v1/Orphan",
        ],
    )
    .await);

    register_template(&mut client, "big", &scaler("web", 7)).await;
    register_template(&mut client, "small", &scaler("web", 2)).await;
    register_template(&mut client, "plain", GATEWAY).await;
    register_template(
        &mut client,
        "orphan",
        "apiVersion: example.org/v1\nkind: Orphan\nmetadata: {name: o}\nspec: {}\n",
    )
    .await;
    let big = create(&mut client, "big", "").await;
    let small = create(&mut client, "small", "").await;
    let plain = create(&mut client, "plain", "").await;
    let orphan = create(&mut client, "orphan", "").await;

    // The refused one: unprepared, unapproved, the reasons recorded.
    let refused = wait_error(&mut client, &big).await;
    assert!(!refused.prepared && !refused.approved, "{refused:?}");
    assert_eq!(
        refused.error,
        "validation failed: plugin replicas refused Scaler web: spec.replicas is 7, more than \
         the 3 allowed"
    );
    let package = Package::from_yaml(&get(&mut client, &big).await.package_yaml).unwrap();
    assert_eq!(
        DeploymentResource::last_error(&package).as_deref(),
        Some(refused.error.as_str())
    );
    let condition = DeploymentResource::get(&package)
        .unwrap()
        .condition("Prepared")
        .unwrap()
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("ValidationFailed"));
    let listed = ok(cli(&server, &["deployment", "list"]).await);
    let row = listed
        .lines()
        .find(|line| line.contains(&big))
        .unwrap_or_else(|| panic!("{big} in:\n{listed}"));
    assert!(
        row.contains("spec.replicas is 7, more than the 3 allowed"),
        "the CLI shows the reasons: {row}"
    );
    let approve = cli(&server, &["deployment", "approve", &big]).await;
    assert!(!approve.status.success(), "an approval is refused");

    // The accepted one and the one without a trigger kind: prepared and approved.
    for id in [&small, &plain] {
        let info = wait_prepared(&mut client, id).await.info.unwrap();
        assert!(info.approved && info.error.is_empty(), "{info:?}");
    }

    // A validator that cannot be reached holds its deployments back too.
    let held = wait_error(&mut client, &orphan).await;
    assert!(!held.prepared && !held.approved, "{held:?}");
    assert!(
        held.error.starts_with("validation failed: validator gone"),
        "{}",
        held.error
    );

    // The input fixed by a person: validated again, then prepared and approved.
    let fixed = package.to_yaml().replace("replicas: 7", "replicas: 3");
    assert_ne!(fixed, package.to_yaml(), "the package held replicas: 7");
    let file = daemon.dir.path().join("fixed.yaml");
    std::fs::write(&file, fixed).unwrap();
    ok(cli(
        &server,
        &[
            "deployment",
            "update",
            &big,
            "-f",
            &file.display().to_string(),
        ],
    )
    .await);
    let approved = wait_for(&format!("{big} approved"), || {
        let mut client = client.clone();
        let big = big.clone();
        async move {
            let info = get(&mut client, &big).await.info.unwrap();
            (info.prepared && info.approved).then_some(info)
        }
    })
    .await;
    assert!(approved.error.is_empty(), "{approved:?}");
    let listed = ok(cli(&server, &["deployment", "list"]).await);
    assert!(
        !listed.contains("spec.replicas is 7"),
        "the reasons are gone:\n{listed}"
    );
    assert!(!get(&mut client, &orphan).await.info.unwrap().approved);
    daemon.stop().await;
}

/// The web dashboard's page of a refused deployment shows the validator's reasons, and they
/// leave it once the fixed package is validated and approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validators_reasons_show_on_the_web_dashboard() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let mut command = serve_command(&store);
    let web_port = port();
    command.web = Some(([127, 0, 0, 1], web_port).into());
    let daemon = nephrite_preparer::daemon::start(&command, false)
        .await
        .expect("daemon starts");
    let mut client = pb::data_client::DataClient::new(
        nephrite_runtime::dial(&daemon.endpoint)
            .await
            .expect("dial"),
    );
    let server = format!(
        "http://{}",
        daemon.endpoint.to_string().trim_start_matches("tcp://")
    );
    let validator = spawn_validator().await;
    ok(cli(
        &server,
        &[
            "plugin",
            "register",
            "replicas",
            "--type",
            "validate",
            "--endpoint",
            &format!("http://127.0.0.1:{}", validator.port),
            "--trigger",
            "example.org/v1/Scaler",
        ],
    )
    .await);
    register_template(&mut client, "big", &scaler("web", 7)).await;
    let big = create(&mut client, "big", "").await;
    let refused = wait_error(&mut client, &big).await;
    let page_url = format!("http://127.0.0.1:{web_port}/deployments/{big}");
    let reasons = "Preparation error: validation failed: plugin replicas refused Scaler web: \
                   spec.replicas is 7, more than the 3 allowed";
    assert!(
        refused.error.ends_with("more than the 3 allowed"),
        "{refused:?}"
    );
    let page = wait_for("the reasons on the web page", || {
        let url = page_url.clone();
        async move {
            let page = reqwest::get(&url).await.ok()?.text().await.ok()?;
            page.contains(reasons).then_some(page)
        }
    })
    .await;
    assert!(
        page.contains("<dd id=\"state\"><span class=\"error\">error</span></dd>")
            && page.contains("<dt>Approved</dt><dd>no</dd>"),
        "{page}"
    );

    let package = get(&mut client, &big).await.package_yaml;
    let fixed = package.replace("replicas: 7", "replicas: 3");
    assert_ne!(fixed, package);
    client
        .update_deployment(pb::UpdateDeploymentRequest {
            deployment_id: big.clone(),
            package_yaml: fixed,
            ..Default::default()
        })
        .await
        .expect("update");
    let page = wait_for("the page approved, without the reasons", || {
        let url = page_url.clone();
        async move {
            let page = reqwest::get(&url).await.ok()?.text().await.ok()?;
            page.contains("<dt>Approved</dt><dd>yes</dd>")
                .then_some(page)
        }
    })
    .await;
    assert!(!page.contains("spec.replicas is 7"), "{page}");
    daemon.stop().await.expect("clean stop");
}
