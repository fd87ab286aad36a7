//! Authentication, roles and call limits, as a client meets them: tokens and client
//! certificates against a policy, token rotation, the refusal to serve a non-loopback address
//! open, undecodable requests, long status messages and the daemon's cap on calls; the access
//! probe (`auth::probe`) the daemons' credential tests use.

mod support;

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nephrite_runtime::{
    AuthChannel, AuthPolicy, CallerIdentity, ClientArgs, DaemonIdentity, Endpoint, GrpcServer,
    ServeArgs, ServeError, ServerTls, ShutdownHandle, dial,
};
use support::SlowService;
use tonic::Code;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic_health::pb::health_check_response::ServingStatus;

/// `nephrite.test.Who/Ask(StringValue) -> StringValue`: answers the caller's identity and roles;
/// a request starting with `fail:` is refused with the whole request echoed.
#[derive(Clone, Default)]
struct WhoService;

impl NamedService for WhoService {
    const NAME: &'static str = "nephrite.test.Who";
}

struct Ask;

impl tonic::server::UnaryService<String> for Ask {
    type Response = String;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<String>, tonic::Status>> + Send>>;

    fn call(&mut self, request: tonic::Request<String>) -> Self::Future {
        let answer = match CallerIdentity::of(&request) {
            Some(who) => format!("{} [{}]", who.name, who.roles.join(",")),
            None => "anonymous".to_owned(),
        };
        let asked = request.into_inner();
        Box::pin(async move {
            if asked.starts_with("fail:") {
                return Err(tonic::Status::not_found(format!("no such thing: {asked}")));
            }
            Ok(tonic::Response::new(answer))
        })
    }
}

impl tower::Service<http::Request<Body>> for WhoService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(Ask, request).await)
        })
    }
}

/// Calls Who/Ask with `message` (any prost message: a `String`, or bytes to send junk).
async fn ask<M>(channel: AuthChannel, message: M) -> Result<String, tonic::Status>
where
    M: prost::Message + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(channel);
    client
        .ready()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/nephrite.test.Who/Ask");
    let codec = tonic_prost::ProstCodec::<M, String>::default();
    Ok(client
        .unary(tonic::Request::new(message), path, codec)
        .await?
        .into_inner())
}

fn identity() -> DaemonIdentity {
    DaemonIdentity::new("auth-test", "1.0.0")
}

fn roles() -> AuthPolicy {
    AuthPolicy::new()
        .with_role("asker", ["nephrite.test.Who/Ask"])
        .expect("pattern")
        .with_role("sleeper", ["nephrite.test.Slow/*"])
        .expect("pattern")
}

const POLICY: &str = "\
identities:
  ops: [admin]
  reader: [asker]
  stranger: [sleeper]
  router-a: [asker]
";

async fn start(server: GrpcServer) -> anyhow::Result<(Endpoint, ShutdownHandle)> {
    let bound = server
        .add_service(WhoService)
        .add_service(SlowService::default())
        .handle_signals(false)
        .bind(&"127.0.0.1:0".parse()?)
        .await?;
    let endpoint = bound.local_endpoint().clone();
    let shutdown = bound.shutdown_handle();
    tokio::spawn(bound.run());
    Ok((endpoint, shutdown))
}

/// The test server with `roles()`, the bearer tokens of the file `tokens` and `POLICY`
/// (written into `dir`).
async fn start_with_policy(
    dir: &Path,
    tokens: &Path,
) -> anyhow::Result<(Endpoint, ShutdownHandle)> {
    let policy = write(dir, "policy.yaml", POLICY)?;
    let args = <ServeArgs as clap::Parser>::try_parse_from([
        "serve",
        "--auth-tokens",
        tokens.to_str().context("path")?,
        "--auth-policy",
        policy.to_str().context("path")?,
    ])?;
    start(GrpcServer::from_args_with_roles(
        identity(),
        &args,
        roles(),
    )?)
    .await
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

fn with_token(dir: &Path, name: &str, token: &str) -> anyhow::Result<ClientArgs> {
    Ok(ClientArgs {
        token_file: Some(write(dir, name, &format!("{token}\n"))?),
        ..ClientArgs::default()
    })
}

#[tokio::test]
async fn tokens_prove_identities_and_roles_decide_each_method() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tokens = write(
        dir.path(),
        "tokens.csv",
        "# token,identity\nt-ops,ops\nt-reader,reader\nt-stranger,stranger\n",
    )?;
    let (endpoint, shutdown) = start_with_policy(dir.path(), &tokens).await?;

    let anonymous = AuthChannel::new(dial(&endpoint).await?);
    let err = ask(anonymous.clone(), "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    let err = support::sleep_call_on(anonymous.clone(), 1)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    let err = support::daemon_info_on(anonymous.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    // Health stays open for probes.
    assert_eq!(
        support::health_on(anonymous, "").await?,
        ServingStatus::Serving
    );

    let wrong = with_token(dir.path(), "wrong", "t-guess")?
        .dial(&endpoint)
        .await?;
    let err = ask(wrong.clone(), "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert!(!err.message().contains("t-guess"), "{err:?}");
    // Health is open whatever the request carries (a probe with a stale token too).
    assert_eq!(support::health_on(wrong, "").await?, ServingStatus::Serving);

    let stranger = with_token(dir.path(), "stranger", "t-stranger")?
        .dial(&endpoint)
        .await?;
    let err = ask(stranger.clone(), "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert_eq!(
        err.message(),
        "stranger (roles: sleeper) may not call /nephrite.test.Who/Ask"
    );
    support::sleep_call_on(stranger.clone(), 1).await?;
    // Reflection and daemon info need credentials, not a role.
    support::daemon_info_on(stranger).await?;

    let reader = with_token(dir.path(), "reader", "t-reader")?;
    let channel = reader.dial(&endpoint).await?;
    assert_eq!(
        ask(channel.clone(), "hi".to_owned()).await?,
        "reader [asker]"
    );
    let err = support::sleep_call_on(channel, 1).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");

    let ops = with_token(dir.path(), "ops", "t-ops")?
        .dial(&endpoint)
        .await?;
    assert_eq!(ask(ops.clone(), "hi".to_owned()).await?, "ops [admin]");
    support::sleep_call_on(ops, 1).await?;

    // Rotation: the file is replaced; the old token stops working, the new one works, and the
    // client re-reads its own token file too.
    std::fs::write(&tokens, "t-ops,ops\nt-reader-2,reader\n")?;
    let channel = reader.dial(&endpoint).await?;
    let err = ask(channel.clone(), "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    std::fs::write(
        reader.token_file.as_ref().context("token file")?,
        "t-reader-2\n",
    )?;
    assert_eq!(ask(channel, "hi".to_owned()).await?, "reader [asker]");

    shutdown.trigger();
    Ok(())
}

#[tokio::test]
async fn without_a_policy_file_the_daemons_table_and_default_roles_apply() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let tokens = write(
        dir.path(),
        "tokens.csv",
        "t-anyone,anyone
",
    )?;
    let args = <ServeArgs as clap::Parser>::try_parse_from([
        "serve",
        "--auth-tokens",
        tokens.to_str().context("path")?,
    ])?;
    let anyone = with_token(dir.path(), "anyone", "t-anyone")?;

    // A daemon with a table: an identity nobody named has the table's default role only.
    let table = roles()
        .with_default_roles(["asker"])
        .map_err(anyhow::Error::msg)?;
    let (endpoint, shutdown) =
        start(GrpcServer::from_args_with_roles(identity(), &args, table)?).await?;
    let channel = anyone.dial(&endpoint).await?;
    assert_eq!(
        ask(channel.clone(), "hi".to_owned()).await?,
        "anyone [asker]"
    );
    let err = support::sleep_call_on(channel, 1).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert_eq!(
        err.message(),
        "anyone (roles: asker) may not call /nephrite.test.Slow/Sleep"
    );
    shutdown.trigger();

    // A table without default roles: unnamed identities may call nothing that needs a role.
    let (endpoint, shutdown) = start(GrpcServer::from_args_with_roles(
        identity(),
        &args,
        roles()
            .with_default_roles(Vec::<String>::new())
            .map_err(anyhow::Error::msg)?,
    )?)
    .await?;
    let channel = anyone.dial(&endpoint).await?;
    let err = ask(channel.clone(), "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    support::daemon_info_on(channel).await?;
    shutdown.trigger();

    // A daemon without a table: every authenticated caller may call everything.
    let (endpoint, shutdown) = start(GrpcServer::from_args(identity(), &args)?).await?;
    let channel = anyone.dial(&endpoint).await?;
    assert_eq!(
        ask(channel.clone(), "hi".to_owned()).await?,
        "anyone [admin]"
    );
    support::sleep_call_on(channel, 1).await?;
    shutdown.trigger();
    Ok(())
}

/// Files of a test PKI: the CA, the server's certificate and key, and per client
/// `NAME.pem` / `NAME.key` (`Some(cn)`: subject CN; `None`: only the SAN `client.test`).
struct PkiFiles {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

fn pki(dir: &Path, clients: &[(&str, Option<&str>)]) -> anyhow::Result<PkiFiles> {
    let pki = support::Pki::new()?;
    for (file, cn) in clients {
        let (cert, key) = pki.client(*cn, "client.test")?;
        write(dir, &format!("{file}.pem"), &cert)?;
        write(dir, &format!("{file}.key"), &key)?;
    }
    Ok(PkiFiles {
        ca: write(dir, "ca.pem", &pki.ca_pem)?,
        server_cert: write(dir, "server.pem", &pki.server_cert_pem)?,
        server_key: write(dir, "server.key", &pki.server_key_pem)?,
    })
}

#[tokio::test]
async fn a_client_certificate_names_the_caller() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = pki(dir.path(), &[("router", Some("router-a")), ("plain", None)])?;
    let tls =
        ServerTls::from_files(&pki.server_cert, &pki.server_key)?.with_client_ca_file(&pki.ca)?;
    let policy = roles().merge_yaml(POLICY).map_err(anyhow::Error::msg)?;
    let (endpoint, shutdown) = start(
        GrpcServer::new(identity())
            .tls(Some(tls))
            .auth_policy(Some(policy)),
    )
    .await?;

    let client = |name: &str| ClientArgs {
        ca: Some(pki.ca.clone()),
        cert: Some(dir.path().join(format!("{name}.pem"))),
        key: Some(dir.path().join(format!("{name}.key"))),
        ..ClientArgs::default()
    };
    let router = client("router").dial(&endpoint).await?;
    assert_eq!(ask(router, "hi".to_owned()).await?, "router-a [asker]");
    // Without a CN the first DNS name is the identity; the policy gives it no role.
    let plain = client("plain").dial(&endpoint).await?;
    let err = ask(plain, "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(
        err.message().starts_with("client.test (roles: none)"),
        "{err:?}"
    );

    // The flags parse into the same credentials.
    let parsed = <ClientCli as clap::Parser>::try_parse_from([
        "cli",
        "--ca",
        pki.ca.to_str().context("path")?,
        "--cert",
        dir.path().join("router.pem").to_str().context("path")?,
        "--key",
        dir.path().join("router.key").to_str().context("path")?,
    ])?;
    assert_eq!(parsed.client, client("router"));
    assert!(<ClientCli as clap::Parser>::try_parse_from(["cli", "--cert", "c.pem"]).is_err());
    shutdown.trigger();
    Ok(())
}

#[tokio::test]
async fn mutual_tls_on_a_unix_socket_names_the_caller() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pki = pki(dir.path(), &[("router", Some("router-a"))])?;
    let tls =
        ServerTls::from_files(&pki.server_cert, &pki.server_key)?.with_client_ca_file(&pki.ca)?;
    let policy = roles().merge_yaml(POLICY).map_err(anyhow::Error::msg)?;
    let endpoint = Endpoint::unix(dir.path().join("agent.sock"));
    let bound = GrpcServer::new(identity())
        .tls(Some(tls))
        .auth_policy(Some(policy))
        .add_service(WhoService)
        .handle_signals(false)
        .bind(&endpoint)
        .await?;
    let shutdown = bound.shutdown_handle();
    tokio::spawn(bound.run());

    let with_certificate = ClientArgs {
        ca: Some(pki.ca.clone()),
        cert: Some(dir.path().join("router.pem")),
        key: Some(dir.path().join("router.key")),
        ..ClientArgs::default()
    };
    let router = with_certificate.dial(&endpoint).await?;
    assert_eq!(ask(router, "hi".to_owned()).await?, "router-a [asker]");
    // Without a certificate the transport refuses (client certificates are required).
    let without = ClientArgs {
        ca: Some(pki.ca.clone()),
        ..ClientArgs::default()
    };
    if let Ok(channel) = without.dial(&endpoint).await {
        let err = ask(channel, "hi".to_owned()).await.unwrap_err();
        assert_ne!(err.code(), Code::Unimplemented, "{err:?}");
    }
    shutdown.trigger();
    Ok(())
}

#[derive(clap::Parser)]
struct ClientCli {
    #[command(flatten)]
    client: ClientArgs,
}

#[tokio::test]
async fn a_non_loopback_address_is_not_served_open_unless_insecure() -> anyhow::Result<()> {
    let open: Endpoint = "0.0.0.0:0".parse()?;
    let err = GrpcServer::new(identity())
        .handle_signals(false)
        .bind(&open)
        .await
        .expect_err("no authentication");
    assert!(matches!(err, ServeError::Unauthenticated { .. }), "{err}");
    assert!(err.to_string().contains("--insecure"), "{err}");

    let args = <ServeArgs as clap::Parser>::try_parse_from([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--insecure",
    ])?;
    let bound = GrpcServer::from_args(identity(), &args)?
        .handle_signals(false)
        .bind(&args.listen)
        .await?;
    drop(bound);

    // With tokens, the same address is served.
    let dir = tempfile::tempdir()?;
    let tokens = write(dir.path(), "tokens", "t,ops\n")?;
    let args = <ServeArgs as clap::Parser>::try_parse_from([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--auth-tokens",
        tokens.to_str().context("path")?,
    ])?;
    drop(
        GrpcServer::from_args(identity(), &args)?
            .handle_signals(false)
            .bind(&args.listen)
            .await?,
    );
    // Loopback stays open for local use.
    drop(
        GrpcServer::new(identity())
            .handle_signals(false)
            .bind(&"127.0.0.1:0".parse()?)
            .await?,
    );
    Ok(())
}

#[tokio::test]
async fn undecodable_requests_and_long_messages_and_the_call_cap() -> anyhow::Result<()> {
    let slow = SlowService::default();
    let bound = GrpcServer::new(identity())
        .max_calls(1)
        .add_service(WhoService)
        .add_service(slow.clone())
        .handle_signals(false)
        .bind(&"127.0.0.1:0".parse()?)
        .await?;
    let endpoint = bound.local_endpoint().clone();
    let shutdown = bound.shutdown_handle();
    tokio::spawn(bound.run());
    let channel = AuthChannel::new(dial(&endpoint).await?);

    // A string field holding invalid UTF-8 (sent as bytes on the same field number).
    let err = ask(channel.clone(), vec![0xffu8, 0xfe, b'a'])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // A handler echoing a megabyte: the message arrives, cut.
    let huge = format!("fail:{}", "x".repeat(1 << 20));
    let err = ask(channel.clone(), huge).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(err.message().len() < 4 * 1024, "{}", err.message().len());
    assert!(
        err.message().starts_with("no such thing: fail:xxx"),
        "{err:?}"
    );

    // One call at a time: a second is refused while the first sleeps (it has started: its
    // handler said so; 3 s leaves the refusal ample time even on a loaded machine); health
    // still answers.
    let sleeping = tokio::spawn(support::sleep_call_on(channel.clone(), 3000));
    slow.started.notified().await;
    let err = ask(channel.clone(), "hi".to_owned()).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(
        support::health_on(channel.clone(), "").await?,
        ServingStatus::Serving
    );
    sleeping.await??;
    assert_eq!(ask(channel.clone(), "hi".to_owned()).await?, "anonymous");

    // Reflection v1 describes itself.
    assert!(
        support::reflection_knows_symbol(
            dial(&endpoint).await?,
            "grpc.reflection.v1.ServerReflection"
        )
        .await?
    );
    shutdown.trigger();
    Ok(())
}

#[tokio::test]
async fn streams_per_connection_are_capped() -> anyhow::Result<()> {
    let (endpoint, shutdown) =
        start(GrpcServer::new(identity()).max_streams_per_connection(1)).await?;
    let channel = AuthChannel::new(dial(&endpoint).await?);
    let started = Instant::now();
    let calls = [300, 300].map(|ms| tokio::spawn(support::sleep_call_on(channel.clone(), ms)));
    let mut refused = 0;
    for call in calls {
        match call.await? {
            Ok(()) => {}
            // The server refuses the stream past its SETTINGS limit (REFUSED_STREAM).
            Err(status) if status.message().contains("http2 error") => refused += 1,
            Err(status) => anyhow::bail!("unexpected {status:?}"),
        }
    }
    // Never two at once on the connection: one was refused, or the second waited.
    let elapsed = started.elapsed();
    assert!(
        refused == 1 || elapsed >= Duration::from_millis(600),
        "{refused} refused in {elapsed:?}"
    );
    support::sleep_call_on(channel, 1).await?;
    shutdown.trigger();
    Ok(())
}

#[tokio::test]
async fn the_access_probe_reports_every_answer_that_is_not_as_expected() -> anyhow::Result<()> {
    use nephrite_runtime::auth::probe::{AccessReport, Expected};
    let dir = tempfile::tempdir()?;
    let tokens = write(dir.path(), "tokens.csv", "t-ops,ops\nt-reader,reader\n")?;
    let (endpoint, shutdown) = start_with_policy(dir.path(), &tokens).await?;
    let anonymous = AuthChannel::new(dial(&endpoint).await?);
    let reader = with_token(dir.path(), "reader", "t-reader")?
        .dial(&endpoint)
        .await?;
    let ops = with_token(dir.path(), "ops", "t-ops")?
        .dial(&endpoint)
        .await?;
    let methods: Vec<String> = [
        "/nephrite.test.Who/Ask",
        "/nephrite.test.Slow/Sleep",
        "/nephrite.daemon.v1.Daemon/GetInfo",
    ]
    .map(str::to_owned)
    .to_vec();

    let mut report = AccessReport::new();
    report
        .check("anonymous", &anonymous, &methods, |_| {
            Expected::Unauthenticated
        })
        .await;
    report
        .check("reader", &reader, &methods, |method| {
            if method.ends_with("/Sleep") {
                Expected::PermissionDenied
            } else {
                Expected::Allowed
            }
        })
        .await;
    report
        .check("ops", &ops, &methods, |_| Expected::Allowed)
        .await;
    assert_eq!(report.checked(), 9);
    report.assert_as_expected();

    // Each answer that differs is named; a method that does not exist is not "allowed".
    let mut wrong = AccessReport::new();
    let one = |path: &str| vec![path.to_owned()];
    wrong
        .check("reader", &reader, &one("/nephrite.test.Slow/Sleep"), |_| {
            Expected::Allowed
        })
        .await;
    wrong
        .check("ops", &ops, &one("/nephrite.test.Nothing/Here"), |_| {
            Expected::Allowed
        })
        .await;
    wrong
        .check(
            "anonymous",
            &anonymous,
            &one("/nephrite.test.Who/Ask"),
            |_| Expected::PermissionDenied,
        )
        .await;
    let lines = wrong.wrong();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].starts_with(
            "reader calling /nephrite.test.Slow/Sleep: expected Allowed, got PermissionDenied: \
             reader (roles: asker) may not call"
        ),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with(
            "ops calling /nephrite.test.Nothing/Here: expected Allowed, got Unimplemented"
        ),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with(
            "anonymous calling /nephrite.test.Who/Ask: expected PermissionDenied, got \
             Unauthenticated"
        ),
        "{lines:?}"
    );
    assert!(std::panic::catch_unwind(|| wrong.assert_as_expected()).is_err());
    shutdown.trigger();
    Ok(())
}
