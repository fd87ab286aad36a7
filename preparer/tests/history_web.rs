//! A deployment's history on the web dashboard, through real HTTP with credentials on: the
//! history page lists the kept revisions (who, when, summary) and says what retention
//! (`--revisions-kept 3`) dropped; the diff page shows the YAML lines that changed between two
//! revisions; Approve and Roll back on the page are recorded under the signed-in person's
//! name; a rollback needs the write role, is refused from another site's form and with a bad
//! or dropped revision (errors naming it), and the open history page follows it live.

mod support;

use std::time::Duration;

use clap::Parser as _;
use nephrite_preparer::daemon::{RunningDaemon, start};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::{AuthChannel, ClientArgs, ServeArgs};
use support::{GATEWAY, wait_for};

type Client = DataClient<AuthChannel>;

const TOKENS: &str = "write-token,writer\nweb-token,wendy\nread-token,reader\n";
const POLICY: &str = "identities:\n  writer: [write]\n  wendy: [write]\n  reader: [read]\n";

struct Scene {
    daemon: RunningDaemon,
    dir: tempfile::TempDir,
    base: String,
    http: reqwest::Client,
}

impl Scene {
    /// A daemon keeping 3 revisions a deployment, approving nothing by itself, with the web
    /// dashboard behind [`TOKENS`] and [`POLICY`].
    async fn start() -> Scene {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, TOKENS).expect("tokens");
        let policy = dir.path().join("policy.yaml");
        std::fs::write(&policy, POLICY).expect("policy");
        let store = format!("sqlite:{}", dir.path().join("p.db").display());
        let mut command = support::serve_command(&store);
        command.serve = ServeArgs::try_parse_from([
            "serve".to_owned(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--auth-tokens".to_owned(),
            tokens.display().to_string(),
            "--auth-policy".to_owned(),
            policy.display().to_string(),
        ])
        .expect("serve args");
        command.revisions_kept = 3;
        command.auto_approve = false;
        let port = nephrite_test_services::free_loopback_port().expect("port");
        command.web = Some(([127, 0, 0, 1], port).into());
        let daemon = start(&command, false).await.expect("daemon starts");
        let base = format!("http://{}", daemon.web.as_ref().expect("web").local_addr);
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client");
        Scene {
            daemon,
            dir,
            base,
            http,
        }
    }

    async fn client(&self) -> Client {
        let token = self.dir.path().join("write-token.txt");
        std::fs::write(&token, "write-token\n").expect("token file");
        let args = ClientArgs {
            token_file: Some(token),
            ..ClientArgs::default()
        };
        DataClient::new(args.dial(&self.daemon.endpoint).await.expect("dial"))
    }

    /// GET `path` as the holder of `token`: (status, body).
    async fn get(&self, path: &str, token: &str) -> (u16, String) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("GET");
        let status = response.status().as_u16();
        (status, response.text().await.expect("body"))
    }

    /// A form POST of `body` to `path` as the holder of `token` (none: no credentials), sent
    /// from `origin` as a browser would say: (status, location, body).
    async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        origin: &str,
        body: &str,
    ) -> (u16, String, String) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("POST");
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|l| l.to_str().expect("location").to_owned())
            .unwrap_or_default();
        (status, location, response.text().await.expect("body"))
    }
}

async fn revisions(client: &mut Client, id: &str) -> Vec<pb::DeploymentRevision> {
    client
        .list_deployment_revisions(pb::GetRequest { id: id.into() })
        .await
        .expect("revisions")
        .into_inner()
        .revisions
}

async fn revision(client: &mut Client, id: &str, number: i64) -> pb::DeploymentRevision {
    client
        .get_deployment_revision(pb::GetDeploymentRevisionRequest {
            deployment_id: id.into(),
            number,
        })
        .await
        .expect("revision")
        .into_inner()
}

async fn info(client: &mut Client, id: &str) -> pb::Deployment {
    client
        .get_deployment(pb::GetRequest { id: id.into() })
        .await
        .expect("get")
        .into_inner()
}

/// Waits until the loop prepared `id` (not approved: the daemon does not approve by itself).
async fn wait_prepared(client: &Client, id: &str) -> pb::Deployment {
    wait_for(&format!("{id} prepared"), || {
        let mut client = client.clone();
        let id = id.to_owned();
        async move {
            let d = info(&mut client, &id).await;
            d.info.as_ref().is_some_and(|i| i.prepared).then_some(d)
        }
    })
    .await
}

/// The value of `workers:` in a package.
fn workers(package: &str) -> String {
    package
        .lines()
        .find_map(|line| line.trim().strip_prefix("workers: "))
        .unwrap_or_else(|| panic!("no workers in:\n{package}"))
        .trim_matches('\'')
        .to_owned()
}

/// (revision, author, summary) of each row of a history page, in page order.
fn rows(page: &str) -> Vec<(i64, String, String)> {
    page.split("<tr data-revision=\"")
        .skip(1)
        .map(|row| {
            let cells: Vec<&str> = row
                .split("<td>")
                .skip(1)
                .map(|cell| cell.split("</td>").next().unwrap_or_default())
                .collect();
            (
                cells[0].parse().expect("revision number"),
                cells[2].to_owned(),
                cells[3].to_owned(),
            )
        })
        .collect()
}

fn expected_rows(kept: &[pb::DeploymentRevision]) -> Vec<(i64, String, String)> {
    kept.iter()
        .rev()
        .map(|r| (r.number, r.author.clone(), r.summary.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_diff_and_rollback_on_the_web_page() {
    let scene = Scene::start().await;
    let mut client = scene.client().await;
    let origin = scene.base.clone();
    client
        .register_template(pb::RegisterTemplateRequest {
            id: "nf/gw".into(),
            package_yaml: GATEWAY.into(),
            ..Default::default()
        })
        .await
        .expect("template");
    let id = client
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "nf/gw".into(),
            ..Default::default()
        })
        .await
        .expect("create")
        .into_inner()
        .deployment_id;
    let mut package = wait_prepared(&client, &id).await.package_yaml;

    // Approve on the page, as wendy: recorded under her name.
    let (status, location, body) = scene
        .post(
            &format!("/deployments/{id}/approve"),
            Some("web-token"),
            &origin,
            "",
        )
        .await;
    assert_eq!(
        (status, location.as_str()),
        (303, &*format!("/deployments/{id}")),
        "{body}"
    );
    let newest = revisions(&mut client, &id).await.pop().expect("a revision");
    assert_eq!(
        (newest.author.as_str(), newest.summary.as_str()),
        ("wendy", "approved")
    );

    // Four changes by the writer: workers 2 → 3 → 4 → 5 → 6.
    for n in 3..=6 {
        let changed = package.replace(&format!("workers: '{}'", n - 1), &format!("workers: '{n}'"));
        assert_ne!(changed, package, "workers: '{}' in:\n{package}", n - 1);
        client
            .update_deployment(pb::UpdateDeploymentRequest {
                deployment_id: id.clone(),
                package_yaml: changed,
                ..Default::default()
            })
            .await
            .expect("update");
        package = info(&mut client, &id).await.package_yaml;
    }
    // The history page: the kept revisions, newest first (read again until no write of the
    // loop lands between the two reads), and what retention dropped.
    let history = format!("/deployments/{id}/history");
    let (kept, page) = wait_for("the history page as the Data API lists it", || {
        let (scene, mut client, id, history) =
            (&scene, client.clone(), id.clone(), history.clone());
        async move {
            let kept = revisions(&mut client, &id).await;
            let (status, page) = scene.get(&history, "read-token").await;
            assert_eq!(status, 200, "{page}");
            (rows(&page) == expected_rows(&kept)).then_some((kept, page))
        }
    })
    .await;
    assert_eq!(kept.len(), 3, "--revisions-kept 3: {kept:?}");
    let oldest = kept[0].number;
    assert!(oldest >= 4, "{kept:?}");
    assert!(
        page.contains(&format!(
            "3 revisions kept ({oldest}–{}). Revisions 1–{} are no longer kept",
            oldest + 2,
            oldest - 1
        )),
        "{page}"
    );
    assert!(
        page.contains("<td>writer</td><td>package updated</td>"),
        "{page}"
    );
    for r in &kept {
        assert!(page.contains(&format!("<td>{}</td>", r.created)), "{page}");
    }
    // The deployment's page links to it.
    let (_, deployment) = scene.get(&format!("/deployments/{id}"), "read-token").await;
    assert!(
        deployment.contains(&format!("href=\"/deployments/{id}/history\"")),
        "{deployment}"
    );

    // The diff between the oldest and the newest kept: exactly the workers line.
    let (from, to) = (oldest, kept[2].number);
    let (old, new) = (
        workers(&revision(&mut client, &id, from).await.package_yaml),
        workers(&revision(&mut client, &id, to).await.package_yaml),
    );
    assert_ne!(old, new);
    let (status, diff) = scene
        .get(
            &format!("/deployments/{id}/diff?from={from}&to={to}"),
            "read-token",
        )
        .await;
    assert_eq!(status, 200, "{diff}");
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| {
            l.starts_with("<span class=\"removed\">") || l.starts_with("<span class=\"added\">")
        })
        .collect();
    assert_eq!(
        changed,
        [
            format!("<span class=\"removed\">-  workers: &#39;{old}&#39;</span>"),
            format!("<span class=\"added\">+  workers: &#39;{new}&#39;</span>"),
        ],
        "{diff}"
    );
    for (query, message) in [
        (format!("from={from}&to=x"), "the field `to` is \"x\""),
        (
            format!("to={to}"),
            "the field `from` (a revision number) is missing",
        ),
        (
            format!("from=1&to={to}"),
            &*format!("revision not found: 1 of deployment {id}"),
        ),
    ] {
        let (status, page) = scene
            .get(&format!("/deployments/{id}/diff?{query}"), "read-token")
            .await;
        assert!(status == 400 || status == 404, "{query}: {status}");
        assert!(
            page.contains(&message.replace('"', "&quot;")),
            "{query}: {page}"
        );
    }

    // The open history page's event stream, to see the rollback arrive.
    let mut events = scene
        .http
        .get(format!("{}/events/history/{id}", scene.base))
        .bearer_auth("read-token")
        .send()
        .await
        .expect("event stream");
    assert_eq!(events.status().as_u16(), 200);

    // Roll back: refused without credentials, for a reader, from another site's form, for a
    // revision that is no number or no longer kept; none of those writes anything.
    let rollback = format!("/deployments/{id}/rollback");
    let to = format!("to={oldest}");
    let refusals = [
        (
            None,
            origin.as_str(),
            to.as_str(),
            401,
            "credentials are required".to_owned(),
        ),
        (
            Some("read-token"),
            &origin,
            &to,
            403,
            "reader (roles: read) may not roll deployments back".to_owned(),
        ),
        (
            Some("web-token"),
            "http://evil.example",
            &to,
            403,
            "A form sent from another site is refused".to_owned(),
        ),
        (
            Some("web-token"),
            &origin,
            "to=abc",
            400,
            "the field `to` is &quot;abc&quot;".to_owned(),
        ),
        (
            Some("web-token"),
            &origin,
            "to=1",
            409,
            format!("revision not found: 1 of deployment {id}"),
        ),
    ];
    for (token, from_site, body, status, message) in refusals {
        let (got, _, page) = scene.post(&rollback, token, from_site, body).await;
        assert_eq!(got, status, "{token:?} {from_site} {body}: {page}");
        assert!(
            page.contains(&message),
            "{token:?} {from_site} {body}: {page}"
        );
    }
    assert_eq!(
        revisions(&mut client, &id).await,
        kept,
        "the refusals wrote nothing"
    );

    // Wendy rolls back to the oldest kept revision: a new revision under her name, back to
    // the history page, which then shows it (and still only 3 revisions).
    let (status, location, body) = scene.post(&rollback, Some("web-token"), &origin, &to).await;
    assert_eq!(
        (status, location.as_str()),
        (303, history.as_str()),
        "{body}"
    );
    // The loop may already have prepared the rolled-back package (a further revision by
    // `preparer`): the rollback is the revision right after the last kept one.
    let after = revisions(&mut client, &id).await;
    let newest = after
        .iter()
        .find(|r| r.number == kept[2].number + 1)
        .unwrap_or_else(|| panic!("no revision {} in {after:?}", kept[2].number + 1));
    assert_eq!(
        (
            newest.number,
            newest.author.as_str(),
            newest.summary.as_str()
        ),
        (
            kept[2].number + 1,
            "wendy",
            &*format!("rolled back to revision {oldest}")
        )
    );
    assert_eq!(after.len(), 3, "retention after the rollback: {after:?}");
    let rolled = format!("<td>wendy</td><td>rolled back to revision {oldest}</td>");
    let streamed = tokio::time::timeout(Duration::from_secs(30), async {
        let mut seen = String::new();
        while let Some(chunk) = events.chunk().await.expect("event stream") {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains(&rolled) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        streamed,
        Ok(true),
        "the open history page shows the rollback"
    );
    let prepared = wait_prepared(&client, &id).await;
    assert_eq!(
        workers(&prepared.package_yaml),
        old,
        "the old package is back"
    );
    let (_, page) = scene.get(&history, "read-token").await;
    let shown = rows(&page);
    assert!(
        shown.len() == 3
            && shown
                .iter()
                .any(|(_, a, s)| a == "wendy" && s.starts_with("rolled back")),
        "{page}"
    );

    scene.daemon.stop().await.expect("stop");
}
