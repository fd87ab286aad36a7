//! Out-of-process plugins (the `annotate_plugin` example, run as a real process): one that
//! prepares, one that crashes, one that hangs past the timeout and one that answers garbage.
//! The bad ones leave their deployment unprepared with the error recorded, the others carry on,
//! and a failing plugin is retried with backoff.

mod support;

use std::process::{Command, Stdio};

use nephrite_krm::Package;
use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use support::plugin_process::{PluginProcess, example_binary};
use support::*;

fn spawn_plugin(mode: &str, port: u16) -> PluginProcess {
    let child = Command::new(example_binary("annotate_plugin"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--mode", mode])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("plugin starts");
    PluginProcess { child, port }
}

async fn wait_listening(port: u16) {
    wait_for(&format!("plugin on port {port}"), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
}

async fn register(client: &mut Client, name: &str, port: u16, kind: &str) {
    client
        .register_plugin(pb::RegisterPluginRequest {
            plugin: Some(pb::Plugin {
                r#type: pb::PluginType::Prepare as i32,
                name: name.into(),
                endpoint: format!("http://127.0.0.1:{port}"),
                triggers: vec![GroupVersionKind {
                    group: "example.org".into(),
                    version: "v1".into(),
                    kind: kind.into(),
                }],
                ..Default::default()
            }),
        })
        .await
        .expect("register plugin");
}

fn template_with(kind: &str) -> String {
    format!(
        "apiVersion: example.org/v1\nkind: {kind}\nmetadata: {{name: x}}\nspec: {{a: 1}}\n---\n{GATEWAY}"
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

fn port() -> u16 {
    nephrite_test_services::free_loopback_port().expect("free port")
}

#[tokio::test]
async fn good_crashing_hanging_and_garbage_plugins() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;

    let good = spawn_plugin("annotate", port());
    let crash = spawn_plugin("crash", port());
    let hang = spawn_plugin("hang", port());
    let garbage = spawn_plugin("garbage", port());
    for p in [&good, &crash, &hang, &garbage] {
        wait_listening(p.port).await;
    }
    register(&mut client, "good", good.port, "Tuning").await;
    register(&mut client, "crasher", crash.port, "Crash").await;
    register(&mut client, "hanger", hang.port, "Hang").await;
    register(&mut client, "garbage", garbage.port, "Garbage").await;

    let mut ids = std::collections::HashMap::new();
    for kind in ["Tuning", "Crash", "Hang", "Garbage"] {
        register_template(&mut client, kind, &template_with(kind)).await;
        ids.insert(kind, create(&mut client, kind, "").await);
    }
    register_template(&mut client, "plain", GATEWAY).await;
    let plain = create(&mut client, "plain", "").await;

    let prepared = wait_prepared(&mut client, &ids["Tuning"]).await;
    let package = Package::from_yaml(&prepared.package_yaml).unwrap();
    let tuned = &package.objects()[0];
    assert_eq!(tuned.status().unwrap()["preparedBy"], "annotate-plugin");
    assert_eq!(tuned.annotation("nephio.org/prepared"), Some("true"));
    assert!(get(&mut client, &plain).await.info.unwrap().prepared);

    let crashed = wait_error(&mut client, &ids["Crash"]).await;
    assert!(!crashed.prepared);
    assert!(crashed.error.contains("crasher"), "{}", crashed.error);
    let hung = wait_error(&mut client, &ids["Hang"]).await;
    assert!(!hung.prepared);
    assert!(hung.error.contains("hanger timed out"), "{}", hung.error);
    let bad = wait_error(&mut client, &ids["Garbage"]).await;
    assert!(!bad.prepared);
    assert!(bad.error.contains("invalid package"), "{}", bad.error);

    // The crashed plugin comes back (a healthy one on its port): the retry prepares it.
    let crash_port = crash.port;
    drop(crash);
    let revived = spawn_plugin("annotate", crash_port);
    wait_listening(revived.port).await;
    let prepared = wait_prepared(&mut client, &ids["Crash"]).await;
    assert!(prepared.info.unwrap().error.is_empty());

    // The hanging one is still failing; the daemon still stops cleanly.
    assert!(!get(&mut client, &ids["Hang"]).await.info.unwrap().prepared);
    daemon.stop().await;
}
