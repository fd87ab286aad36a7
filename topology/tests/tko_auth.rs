//! Credentials on both sides of ntc's TKO backend, against the real preparer (in-process,
//! SQLite): with bearer tokens, ntc's Data API client presents `--token-file` (a wrong token
//! is refused at registration; an identity the preparer's policy does not make `admin` may
//! not register a plugin), and ntc's `Prepare` answers UNAUTHENTICATED without or with
//! unknown credentials, PERMISSION_DENIED to an identity without the `preparer` role, and
//! works for the `preparer` role — against the Data API of ntc's configuration, whatever
//! `data_endpoint` the request names. With mutual TLS on both daemons, the whole path runs:
//! the preparer dials ntc with its `--plugin-*` certificate, ntc writes the children back
//! with its own.

mod tko_lab;

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use nephrite_ntc::tko::{self, TkoConfig};
use nephrite_preparer::daemon::start;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_proto::nephrite::preparer::plugin::v1::PrepareRequest;
use nephrite_proto::nephrite::preparer::plugin::v1::preparer_client::PreparerClient;
use nephrite_runtime::{AuthChannel, ClientArgs, DaemonIdentity, Endpoint, GrpcServer, ServeArgs};
use nephrite_topology::RolloutPolicy;
use tko_lab::{PreparerFlags, example};
use tonic::Code;

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
            election: None,
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
    let preparer_tokens = write(
        d,
        "preparer-tokens.csv",
        "t-ntc,ntc\nt-ops,ops\nt-other,other-plugin\n",
    )?;
    // Registering a plugin is admin's; the others keep the preparer's default role, write.
    let preparer_policy = write(
        d,
        "preparer-policy.yaml",
        "identities:\n  ntc: [admin]\ndefault_roles: [write]\n",
    )?;
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
        "--auth-policy",
        &preparer_policy,
    ])?
    .serve;
    let preparer = start(&command, false).await?;
    let data_url = preparer.endpoint.to_string();
    let mut data = DataClient::new(token(d, "ops", "t-ops")?.dial(&preparer.endpoint).await?);
    register_sites_and_templates(&mut data).await?;

    // ntc with a token the preparer does not know cannot register.
    let refused = start_ntc(d, &data_url, token(d, "ntc-wrong", "t-guess")?).await;
    let error = format!("{:#}", refused.err().context("a wrong token registers")?);
    assert!(
        error.contains("RegisterPlugin") && error.contains("Unauthenticated"),
        "{error}"
    );
    assert!(!error.contains("t-guess"), "{error}");
    // A valid token whose identity is not admin cannot register a plugin either.
    let refused = start_ntc(d, &data_url, token(d, "other", "t-other")?).await;
    let error = format!("{:#}", refused.err().context("a writer registers")?);
    assert!(
        error.contains("RegisterPlugin")
            && error.contains("other-plugin (roles: write) may not call"),
        "{error}"
    );

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
    // A flow mapping nested 70,000 deep (350 KB) is refused naming the field and the limit.
    let deep = format!("{}1{}", "{a: ".repeat(70_000), "}".repeat(70_000));
    let answer = PreparerClient::new(preparer_role.clone())
        .prepare(PrepareRequest {
            deployment_id: parent.clone(),
            package_yaml: deep,
            ..Default::default()
        })
        .await?
        .into_inner();
    assert!(!answer.prepared);
    assert!(
        answer.error.contains("package_yaml") && answer.error.contains("limit of 100 levels"),
        "{}",
        answer.error
    );
    assert!(prepare(preparer_role, &parent, &package_yaml).await?);
    // Written to the configured preparer (the request named another Data API): one UPF on
    // the edge, the SMF and AMF on the regional site.
    assert_eq!(children(data.clone(), parent.clone()).await?, 3);

    tokio::time::timeout(Duration::from_secs(20), ntc.stop()).await??;
    preparer.stop().await?;
    Ok(())
}

/// A test CA, a server certificate for `127.0.0.1` / `localhost` (both daemons use it) and
/// client certificates named by their CN, as PEM files in `dir`: `ca.pem`, `server.pem`,
/// `server.key`, `NAME.pem`, `NAME.key`.
fn pki(dir: &Path, clients: &[&str]) -> anyhow::Result<()> {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    write(dir, "ca.pem", &ca.self_signed(&ca_key)?.pem())?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?
        .signed_by(&key, &issuer)?;
    write(dir, "server.pem", &server.pem())?;
    write(dir, "server.key", &key.serialize_pem())?;
    for name in clients {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![format!("{name}.test")])?;
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, *name);
        write(
            dir,
            &format!("{name}.pem"),
            &params.signed_by(&key, &issuer)?.pem(),
        )?;
        write(dir, &format!("{name}.key"), &key.serialize_pem())?;
    }
    Ok(())
}

fn certificate(dir: &Path, name: &str) -> ClientArgs {
    ClientArgs {
        ca: Some(dir.join("ca.pem")),
        cert: Some(dir.join(format!("{name}.pem"))),
        key: Some(dir.join(format!("{name}.key"))),
        ..ClientArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preparer_and_ntc_run_the_whole_path_with_mutual_tls() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    pki(d, &["preparer", "ntc", "ops", "intruder"])?;
    let path = |name: &str| d.join(name).display().to_string();
    let preparer_policy = write(
        d,
        "preparer-policy.yaml",
        "identities:\n  ntc: [admin]\n  ops: [write]\n",
    )?;
    let store = format!("sqlite:{}", d.join("p.db").display());
    let command = PreparerFlags::try_parse_from([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--interval",
        "200ms",
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--tls-client-ca",
        &path("ca.pem"),
        "--auth-policy",
        &preparer_policy,
        "--plugin-ca",
        &path("ca.pem"),
        "--plugin-cert",
        &path("preparer.pem"),
        "--plugin-key",
        &path("preparer.key"),
    ])?
    .serve;
    let preparer = start(&command, false).await?;
    let mut data = DataClient::new(certificate(d, "ops").dial(&preparer.endpoint).await?);
    register_sites_and_templates(&mut data).await?;

    // ntc requires client certificates too; its default role table lets the preparer's
    // identity (any authenticated caller) call Prepare.
    let args = NtcFlags::try_parse_from([
        "ntc",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--tls-client-ca",
        &path("ca.pem"),
    ])?
    .serve;
    let roles = tko::roles().map_err(anyhow::Error::msg)?;
    let server =
        GrpcServer::from_args_with_roles(DaemonIdentity::new("ntc", "test"), &args, roles)?
            .handle_signals(false);
    let ntc = tko::start(
        server,
        &args.listen,
        TkoConfig {
            data: preparer.endpoint.to_string(),
            credentials: certificate(d, "ntc"),
            advertise: None,
            plugin_name: "ntc".into(),
            policy: RolloutPolicy::default(),
            election: None,
        },
    )
    .await?;

    // Without a client certificate (TLS only), ntc's TLS handshake refuses the caller.
    let tls_only = ClientArgs {
        ca: Some(d.join("ca.pem")),
        ..ClientArgs::default()
    };
    let package_yaml = format!(
        "{}---\n{}",
        example("topology.yaml"),
        example("classes.yaml")
    );
    let refused = match tls_only.dial(&ntc.endpoint).await {
        Ok(channel) => prepare(channel, "nothing", &package_yaml).await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "a caller without a certificate reached Prepare");

    // A topology deployment the preparer's loop hands to ntc over mutual TLS; ntc creates the
    // three children through the Data API with its own certificate.
    data.register_template(pb::RegisterTemplateRequest {
        id: "free5gc-topology".into(),
        metadata: Default::default(),
        package_yaml,
    })
    .await?;
    let parent = data
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "free5gc-topology".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .deployment_id;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let children = data
            .list_deployments(pb::ListDeploymentsRequest {
                parent_deployment_id: parent.clone(),
                ..Default::default()
            })
            .await?
            .into_inner()
            .deployments
            .len();
        if children == 3 {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let info = data
                .get_deployment(pb::GetRequest { id: parent.clone() })
                .await?
                .into_inner();
            anyhow::bail!("{children} children after 90 s; the parent: {info:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A certificate from the same CA without a role in the preparer's policy reads nothing.
    let mut intruder = DataClient::new(certificate(d, "intruder").dial(&preparer.endpoint).await?);
    let status = intruder
        .list_deployments(pb::ListDeploymentsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");

    tokio::time::timeout(Duration::from_secs(20), ntc.stop()).await??;
    preparer.stop().await?;
    Ok(())
}

async fn register_sites_and_templates(data: &mut DataClient<AuthChannel>) -> anyhow::Result<()> {
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
    Ok(())
}
