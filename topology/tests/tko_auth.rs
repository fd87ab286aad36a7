//! Credentials on both sides of ntc's TKO backend, against the real preparer (in-process,
//! SQLite, requiring bearer tokens): ntc's Data API client presents `--token-file` (a wrong
//! token is refused at registration), and ntc's `Prepare` answers UNAUTHENTICATED without
//! or with unknown credentials, PERMISSION_DENIED to an identity without the `preparer`
//! role, and works for the `preparer` role — against the Data API of ntc's configuration,
//! whatever `data_endpoint` the request names.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use nephrite_ntc::tko::{self, TkoConfig};
use nephrite_preparer::daemon::{ServeCommand, start};
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_proto::nephrite::preparer::plugin::v1::PrepareRequest;
use nephrite_proto::nephrite::preparer::plugin::v1::preparer_client::PreparerClient;
use nephrite_runtime::{AuthChannel, ClientArgs, DaemonIdentity, Endpoint, GrpcServer, ServeArgs};
use nephrite_topology::RolloutPolicy;
use tonic::Code;

fn example(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/free5gc")
        .join(file);
    std::fs::read_to_string(path).expect("example file")
}

#[derive(clap::Parser)]
struct PreparerFlags {
    #[command(flatten)]
    serve: ServeCommand,
}

#[derive(clap::Parser)]
struct NtcFlags {
    #[command(flatten)]
    serve: ServeArgs,
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<String> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path.display().to_string())
}

fn token(dir: &Path, name: &str, token: &str) -> anyhow::Result<ClientArgs> {
    Ok(ClientArgs {
        token_file: Some(write(dir, name, &format!("{token}\n"))?.into()),
        ..ClientArgs::default()
    })
}

/// ntc's TKO backend with `credentials` for the Data API and its own server requiring the
/// tokens of `ntc-tokens.csv` under `ntc-policy.yaml`.
async fn start_ntc(
    dir: &Path,
    data: &str,
    credentials: ClientArgs,
) -> anyhow::Result<tko::RunningTko> {
    let tokens = dir.join("ntc-tokens.csv").display().to_string();
    let policy = dir.join("ntc-policy.yaml").display().to_string();
    let args = NtcFlags::try_parse_from([
        "ntc",
        "--listen",
        "127.0.0.1:0",
        "--auth-tokens",
        &tokens,
        "--auth-policy",
        &policy,
    ])?
    .serve;
    let roles = tko::roles().map_err(anyhow::Error::msg)?;
    let server =
        GrpcServer::from_args_with_roles(DaemonIdentity::new("ntc", "test"), &args, roles)?
            .handle_signals(false);
    tko::start(
        server,
        &args.listen,
        TkoConfig {
            data: data.to_owned(),
            credentials,
            advertise: None,
            plugin_name: "ntc".into(),
            policy: RolloutPolicy::default(),
        },
    )
    .await
}

async fn prepare(
    channel: AuthChannel,
    parent: &str,
    package_yaml: &str,
) -> Result<bool, tonic::Status> {
    let answer = PreparerClient::new(channel)
        .prepare(PrepareRequest {
            deployment_id: parent.to_owned(),
            package_yaml: package_yaml.to_owned(),
            // A caller naming another Data API is not followed.
            data_endpoint: "http://127.0.0.1:9".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(answer.prepared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_needs_the_preparer_role_and_the_data_api_gets_ntcs_token() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let preparer_tokens = write(d, "preparer-tokens.csv", "t-ntc,ntc\nt-ops,ops\n")?;
    write(
        d,
        "ntc-tokens.csv",
        "t-preparer,preparer\nt-watcher,watcher\n",
    )?;
    write(
        d,
        "ntc-policy.yaml",
        "roles:\n  watcher: [nephrite.daemon.v1.Daemon/*]\n\
         identities:\n  preparer: [preparer]\n  watcher: [watcher]\n",
    )?;
    let store = format!("sqlite:{}", d.join("p.db").display());
    let command = PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--auth-tokens",
        &preparer_tokens,
    ])?
    .serve;
    let preparer = start(&command, false).await?;
    let data_url = preparer.endpoint.to_string();
    let mut data = DataClient::new(token(d, "ops", "t-ops")?.dial(&preparer.endpoint).await?);
    let config = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nf-config}\n";
    for template in [
        "pkg-example-upf-bp",
        "pkg-example-smf-bp",
        "pkg-example-amf-bp",
    ] {
        data.register_template(pb::RegisterTemplateRequest {
            id: template.into(),
            metadata: Default::default(),
            package_yaml: config.into(),
        })
        .await?;
    }
    for (site, kind) in [("regional", "regional"), ("edge01", "edge")] {
        data.register_site(pb::RegisterSiteRequest {
            id: site.into(),
            metadata: [
                ("Site.nephio.org/site-type".to_owned(), kind.to_owned()),
                ("Site.nephio.org/region".to_owned(), "us-west".to_owned()),
            ]
            .into(),
            package_yaml: config.into(),
            ..Default::default()
        })
        .await?;
    }

    // ntc with a token the preparer does not know cannot register.
    let refused = start_ntc(d, &data_url, token(d, "ntc-wrong", "t-guess")?).await;
    let error = format!("{:#}", refused.err().context("a wrong token registers")?);
    assert!(
        error.contains("RegisterPlugin") && error.contains("authentication credentials"),
        "{error}"
    );
    assert!(!error.contains("t-guess"), "{error}");

    let ntc = start_ntc(d, &data_url, token(d, "ntc-token", "t-ntc")?).await?;
    // Started: RegisterPlugin took ntc's token (start fails otherwise, as above).

    // The parent is created prepared, so only the test calls Prepare.
    let package_yaml = format!(
        "{}---\n{}",
        example("topology.yaml"),
        example("classes.yaml")
    );
    data.register_template(pb::RegisterTemplateRequest {
        id: "free5gc-topology".into(),
        metadata: Default::default(),
        package_yaml: package_yaml.clone(),
    })
    .await?;
    let parent = data
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "free5gc-topology".into(),
            prepared: true,
            ..Default::default()
        })
        .await?
        .into_inner()
        .deployment_id;

    let endpoint: &Endpoint = &ntc.endpoint;
    let anonymous = AuthChannel::new(nephrite_runtime::dial(endpoint).await?);
    let status = prepare(anonymous, &parent, &package_yaml)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let wrong = token(d, "wrong", "t-preparer-guess")?
        .dial(endpoint)
        .await?;
    let status = prepare(wrong, &parent, &package_yaml).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let watcher = token(d, "watcher", "t-watcher")?.dial(endpoint).await?;
    let status = prepare(watcher, &parent, &package_yaml).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let children = |mut data: DataClient<AuthChannel>, parent: String| async move {
        anyhow::Ok(
            data.list_deployments(pb::ListDeploymentsRequest {
                parent_deployment_id: parent,
                ..Default::default()
            })
            .await?
            .into_inner()
            .deployments
            .len(),
        )
    };
    assert_eq!(children(data.clone(), parent.clone()).await?, 0);

    let preparer_role = token(d, "preparer", "t-preparer")?.dial(endpoint).await?;
    assert!(prepare(preparer_role, &parent, &package_yaml).await?);
    // Written to the configured preparer (the request named another Data API): one UPF on
    // the edge, the SMF and AMF on the regional site.
    assert_eq!(children(data.clone(), parent.clone()).await?, 3);

    tokio::time::timeout(Duration::from_secs(20), ntc.stop()).await??;
    preparer.stop().await?;
    Ok(())
}
