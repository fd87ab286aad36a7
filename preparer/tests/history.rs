//! A deployment's history through the real CLI: `deployment history` lists each change to its
//! package (who, what), `deployment diff` shows how the YAML changed between two revisions,
//! and `deployment rollback` writes an old revision's package as a new one, which the loop
//! then prepares and approves again as any change. Bad revision numbers are errors naming
//! the revision and the deployment.

mod support;

use std::process::Output;

use support::binary::ok;
use support::*;

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

/// `deployment history -o json`: (revision, author, summary) per row.
async fn history(server: &str, id: &str) -> Vec<(i64, String, String)> {
    let json = ok(cli(server, &["deployment", "history", id, "-o", "json"]).await);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).expect("history json");
    rows.iter()
        .map(|row| {
            (
                row["revision"].as_i64().unwrap(),
                row["author"].as_str().unwrap().to_owned(),
                row["summary"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_diff_and_rollback_through_the_cli() {
    let mut daemon = TestDaemon::sqlite().await;
    let mut client = daemon.client().await;
    let server = format!("http://{}", daemon.endpoint().trim_start_matches("tcp://"));
    register_template(&mut client, "nf/gw", GATEWAY).await;
    let id = ok(cli(&server, &["deployment", "create", "--template", "nf/gw"]).await)
        .trim()
        .to_owned();
    wait_prepared(&mut client, &id).await;
    assert_eq!(
        history(&server, &id).await,
        [(1, "anonymous".into(), "created from template nf/gw".into())]
    );

    // A person changes the package: revision 2.
    let package = ok(cli(&server, &["deployment", "get", &id, "-o", "yaml"]).await);
    let changed = package.replace("workers: '2'", "workers: '4'");
    assert_ne!(changed, package, "the package had workers: '2':\n{package}");
    let file = daemon.dir.path().join("changed.yaml");
    std::fs::write(&file, &changed).unwrap();
    ok(cli(
        &server,
        &[
            "deployment",
            "update",
            &id,
            "-f",
            &file.display().to_string(),
        ],
    )
    .await);
    assert_eq!(
        history(&server, &id).await[1..],
        [(2, "anonymous".into(), "package updated".into())]
    );
    let table = ok(cli(&server, &["deployment", "history", &id]).await);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("REVISION") && header.contains("AUTHOR") && header.contains("SUMMARY"),
        "{table}"
    );
    assert!(table.contains("package updated"), "{table}");

    // The diff shows the changed line, and nothing else of the package.
    let diff = ok(cli(
        &server,
        &["deployment", "diff", &id, "--from", "1", "--to", "2"],
    )
    .await);
    let changes: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('-') || l.starts_with('+'))
                && !l.starts_with("---")
                && !l.starts_with("+++")
        })
        .collect();
    assert_eq!(changes, ["-  workers: '2'", "+  workers: '4'"], "{diff}");
    assert!(
        diff.starts_with(&format!(
            "--- deployment {id} revision 1\n+++ deployment {id} revision 2\n@@ "
        )),
        "{diff}"
    );

    // Rollback to 1: a new revision with 1's package, unprepared and unapproved, which the
    // loop prepares and approves again (revision 4).
    ok(cli(&server, &["deployment", "rollback", &id, "--to", "1"]).await);
    let rows = wait_for("the rollback prepared and approved again", || {
        let server = server.clone();
        let id = id.clone();
        async move {
            let rows = history(&server, &id).await;
            (rows.len() >= 4).then_some(rows)
        }
    })
    .await;
    assert_eq!(
        rows[2..],
        [
            (3, "anonymous".into(), "rolled back to revision 1".into()),
            (4, "preparer".into(), "prepared and approved".into()),
        ]
    );
    let info = get(&mut client, &id).await;
    assert!(
        info.info.as_ref().is_some_and(|i| i.prepared && i.approved),
        "{info:?}"
    );
    assert!(
        info.package_yaml.contains("workers: '2'"),
        "{}",
        info.package_yaml
    );
    let back = ok(cli(
        &server,
        &["deployment", "diff", &id, "--from", "2", "--to", "4"],
    )
    .await);
    assert!(
        back.contains("-  workers: '4'\n+  workers: '2'\n"),
        "{back}"
    );

    // Revisions that do not exist: errors naming them.
    for (args, message) in [
        (
            vec![
                "deployment",
                "diff",
                id.as_str(),
                "--from",
                "1",
                "--to",
                "9",
            ],
            format!("revision not found: 9 of deployment {id}"),
        ),
        (
            vec!["deployment", "rollback", id.as_str(), "--to", "0"],
            format!("deployment {id}: revision 0 does not exist (revisions count from 1)"),
        ),
        (
            vec!["deployment", "history", "no-such-deployment"],
            "deployment not found: no-such-deployment".to_owned(),
        ),
    ] {
        let out = cli(&server, &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(&message), "{args:?}: {stderr}");
    }
    daemon.stop().await;
}
