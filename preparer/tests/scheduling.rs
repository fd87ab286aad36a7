//! Scheduling plugins, out of process (the `capacity_scheduler` example, run as a real process,
//! registered with the CLI as `--type schedule`): a scheduler narrowing a Placement's 5
//! candidate sites to 2 gives 2 children, on the sites it chose, with its reason kept in the
//! Placement's status and `Scheduled` condition (what `deployment get` prints). A scheduler
//! that fails, or chooses a site that is not a candidate, is an error naming it: the
//! deployment stays unprepared with that error (`SchedulingFailed`), no child made; with a
//! working scheduler registered again the same deployment is placed.

mod support;

use std::process::{Command, Output, Stdio};

use nephrite_krm::{Gvk, Package};
use nephrite_merge::DeploymentResource;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use serde_json::json;

use support::binary::ok;
use support::plugin_process::{PluginProcess, example_binary};
use support::*;

async fn spawn_scheduler(mode: &str) -> PluginProcess {
    let port = nephrite_test_services::free_loopback_port().expect("free port");
    let child = Command::new(example_binary("capacity_scheduler"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--mode", mode])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("scheduler starts");
    wait_for(&format!("scheduler on port {port}"), || async move {
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

/// Registers (or replaces: the same name each time, so no pass runs without one) the
/// scheduler `picker` at `plugin`.
async fn register_scheduler(server: &str, plugin: &PluginProcess) {
    let endpoint = format!("http://127.0.0.1:{}", plugin.port);
    ok(cli(
        server,
        &[
            "plugin",
            "register",
            "picker",
            "--type",
            "schedule",
            "--endpoint",
            &endpoint,
            "--trigger",
            "topology.nephio.org/v1alpha1/Placement",
            "--property",
            "count=2",
        ],
    )
    .await);
}

async fn register_sized_site(client: &mut Client, id: &str, capacity: u32) {
    client
        .register_site(pb::RegisterSiteRequest {
            id: id.into(),
            package_yaml: format!(
                "apiVersion: metadata.nephio.org/v1alpha1\nkind: Site\nmetadata: {{name: site}}\n\
                 spec: {{region: metro, capacity: '{capacity}'}}\n"
            ),
            ..Default::default()
        })
        .await
        .expect("register site");
}

async fn wait_error_containing(client: &Client, id: &str, text: &str) -> pb::DeploymentInfo {
    wait_for(&format!("error {text:?} on {id}"), || {
        let mut client = client.clone();
        let id = id.to_owned();
        async move {
            let info = get(&mut client, &id).await.info.unwrap();
            info.error.contains(text).then_some(info)
        }
    })
    .await
}

fn placement(package: &Package) -> nephrite_krm::Object {
    package
        .get(
            &Gvk::new("topology.nephio.org", "v1alpha1", "Placement"),
            "place",
        )
        .expect("the Placement")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_narrows_a_placement_and_a_failing_one_places_nothing() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    let server = format!("http://{}", daemon.endpoint().trim_start_matches("tcp://"));
    for (id, capacity) in [
        ("metro/a", 3),
        ("metro/b", 9),
        ("metro/c", 1),
        ("metro/d", 7),
        ("metro/e", 5),
    ] {
        register_sized_site(&mut client, id, capacity).await;
    }
    register_template(&mut client, "nf/gw", GATEWAY).await;
    register_template(&mut client, "topology", &topology("nf/gw", "metro")).await;
    let capacity = spawn_scheduler("choose").await;
    register_scheduler(&server, &capacity).await;

    // Narrowed to the 2 sites with the most capacity, the reason kept.
    let placed = create(&mut client, "topology", "").await;
    let deployment = wait_prepared(&mut client, &placed).await;
    let mut sites: Vec<String> = children(&mut client, &placed)
        .await
        .into_iter()
        .map(|child| child.site_id)
        .collect();
    sites.sort();
    assert_eq!(sites, ["metro/b", "metro/d"]);
    let reason = "the 2 of 5 sites with the most Site.capacity (metro/b=9, metro/d=7)";
    let package = Package::from_yaml(&deployment.package_yaml).unwrap();
    let placement = placement(&package);
    let status = serde_json::to_value(placement.status()).unwrap();
    assert_eq!(
        status["scheduling"],
        json!([{
            "template": "nf",
            "plugin": "picker",
            "candidates": 5,
            "sites": ["metro/b", "metro/d"],
            "reason": reason,
        }])
    );
    assert_eq!(status["deployments"], json!(2));
    let scheduled = placement.condition("Scheduled").unwrap().unwrap();
    assert!(scheduled.is_true(), "{scheduled:?}");
    assert_eq!(
        scheduled.message.as_deref(),
        Some(
            format!(
                "template nf: scheduler picker chose 2 of 5 sites (metro/b, metro/d): {reason}"
            )
            .as_str()
        )
    );
    let shown = ok(cli(&server, &["deployment", "get", &placed, "-o", "yaml"]).await);
    assert!(shown.contains(reason), "the CLI shows the reason:\n{shown}");

    // A scheduler that fails: an error naming it, unprepared, no child.
    let broken = spawn_scheduler("fail").await;
    register_scheduler(&server, &broken).await;
    let held = create(&mut client, "topology", "").await;
    let failed = wait_error_containing(&client, &held, "capacity data").await;
    assert_eq!(
        failed.error,
        "Placement place: scheduling failed: scheduler picker failed on template nf: capacity \
         data is not available (Unavailable)"
    );
    assert!(!failed.prepared && !failed.approved, "{failed:?}");
    assert!(children(&mut client, &held).await.is_empty());
    let package = Package::from_yaml(&get(&mut client, &held).await.package_yaml).unwrap();
    let condition = DeploymentResource::get(&package)
        .unwrap()
        .condition("Prepared")
        .unwrap()
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("SchedulingFailed"));
    let listed = ok(cli(&server, &["deployment", "list"]).await);
    let row = listed
        .lines()
        .find(|line| line.contains(&held))
        .unwrap_or_else(|| panic!("{held} in:\n{listed}"));
    assert!(row.contains("scheduler picker failed"), "{row}");

    // A scheduler choosing a site outside the candidates: refused, naming it, no child.
    let stray = spawn_scheduler("stray").await;
    register_scheduler(&server, &stray).await;
    let refused = wait_error_containing(&client, &held, "nowhere/0").await;
    assert_eq!(
        refused.error,
        "Placement place: scheduling failed: scheduler picker chose site nowhere/0 for template \
         nf, which is not one of its 5 candidates"
    );
    assert!(!refused.prepared, "{refused:?}");
    assert!(children(&mut client, &held).await.is_empty());

    // A working scheduler again: the held deployment is placed as the first one was.
    register_scheduler(&server, &capacity).await;
    let recovered = wait_prepared(&mut client, &held).await.info.unwrap();
    assert!(recovered.error.is_empty(), "{recovered:?}");
    let mut sites: Vec<String> = children(&mut client, &held)
        .await
        .into_iter()
        .map(|child| child.site_id)
        .collect();
    sites.sort();
    assert_eq!(sites, ["metro/b", "metro/d"]);
    daemon.stop().await;
}
