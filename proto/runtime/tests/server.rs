//! The runtime's server and client against each other on loopback: TCP,
//! Unix sockets, TLS, metrics, graceful and forced shutdown, and a real
//! SIGTERM to a child process.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use futures::StreamExt as _;
use nephrite_runtime::{
    BoundServer, ClientTls, DaemonIdentity, DialOptions, Endpoint, GrpcServer, ServeError,
    ServeReport, ServerTls, ShutdownReason, dial, dial_with,
};
use support::{SLOW_SERVICE, SlowService};

const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
use tokio::task::JoinHandle;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

fn identity() -> DaemonIdentity {
    DaemonIdentity::new("test-daemon", "1.2.3").with_build("abc123")
}

async fn start(
    server: GrpcServer,
    listen: &str,
) -> anyhow::Result<(
    Endpoint,
    Option<Endpoint>,
    nephrite_runtime::ShutdownHandle,
    JoinHandle<Result<ServeReport, ServeError>>,
)> {
    let bound: BoundServer = server.handle_signals(false).bind(&listen.parse()?).await?;
    let endpoint = bound.local_endpoint().clone();
    let metrics = bound.metrics_endpoint().cloned();
    let handle = bound.shutdown_handle();
    let task = tokio::spawn(bound.run());
    Ok((endpoint, metrics, handle, task))
}

async fn check_everything_served(endpoint: &Endpoint, metrics: &Endpoint) -> anyhow::Result<()> {
    let channel = dial(endpoint).await?;

    assert_eq!(
        support::health(channel.clone(), "").await?,
        ServingStatus::Serving
    );
    for service in [
        "nephrite.daemon.v1.Daemon",
        "grpc.health.v1.Health",
        SLOW_SERVICE,
    ] {
        assert_eq!(
            support::health(channel.clone(), service).await?,
            ServingStatus::Serving,
            "{service}"
        );
    }

    let services = support::reflected_services(channel.clone()).await?;
    assert_eq!(
        services,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "nephrite.daemon.v1.Daemon",
            SLOW_SERVICE,
        ]
    );
    assert!(support::reflection_knows_symbol(channel.clone(), "nephrite.daemon.v1.Daemon").await?);
    assert!(support::reflection_knows_symbol(channel.clone(), "grpc.health.v1.Health").await?);

    let info = support::daemon_info(channel.clone()).await?;
    assert_eq!(info.name, "test-daemon");
    assert_eq!(info.version, "1.2.3");
    assert_eq!(info.build, "abc123");
    assert!(!info.draining);
    assert!(info.started_at.is_some());
    assert!(
        info.services
            .contains(&"nephrite.daemon.v1.Daemon".to_owned())
    );
    assert!(info.services.contains(&SLOW_SERVICE.to_owned()));

    support::sleep_call(channel.clone(), 1).await?;

    let text = support::scrape(metrics, OPENMETRICS_CONTENT_TYPE).await?;
    assert!(
        text.contains("# TYPE grpc_server_handled counter"),
        "OpenMetrics, as prometheus-client writes it: {text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
    let get_info = support::sample(
        &text,
        "grpc_server_handled_total",
        &[
            ("grpc_service", "nephrite.daemon.v1.Daemon"),
            ("grpc_method", "GetInfo"),
            ("grpc_code", "OK"),
        ],
    );
    assert_eq!(get_info, Some(1.0), "{text}");
    let checks = support::sample(
        &text,
        "grpc_server_handled_total",
        &[("grpc_method", "Check"), ("grpc_code", "OK")],
    );
    assert_eq!(checks, Some(4.0), "{text}");
    assert!(
        text.contains("grpc_server_handling_seconds_bucket{"),
        "latency histogram missing: {text}"
    );
    Ok(())
}

#[tokio::test]
async fn serves_health_reflection_info_and_metrics_over_tcp_and_unix() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("daemon.sock");
    for listen in [
        "127.0.0.1:0".to_owned(),
        format!("unix://{}", socket.display()),
    ] {
        let server = GrpcServer::new(identity())
            .add_service(SlowService::default())
            .metrics_listen(Some("127.0.0.1:0".parse()?));
        let (endpoint, metrics, shutdown, task) = start(server, &listen).await?;
        if listen.starts_with("127.") {
            assert!(
                matches!(&endpoint, Endpoint::Tcp { port, .. } if *port != 0),
                "{endpoint}"
            );
        } else {
            assert_eq!(endpoint, Endpoint::unix(&socket));
        }
        check_everything_served(&endpoint, &metrics.context("metrics endpoint")?)
            .await
            .with_context(|| format!("serving on {listen}"))?;

        shutdown.trigger();
        let report = tokio::time::timeout(Duration::from_secs(5), task).await???;
        assert_eq!(report.reason, ShutdownReason::Requested);
        let err = dial(&endpoint).await.expect_err("still accepting");
        assert!(err.to_string().contains(&endpoint.to_string()), "{err}");
        assert!(!err.to_string().ends_with("transport error"), "{err}");
    }
    assert!(!socket.exists(), "socket file removed after shutdown");
    Ok(())
}

#[tokio::test]
async fn shutdown_reports_not_serving_then_drains_the_in_flight_request() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("drain.sock");
    let slow = SlowService::default();
    let grace = Duration::from_secs(5);
    let server = GrpcServer::new(identity())
        .add_service(slow.clone())
        .shutdown_grace(grace);
    let (endpoint, _, shutdown, task) =
        start(server, &format!("unix:{}", socket.display())).await?;
    let channel = dial(&endpoint).await?;

    // A watcher of the overall status; first item is the current status.
    let mut watch = HealthClient::new(channel.clone())
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await?
        .into_inner();
    let first = watch.next().await.context("watch item")??;
    assert_eq!(first.status(), ServingStatus::Serving);

    // A request that is still running when shutdown begins.
    let started = slow.started.notified();
    let in_flight = tokio::spawn(support::sleep_call(channel.clone(), 800));
    started.await;

    let triggered_at = Instant::now();
    shutdown.trigger();

    let update = tokio::time::timeout(Duration::from_secs(2), watch.next())
        .await
        .context("watcher saw no update")?
        .context("watch ended without NOT_SERVING")??;
    assert_eq!(update.status(), ServingStatus::NotServing);
    // the watch stream ends after NOT_SERVING so it does not hold the drain
    let end = tokio::time::timeout(Duration::from_secs(2), watch.next()).await?;
    assert!(
        end.is_none(),
        "watch should end while draining, got {end:?}"
    );

    in_flight
        .await?
        .context("in-flight request must complete")?;
    let report = tokio::time::timeout(grace + Duration::from_secs(1), task)
        .await
        .context("server did not return within the grace period")???;
    assert_eq!(report.reason, ShutdownReason::Requested);
    assert!(triggered_at.elapsed() < grace);
    assert!(
        report.drain_time >= Duration::from_millis(300),
        "{report:?}"
    );

    // no longer accepting: the socket is gone and dialing fails
    assert!(!socket.exists());
    assert!(dial(&endpoint).await.is_err());
    Ok(())
}

#[tokio::test]
async fn drain_past_the_grace_period_is_forced_and_reported() -> anyhow::Result<()> {
    let slow = SlowService::default();
    let grace = Duration::from_millis(300);
    let server = GrpcServer::new(identity())
        .add_service(slow.clone())
        .shutdown_grace(grace);
    let (endpoint, _, shutdown, task) = start(server, "127.0.0.1:0").await?;
    let channel = dial(&endpoint).await?;

    let started = slow.started.notified();
    let stuck = tokio::spawn(support::sleep_call(channel, 60_000));
    started.await;

    let triggered_at = Instant::now();
    shutdown.trigger();
    let result = tokio::time::timeout(Duration::from_secs(5), task).await??;
    let elapsed = triggered_at.elapsed();
    assert!(
        matches!(result, Err(ServeError::DrainTimedOut { grace: g, .. }) if g == grace),
        "{result:?}"
    );
    assert!(
        elapsed >= grace && elapsed < grace + Duration::from_secs(3),
        "{elapsed:?}"
    );

    let status = tokio::time::timeout(Duration::from_secs(5), stuck)
        .await
        .context("client not released by the forced close")??
        .expect_err("the stuck call cannot succeed");
    assert_ne!(status.code(), tonic::Code::Ok);
    Ok(())
}

#[tokio::test]
async fn busy_and_bogus_listen_addresses_fail_with_their_name() -> anyhow::Result<()> {
    let (endpoint, _, shutdown, task) = start(GrpcServer::new(identity()), "127.0.0.1:0").await?;
    let err = GrpcServer::new(identity())
        .handle_signals(false)
        .bind(&endpoint)
        .await
        .expect_err("port in use");
    assert!(err.to_string().contains(&endpoint.to_string()), "{err}");

    let err = GrpcServer::new(identity())
        .bind(&"https://127.0.0.1:0".parse()?)
        .await
        .expect_err("https without certificate");
    assert!(err.to_string().contains("https://127.0.0.1:0"), "{err}");

    shutdown.trigger();
    task.await??;
    Ok(())
}

#[tokio::test]
async fn tls_and_mutual_tls() -> anyhow::Result<()> {
    let pki = support::Pki::new()?;
    let (client_cert_pem, client_key_pem) = pki.client(None, "client.test")?;
    let dir = tempfile::tempdir()?;
    let write = |name: &str, text: &str| -> anyhow::Result<std::path::PathBuf> {
        let path = dir.path().join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    let cert = write("server.pem", &pki.server_cert_pem)?;
    let key = write("server.key", &pki.server_key_pem)?;
    let ca = write("ca.pem", &pki.ca_pem)?;

    // TLS from files, as --tls-cert/--tls-key would load it.
    let tls = ServerTls::from_files(&cert, &key)?;
    let (endpoint, _, shutdown, task) =
        start(GrpcServer::new(identity()).tls(Some(tls)), "127.0.0.1:0").await?;
    let port = match &endpoint {
        Endpoint::Tcp { port, .. } => *port,
        Endpoint::Unix { .. } => anyhow::bail!("expected tcp"),
    };
    let https: Endpoint = format!("https://localhost:{port}").parse()?;
    let options = DialOptions::with_tls(ClientTls::new().with_ca_file(&ca)?);
    let channel = dial_with(&https, &options).await?;
    assert_eq!(support::health(channel, "").await?, ServingStatus::Serving);
    // IP SAN works too when the endpoint is an IP literal
    let channel = dial_with(&endpoint, &options).await?;
    assert_eq!(support::health(channel, "").await?, ServingStatus::Serving);
    // https:// without TLS options is a configuration error, not a hang
    assert!(dial(&https).await.is_err());
    shutdown.trigger();
    task.await??;

    // Mutual TLS: a client without a certificate is refused.
    let tls = ServerTls::from_files(&cert, &key)?.with_client_ca_file(&ca)?;
    let (endpoint, _, shutdown, task) =
        start(GrpcServer::new(identity()).tls(Some(tls)), "127.0.0.1:0").await?;
    let anonymous =
        DialOptions::with_tls(ClientTls::new().with_ca_pem(pki.ca_pem.clone().into_bytes())?);
    let refused = match dial_with(&endpoint, &anonymous).await {
        Err(_) => true,
        Ok(channel) => support::health(channel, "").await.is_err(),
    };
    ensure!(
        refused,
        "mutual TLS accepted a client without a certificate"
    );
    let with_cert = DialOptions::with_tls(
        ClientTls::new()
            .with_ca_pem(pki.ca_pem.clone().into_bytes())?
            .with_identity_pem(client_cert_pem.into_bytes(), client_key_pem.into_bytes())?,
    );
    let channel = dial_with(&endpoint, &with_cert).await?;
    assert_eq!(support::health(channel, "").await?, ServingStatus::Serving);
    shutdown.trigger();
    task.await??;
    Ok(())
}

/// Environment variable that turns [`signal_child`] into a server.
const CHILD_ENV: &str = "NEPHRITE_RUNTIME_CHILD_SOCKET";

/// Not a test on its own: when the parent test re-executes this binary with
/// [`CHILD_ENV`] set, it serves on that socket until SIGTERM and prints how
/// the drain went.
#[test]
fn signal_child() {
    let Ok(socket) = std::env::var(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let slow = SlowService::default();
        let started = std::sync::Arc::clone(&slow.started);
        tokio::spawn(async move {
            started.notified().await;
            println!("CHILD request started");
        });
        let report = GrpcServer::new(identity())
            .add_service(slow)
            .shutdown_grace(Duration::from_secs(5))
            .serve(&Endpoint::unix(socket))
            .await
            .expect("child server drained cleanly");
        println!("CHILD drained reason={}", report.reason);
    });
}

#[tokio::test]
async fn sigterm_drains_and_exits_zero() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("child.sock");
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--exact", "signal_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    // The child's stdout, line by line.
    let stdout = child.stdout.take().context("child stdout")?;
    let (line_tx, mut lines_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });

    let endpoint = Endpoint::unix(&socket);
    let deadline = Instant::now() + Duration::from_secs(20);
    let channel = loop {
        if let Ok(channel) = dial(&endpoint).await {
            break channel;
        }
        ensure!(Instant::now() < deadline, "child never started serving");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        support::health(channel.clone(), "").await?,
        ServingStatus::Serving
    );

    // SIGTERM arrives while this request is running in the child.
    let in_flight = tokio::spawn(support::sleep_call(channel.clone(), 700));
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains("CHILD request started"))
    {
        let line = tokio::time::timeout(Duration::from_secs(10), lines_rx.recv())
            .await
            .context("child never reported the request")?
            .with_context(|| format!("child output ended: {seen:?}"))?;
        seen.push(line);
    }

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    ensure!(status.success(), "kill -TERM failed");

    in_flight
        .await?
        .context("in-flight request during SIGTERM")?;
    let exit = tokio::task::spawn_blocking(move || child.wait());
    let exit = tokio::time::timeout(Duration::from_secs(10), exit).await???;
    while let Some(line) = lines_rx.recv().await {
        seen.push(line);
    }
    assert!(exit.success(), "child exit {exit:?}, output {seen:?}");
    assert!(
        seen.iter()
            .any(|l| l.contains("CHILD drained reason=received SIGTERM")),
        "{seen:?}"
    );
    assert!(!socket.exists());
    Ok(())
}
