//! The Data API and the web dashboard with credentials on (issue 30): every method refused
//! without credentials, with a wrong token and with another role's; each role allowed exactly
//! its methods; a plugin reaching a deployment only through the modification token it was
//! sent; plugin registration admin-only; the caps on patterns and ids; the CLI presenting a
//! token; the web page behind the same tokens and roles (bearer or the login form's cookie).

mod support;

use clap::Parser as _;
use nephrite_preparer::daemon::{RunningDaemon, start};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::{AuthChannel, ClientArgs, ServeArgs};
use tonic::Code;

type Client = DataClient<AuthChannel>;

const TOKENS: &str = "\
read-token,reader
write-token,writer
plugin-token,annotator
admin-token,ops
idle-token,idle
";

const POLICY: &str = "\
identities:
  reader: [read]
  writer: [write]
  annotator: [plugin]
  ops: [admin]
  idle: []
";

/// The methods of `nephrite.preparer.data.v1.Data`, read from the proto file itself, so that a method
/// added later is checked too (and `call` must learn it).
fn methods() -> Vec<String> {
    let proto = include_str!("../../proto/proto/nephrite/preparer/data/v1/data.proto");
    let methods: Vec<String> = proto
        .lines()
        .filter_map(|line| line.trim().strip_prefix("rpc "))
        .filter_map(|rest| rest.split('(').next())
        .map(|name| name.trim().to_owned())
        .collect();
    assert!(methods.len() >= 23, "{methods:?}");
    methods
}

/// Which roles may call `method` (what the README's credentials table promises).
fn allowed(role: &str, method: &str) -> bool {
    let read = method.starts_with("Get") || method.starts_with("List") || method == "Watch";
    let plugin = matches!(
        method,
        "UpdateDeployment" | "RenewModification" | "EndModification" | "CancelModification"
    );
    let plugin_admin = matches!(method, "RegisterPlugin" | "DeletePlugin");
    match role {
        "read" => read,
        "write" => !plugin_admin,
        "plugin" => plugin,
        "admin" => true,
        _ => false,
    }
}

/// Calls `method` with a small request; the status of the call (a stream's first answer).
async fn call(client: &mut Client, method: &str) -> Result<(), tonic::Status> {
    let id = || "auth-probe".to_owned();
    let get = || pb::GetRequest { id: id() };
    let delete = || pb::DeleteRequest { id: id() };
    match method {
        "RegisterTemplate" => client
            .register_template(pb::RegisterTemplateRequest {
                id: id(),
                package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "GetTemplate" => client.get_template(get()).await.map(drop),
        "ListTemplates" => client
            .list_templates(pb::ListTemplatesRequest::default())
            .await
            .map(drop),
        "DeleteTemplate" => client.delete_template(delete()).await.map(drop),
        "RegisterSite" => client
            .register_site(pb::RegisterSiteRequest {
                id: id(),
                ..Default::default()
            })
            .await
            .map(drop),
        "GetSite" => client.get_site(get()).await.map(drop),
        "ListSites" => client
            .list_sites(pb::ListSitesRequest::default())
            .await
            .map(drop),
        "DeleteSite" => client.delete_site(delete()).await.map(drop),
        "RegisterPlugin" => client
            .register_plugin(pb::RegisterPluginRequest {
                plugin: Some(pb::Plugin {
                    name: id(),
                    endpoint: "http://127.0.0.1:9".into(),
                    ..Default::default()
                }),
            })
            .await
            .map(drop),
        "GetPlugin" => client.get_plugin(get()).await.map(drop),
        "ListPlugins" => client
            .list_plugins(pb::ListPluginsRequest::default())
            .await
            .map(drop),
        "DeletePlugin" => client.delete_plugin(delete()).await.map(drop),
        "CreateDeployment" => client
            .create_deployment(pb::CreateDeploymentRequest {
                merge_package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".into(),
                ..Default::default()
            })
            .await
            .map(drop),
        "ApplyDeployments" => client
            .apply_deployments(pb::ApplyDeploymentsRequest {
                writes: vec![pb::DeploymentWrite {
                    write: Some(pb::deployment_write::Write::Delete(delete())),
                }],
                fence: None,
            })
            .await
            .map(drop),
        "GetDeployment" => client.get_deployment(get()).await.map(drop),
        "ListDeployments" => client
            .list_deployments(pb::ListDeploymentsRequest::default())
            .await
            .map(drop),
        "UpdateDeployment" => client
            .update_deployment(pb::UpdateDeploymentRequest {
                deployment_id: id(),
                package_yaml: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".into(),
                modification_token: "not-a-lease".into(),
            })
            .await
            .map(drop),
        "ApproveDeployment" => client
            .approve_deployment(pb::ApproveDeploymentRequest {
                deployment_id: id(),
            })
            .await
            .map(drop),
        "DeleteDeployment" => client.delete_deployment(delete()).await.map(drop),
        "StartModification" => client
            .start_modification(pb::StartModificationRequest {
                deployment_id: id(),
                lease_ms: 0,
            })
            .await
            .map(drop),
        "RenewModification" => client
            .renew_modification(pb::RenewModificationRequest {
                deployment_id: id(),
                token: "not-a-lease".into(),
                lease_ms: 0,
            })
            .await
            .map(drop),
        "EndModification" => client
            .end_modification(pb::EndModificationRequest {
                deployment_id: id(),
                token: "not-a-lease".into(),
                package_yaml: String::new(),
            })
            .await
            .map(drop),
        "CancelModification" => client
            .cancel_modification(pb::CancelModificationRequest {
                deployment_id: id(),
                token: "not-a-lease".into(),
            })
            .await
            .map(drop),
        "Watch" => client.watch(pb::WatchRequest::default()).await.map(drop),
        "ListDeploymentRevisions" => client.list_deployment_revisions(get()).await.map(drop),
        "GetDeploymentRevision" => client
            .get_deployment_revision(pb::GetDeploymentRevisionRequest {
                deployment_id: id(),
                number: 1,
            })
            .await
            .map(drop),
        "RollbackDeployment" => client
            .rollback_deployment(pb::RollbackDeploymentRequest {
                deployment_id: id(),
                number: 1,
            })
            .await
            .map(drop),
        "AcquireLease" => client
            .acquire_lease(pb::AcquireLeaseRequest {
                name: id(),
                holder: "probe".into(),
                duration_ms: 1_000,
            })
            .await
            .map(drop),
        "RenewLease" => client
            .renew_lease(pb::RenewLeaseRequest {
                name: id(),
                token: "not-a-lease".into(),
                duration_ms: 1_000,
            })
            .await
            .map(drop),
        "ReleaseLease" => client
            .release_lease(pb::ReleaseLeaseRequest {
                name: id(),
                token: "not-a-lease".into(),
            })
            .await
            .map(drop),
        "GetLease" => client.get_lease(get()).await.map(drop),
        other => panic!("the test does not know how to call {other}: teach `call`"),
    }
}

struct Secured {
    daemon: RunningDaemon,
    dir: tempfile::TempDir,
}

impl Secured {
    async fn start(web: bool) -> Secured {
        Secured::start_with(web, Some(POLICY)).await
    }

    /// The daemon with the test's tokens and `policy` (`None`: no `--auth-policy`).
    async fn start_with(web: bool, policy: Option<&str>) -> Secured {
        let dir = tempfile::tempdir().expect("tempdir");
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, TOKENS).expect("tokens");
        let store = format!("sqlite:{}", dir.path().join("p.db").display());
        let mut command = support::serve_command(&store);
        let mut args = vec![
            "serve".to_owned(),
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--auth-tokens".to_owned(),
            tokens.display().to_string(),
        ];
        if let Some(policy) = policy {
            let path = dir.path().join("policy.yaml");
            std::fs::write(&path, policy).expect("policy");
            args.extend(["--auth-policy".to_owned(), path.display().to_string()]);
        }
        command.serve = ServeArgs::try_parse_from(args).expect("serve args");
        if web {
            let port = nephrite_test_services::free_loopback_port().expect("port");
            command.web = Some(([127, 0, 0, 1], port).into());
        }
        let daemon = start(&command, false).await.expect("daemon starts");
        Secured { daemon, dir }
    }

    fn token_file(&self, token: &str) -> std::path::PathBuf {
        let path = self.dir.path().join(format!("{token}.txt"));
        std::fs::write(&path, format!("{token}\n")).expect("token file");
        path
    }

    async fn client(&self, token: Option<&str>) -> Client {
        let args = ClientArgs {
            token_file: token.map(|t| self.token_file(t)),
            ..ClientArgs::default()
        };
        DataClient::new(args.dial(&self.daemon.endpoint).await.expect("dial"))
    }

    fn server(&self) -> String {
        format!(
            "http://{}",
            self.daemon
                .endpoint
                .to_string()
                .trim_start_matches("tcp://")
        )
    }
}

fn refused(code: Code) -> bool {
    matches!(code, Code::Unauthenticated | Code::PermissionDenied)
}

#[tokio::test]
async fn every_method_is_refused_without_credentials_with_wrong_ones_and_with_another_roles() {
    let secured = Secured::start(false).await;
    let methods = methods();
    for (who, token) in [("no credentials", None), ("a wrong token", Some("guess"))] {
        let mut client = secured.client(token).await;
        for method in &methods {
            let err = call(&mut client, method)
                .await
                .expect_err(&format!("{method} with {who}"));
            assert_eq!(
                err.code(),
                Code::Unauthenticated,
                "{method} with {who}: {err:?}"
            );
        }
    }
    for (role, token) in [
        ("read", "read-token"),
        ("write", "write-token"),
        ("plugin", "plugin-token"),
        ("admin", "admin-token"),
        ("none", "idle-token"),
    ] {
        let mut client = secured.client(Some(token)).await;
        for method in &methods {
            let result = call(&mut client, method).await;
            if allowed(role, method) {
                // Past authorisation: the handler's own answer (NOT_FOUND for the probe's
                // unknown ids, FAILED_PRECONDITION for its made-up lease, …).
                if let Err(err) = &result {
                    assert!(!refused(err.code()), "{role} may call {method}: {err:?}");
                }
            } else {
                let err = result.expect_err(&format!("{role} may not call {method}"));
                assert_eq!(
                    err.code(),
                    Code::PermissionDenied,
                    "{role} → {method}: {err:?}"
                );
            }
        }
    }
    secured.daemon.stop().await.expect("stop");
}

#[tokio::test]
async fn without_a_policy_file_every_token_holder_writes_and_none_registers_plugins() {
    let secured = Secured::start_with(false, None).await;
    let methods = methods();
    for token in ["read-token", "plugin-token", "admin-token"] {
        let mut client = secured.client(Some(token)).await;
        for method in &methods {
            let result = call(&mut client, method).await;
            if allowed("write", method) {
                if let Err(err) = &result {
                    assert!(!refused(err.code()), "{token} → {method}: {err:?}");
                }
            } else {
                let err = result.expect_err(&format!("{token} may not call {method}"));
                assert_eq!(err.code(), Code::PermissionDenied, "{token} → {method}");
                assert!(err.message().contains("(roles: write)"), "{err:?}");
            }
        }
    }
    // Credentials are still required.
    let mut anonymous = secured.client(None).await;
    let err = call(&mut anonymous, "ListDeployments").await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    secured.daemon.stop().await.expect("stop");
}

#[tokio::test]
async fn each_role_does_its_work_and_a_plugin_writes_only_with_its_modification_token() {
    let secured = Secured::start(false).await;
    let mut writer = secured.client(Some("write-token")).await;
    let mut reader = secured.client(Some("read-token")).await;
    let mut plugin = secured.client(Some("plugin-token")).await;
    let mut admin = secured.client(Some("admin-token")).await;

    let register = pb::RegisterPluginRequest {
        plugin: Some(pb::Plugin {
            name: "annotate".into(),
            endpoint: "http://127.0.0.1:9".into(),
            triggers: vec![nephrite_proto::nephrite::krm::v1::GroupVersionKind {
                group: "example.com".into(),
                version: "v1".into(),
                kind: "Annotate".into(),
            }],
            ..Default::default()
        }),
    };
    let err = writer
        .register_plugin(register.clone())
        .await
        .expect_err("write may not register plugins");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(err.message().contains("writer (roles: write)"), "{err:?}");
    admin
        .register_plugin(register)
        .await
        .expect("admin registers");
    assert_eq!(
        reader
            .get_plugin(pb::GetRequest {
                id: "annotate".into()
            })
            .await
            .expect("read sees it")
            .into_inner()
            .name,
        "annotate"
    );

    let package = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1'}\n";
    let id = writer
        .create_deployment(pb::CreateDeploymentRequest {
            merge_package_yaml: package.into(),
            ..Default::default()
        })
        .await
        .expect("write creates")
        .into_inner()
        .deployment_id;
    reader
        .get_deployment(pb::GetRequest { id: id.clone() })
        .await
        .expect("read reads");

    // The plugin has no lease: refused, whatever it sends.
    let update = |token: &str| pb::UpdateDeploymentRequest {
        deployment_id: id.clone(),
        package_yaml: package.replace("'1'", "'2'"),
        modification_token: token.to_owned(),
    };
    let err = plugin.update_deployment(update("")).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("modification token"), "{err:?}");
    let err = plugin
        .update_deployment(update("guessed"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let err = plugin
        .get_deployment(pb::GetRequest { id: id.clone() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    // Handed a lease (as the preparer hands one with each package), it writes and ends it.
    let lease = writer
        .start_modification(pb::StartModificationRequest {
            deployment_id: id.clone(),
            lease_ms: 10_000,
        })
        .await
        .expect("lease")
        .into_inner();
    plugin
        .update_deployment(update(&lease.token))
        .await
        .expect("the plugin writes with the token");
    plugin
        .end_modification(pb::EndModificationRequest {
            deployment_id: id.clone(),
            token: lease.token.clone(),
            package_yaml: String::new(),
        })
        .await
        .expect("and ends the lease");
    let stored = reader
        .get_deployment(pb::GetRequest { id: id.clone() })
        .await
        .expect("read")
        .into_inner();
    assert!(
        stored.package_yaml.contains("a: '2'"),
        "{}",
        stored.package_yaml
    );

    // The writer deletes; the reader may not.
    let err = reader
        .delete_deployment(pb::DeleteRequest { id: id.clone() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    writer
        .delete_deployment(pb::DeleteRequest { id })
        .await
        .expect("write deletes");
    secured.daemon.stop().await.expect("stop");
}

#[tokio::test]
async fn patterns_and_ids_over_the_caps_are_refused_naming_the_field_and_the_cap() {
    let secured = Secured::start(false).await;
    let mut client = secured.client(Some("read-token")).await;
    let many: Vec<String> = (0..101).map(|n| format!("t{n}/*")).collect();
    let cases: Vec<(&str, Result<(), tonic::Status>)> = vec![
        (
            "id patterns: 101 patterns, more than the limit of 100 per request",
            client
                .list_templates(pb::ListTemplatesRequest {
                    id_patterns: many.clone(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "site id patterns: 101 patterns, more than the limit of 100 per request",
            client
                .list_deployments(pb::ListDeploymentsRequest {
                    site_id_patterns: many.clone(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "metadata patterns: 101 patterns, more than the limit of 100 per request",
            client
                .list_deployments(pb::ListDeploymentsRequest {
                    metadata_patterns: many.iter().map(|k| (k.clone(), "*".into())).collect(),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "deployment id: 1048576 bytes, longer than the limit of 512",
            client
                .get_deployment(pb::GetRequest {
                    id: "d".repeat(1 << 20),
                })
                .await
                .map(drop),
        ),
        (
            "window.after_id: 600 bytes, longer than the limit of 512",
            client
                .list_sites(pb::ListSitesRequest {
                    window: Some(pb::Window {
                        after_id: "s".repeat(600),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
    ];
    for (message, result) in cases {
        let err = result.expect_err(message);
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert_eq!(err.message(), message);
    }
    // At the cap, a listing is served.
    client
        .list_templates(pb::ListTemplatesRequest {
            id_patterns: many[..100].to_vec(),
            ..Default::default()
        })
        .await
        .expect("100 patterns are served");
    secured.daemon.stop().await.expect("stop");
}

// The CLI runs as a blocking child process: the daemon needs a worker of its own meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_presents_a_token_file() {
    let secured = Secured::start(false).await;
    let server = secured.server();
    let cli = |args: &[&str]| {
        std::process::Command::new(support::binary::BINARY)
            .arg("--server")
            .arg(&server)
            .args(args)
            .env_remove("NEPHRITE_TOKEN_FILE")
            .output()
            .expect("cli runs")
    };
    let anonymous = cli(&["deployment", "list"]);
    assert!(!anonymous.status.success());
    let stderr = String::from_utf8_lossy(&anonymous.stderr);
    assert!(stderr.contains("credentials are required"), "{stderr}");

    let reader = secured.token_file("read-token");
    let reader = reader.display().to_string();
    let listed = cli(&["--token-file", &reader, "deployment", "list", "-o", "json"]);
    assert!(listed.status.success(), "{listed:?}");
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");

    let template = secured.dir.path().join("t.yaml");
    std::fs::write(
        &template,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    )
    .expect("template");
    let template = template.display().to_string();
    let denied = cli(&[
        "--token-file",
        &reader,
        "template",
        "register",
        "t",
        "-f",
        &template,
    ]);
    assert!(!denied.status.success());
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.contains("reader (roles: read) may not call"),
        "{stderr}"
    );
    secured.daemon.stop().await.expect("stop");
}

async fn web_get(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client");
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("GET");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test]
async fn the_web_dashboard_needs_a_token_with_the_read_role() {
    let secured = Secured::start(true).await;
    let web = secured.daemon.web.as_ref().expect("web");
    let base = format!("http://{}", web.local_addr);
    let bearer = |token: &str| format!("Bearer {token}");

    // No credentials: the login form (401), for a page and a deep link; the event stream too.
    let (status, body) = web_get(&format!("{base}/"), &[]).await;
    assert_eq!(status, 401);
    assert!(
        body.contains("<form class=\"login\" method=\"post\" action=\"/login\">"),
        "{body}"
    );
    let (status, body) = web_get(&format!("{base}/deployments/x"), &[]).await;
    assert_eq!(status, 401);
    assert!(
        body.contains("name=\"next\" value=\"/deployments/x\""),
        "{body}"
    );
    let (status, _) = web_get(&format!("{base}/events/deployments"), &[]).await;
    assert_eq!(status, 401);
    // The assets stay open (no data in them).
    assert_eq!(
        web_get(&format!("{base}/assets/dashboard.css"), &[])
            .await
            .0,
        200
    );

    // A wrong token, a token without the read role: refused.
    let wrong = bearer("guess");
    let (status, body) = web_get(&format!("{base}/"), &[("authorization", &wrong)]).await;
    assert_eq!(status, 401);
    assert!(body.contains("the bearer token is not valid"), "{body}");
    let plugin = bearer("plugin-token");
    let (status, body) = web_get(&format!("{base}/"), &[("authorization", &plugin)]).await;
    assert_eq!(status, 403);
    assert!(
        body.contains("annotator (roles: plugin) may not read the dashboard"),
        "{body}"
    );

    // The read role reads; it may not delete, the write role may.
    let read = bearer("read-token");
    let (status, body) = web_get(&format!("{base}/"), &[("authorization", &read)]).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("deployments"), "{body}");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client");
    let delete = |token: &str| {
        http.post(format!("{base}/deployments/none/delete"))
            .header("authorization", bearer(token))
            .send()
    };
    assert_eq!(
        delete("read-token").await.expect("POST").status().as_u16(),
        403
    );
    assert_ne!(
        delete("write-token").await.expect("POST").status().as_u16(),
        403
    );

    // The login form: a wrong token stays out, a read token gets a session cookie that opens
    // the pages, and the cookie stops working once its token leaves the file.
    let login = |token: &str| {
        http.post(format!("{base}/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}&next=%2Fsites"))
            .send()
    };
    let refused = login("guess").await.expect("POST");
    assert_eq!(refused.status().as_u16(), 401);
    assert!(refused.headers().get("set-cookie").is_none());
    let denied = login("plugin-token").await.expect("POST");
    assert_eq!(denied.status().as_u16(), 403);
    let accepted = login("read-token").await.expect("POST");
    assert_eq!(accepted.status().as_u16(), 303);
    assert_eq!(accepted.headers()["location"], "/sites");
    let cookie = accepted.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().expect("pair").to_owned();
    let (status, body) = web_get(&format!("{base}/sites"), &[("cookie", &session)]).await;
    assert_eq!(status, 200, "{body}");
    let tokens = secured.dir.path().join("tokens");
    std::fs::write(&tokens, TOKENS.replace("read-token,reader\n", "")).expect("rotate");
    let (status, body) = web_get(&format!("{base}/sites"), &[("cookie", &session)]).await;
    assert_eq!(status, 401);
    assert!(body.contains("log in again"), "{body}");
    secured.daemon.stop().await.expect("stop");
}
