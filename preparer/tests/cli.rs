//! The real `preparer` binary: `serve` as a child process, the client subcommands against it,
//! SIGTERM, and `kill -9` in the middle of a placement's expansion.

mod support;

use std::path::Path;
use std::process::Command;

use nephrite_krm::Package;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use support::binary::*;
use support::*;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn cli_round_trip_against_the_real_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let mut daemon = serve(&store, &[]).await;
    let s = daemon.server.clone();

    let template = write(dir.path(), "gw.yaml", GATEWAY);
    let topo = write(dir.path(), "topo.yaml", &topology("nf/gw:v1", "metro"));
    let site = write(
        dir.path(),
        "site.yaml",
        "apiVersion: metadata.nephio.org/v1alpha1\nkind: Site\nmetadata: {name: s}\nspec: {region: metro}\n",
    );
    ok(cli(
        &s,
        &[
            "template",
            "register",
            "nf/gw:v1",
            "-f",
            &template,
            "--metadata",
            "tier=edge",
        ],
    ));
    ok(cli(&s, &["template", "register", "topo", "-f", &topo]));
    ok(cli(&s, &["site", "register", "dc/a", "-f", &site]));
    ok(cli(
        &s,
        &[
            "site",
            "register",
            "dc/b",
            "-f",
            &site,
            "--metadata",
            "Site.rack=r1",
        ],
    ));
    let listed = ok(cli(
        &s,
        &["template", "list", "--metadata", "tier=edge", "-o", "json"],
    ));
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["id"], "nf/gw:v1");
    assert!(ok(cli(&s, &["site", "list"])).contains("Site.rack=r1"));

    // create prints only the id.
    let merge = write(
        dir.path(),
        "merge.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n",
    );
    let id = ok(cli(
        &s,
        &[
            "deployment",
            "create",
            "--template",
            "topo",
            "--merge",
            &merge,
        ],
    ));
    let id = id.trim().to_owned();
    assert!(!id.is_empty() && !id.contains('\n'));

    let rows = wait_for("placement expanded", || {
        let s = s.clone();
        async move {
            let rows: serde_json::Value =
                serde_json::from_str(&ok(cli(&s, &["deployment", "list", "-o", "json"]))).ok()?;
            let rows = rows.as_array()?.clone();
            (rows.len() == 3 && rows.iter().all(|r| r["prepared"] == true)).then_some(rows)
        }
    })
    .await;
    for field in [
        "deploymentId",
        "parentDeploymentId",
        "templateId",
        "siteId",
        "metadata",
        "created",
        "updated",
        "prepared",
        "approved",
        "error",
    ] {
        assert!(rows[0].get(field).is_some(), "list -o json row has {field}");
    }
    assert!(rows[0]["approved"].is_boolean());
    let children = ok(cli(
        &s,
        &[
            "deployment",
            "list",
            "--parent",
            &id,
            "--site",
            "dc/*",
            "-o",
            "json",
        ],
    ));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&children)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // People see names before ids; scripts get names and JSONPath, as from kubectl.
    let table = ok(cli(
        &s,
        &["deployment", "list", "--parent", &id, "--site", "dc/*"],
    ));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "TEMPLATE", "SITE", "INSTANCE", "PREPARED", "APPROVED", "ID", "PARENT", "ERROR"
        ]
    );
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(
        table
            .lines()
            .skip(1)
            .all(|l| l.contains("dc/") && l.contains(&id)),
        "{table}"
    );
    let names = ok(cli(
        &s,
        &[
            "deployment",
            "list",
            "--parent",
            &id,
            "--site",
            "dc/*",
            "-o",
            "name",
        ],
    ));
    let children: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&children)
        .unwrap()
        .iter()
        .map(|c| format!("deployment/{}", c["deploymentId"].as_str().unwrap()))
        .collect();
    let mut listed: Vec<&str> = names.lines().collect();
    listed.sort_unstable();
    let mut expected: Vec<&str> = children.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(listed, expected);
    let sites = ok(cli(
        &s,
        &[
            "deployment",
            "list",
            "--parent",
            &id,
            "--site",
            "dc/*",
            "-o",
            r#"jsonpath={range .items[*]}{.siteId}{"\n"}{end}"#,
        ],
    ));
    assert_eq!(sites.lines().count(), 2);
    assert!(sites.lines().all(|site| site.starts_with("dc/")), "{sites}");
    let refused = cli(&s, &["deployment", "list", "-o", "jsonpath={.items"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("never closed"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // get -o yaml is exactly the package.
    let yaml = ok(cli(&s, &["deployment", "get", &id, "-o", "yaml"]));
    let package = Package::from_yaml(&yaml).unwrap();
    assert_eq!(package.objects()[0].kind, "Placement");
    assert!(
        package
            .iter()
            .any(|o| o.kind == "ConfigMap" && o.name() == Some("extra"))
    );
    assert_eq!(package.objects().last().unwrap().kind, "Deployment");

    // update + approve go through.
    let updated = write(
        dir.path(),
        "updated.yaml",
        &yaml.replace("name: extra", "name: extra-2"),
    );
    ok(cli(&s, &["deployment", "update", &id, "-f", &updated]));
    assert!(ok(cli(&s, &["deployment", "get", &id])).contains("extra-2"));
    ok(cli(&s, &["deployment", "approve", &id]));

    // Bad input: clear errors, non-zero exit, nothing stored.
    let bad = write(
        dir.path(),
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: [oops\n",
    );
    let out = cli(
        &s,
        &[
            "deployment",
            "create",
            "--template",
            "topo",
            "--merge",
            &bad,
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("line 4"),
        "{stderr}"
    );
    let out = cli(&s, &["deployment", "create", "--template", "nf/unknown"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nf/unknown"));
    let out = cli(&s, &["deployment", "get", "no-such-id"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-id"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&ok(cli(
            &s,
            &["deployment", "list", "-o", "json"]
        )))
        .unwrap()
        .as_array()
        .unwrap()
        .len(),
        3
    );

    // Deleting the parent deletes its children.
    ok(cli(&s, &["deployment", "delete", &id]));
    assert_eq!(
        ok(cli(&s, &["deployment", "list", "-o", "json"])).trim(),
        "[]"
    );

    // SIGTERM: clean exit 0.
    let pid = daemon.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = daemon.child.wait().unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}");
}

/// Children of `parent` in the store at `spec`, read directly (the daemon is dead).
async fn stored_children(spec: &str, parent: &str) -> usize {
    use nephrite_preparer::store::{self, DeploymentFilter};
    let store = store::open(spec).await.expect("store opens");
    let filter = DeploymentFilter {
        parent_id: Some(parent.to_owned()),
        ..Default::default()
    };
    store::count_deployments(store.as_ref(), &filter)
        .await
        .expect("count")
}

#[tokio::test]
async fn kill_9_during_expansion_loses_nothing_and_duplicates_nothing() {
    const SITES: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("p.db").display());
    let started = std::time::Instant::now();
    store_sites(&store, SITES).await;
    eprintln!("{SITES} sites stored at {:?}", started.elapsed());
    let mut daemon = serve(&store, &["--lease", "1s"]).await;
    let endpoint: nephrite_runtime::Endpoint = daemon.server.parse().unwrap();
    let mut client = DataClient::new(nephrite_runtime::dial(&endpoint).await.unwrap());
    register_template(&mut client, "nf/gw", GATEWAY).await;
    register_template(&mut client, "topo", &topology("nf/gw", "metro")).await;
    let parent = create(&mut client, "topo", "").await;
    // Kill mid-expansion: once the first children are committed, long before the last.
    wait_for("expansion started", || {
        let mut client = client.clone();
        let parent = parent.clone();
        async move {
            let page = client
                .list_deployments(pb::ListDeploymentsRequest {
                    parent_deployment_id: parent,
                    window: Some(pb::Window {
                        max_count: 1,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner();
            (!page.deployments.is_empty()).then_some(())
        }
    })
    .await;
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    drop(daemon);
    let at_kill = stored_children(&store, &parent).await;
    eprintln!("killed with {at_kill} of {SITES} children created");
    assert!(
        at_kill > 0 && at_kill < SITES,
        "the kill landed mid-expansion ({at_kill} of {SITES} children)"
    );

    let restarted = serve(&store, &["--lease", "1s"]).await;
    let endpoint: nephrite_runtime::Endpoint = restarted.server.parse().unwrap();
    let mut client = DataClient::new(nephrite_runtime::dial(&endpoint).await.unwrap());
    eprintln!("restarted at {:?}", started.elapsed());
    wait_prepared(&mut client, &parent).await;
    eprintln!("expansion finished at {:?}", started.elapsed());
    let kids = children(&mut client, &parent).await;
    assert_eq!(kids.len(), SITES, "exactly one child per site");
    let sites: std::collections::HashSet<_> = kids.iter().map(|k| k.site_id.clone()).collect();
    assert_eq!(sites.len(), SITES, "none twice");
    assert!(kids.iter().all(|k| k.prepared));
}
