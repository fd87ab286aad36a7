//! `bmm-provider serve`'s gRPC API with credentials on (issue 30), the binary as an operator
//! runs it against a Kubernetes API server. It serves the runtime's services only: health
//! (open to probes), reflection and `nephrite.daemon.v1.Daemon`, which every authenticated
//! caller may use whatever its roles (there is no role-gated method, so no caller gets
//! PERMISSION_DENIED). With `--auth-tokens`: no token or a wrong one is UNAUTHENTICATED on
//! every method, a known identity, even one the policy gives no role, gets through, and
//! `GetInfo` answers. With mutual TLS: a client certificate of the configured CA gets
//! through; without one, or with one of another CA, the transport refuses the client. A
//! non-loopback `--listen` without credentials refuses to start, naming `--insecure`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_proto::daemon_v1::GetInfoRequest;
use nephrite_proto::daemon_v1::daemon_client::DaemonClient;
use nephrite_runtime::auth::probe::{AccessReport, Expected};
use nephrite_runtime::{AuthChannel, ClientArgs, Endpoint};
use nephrite_test_apiserver::TestApiServer;
use support::capi::install_crds;

const BIN: &str = env!("CARGO_BIN_EXE_bmm-provider");

const METHODS: [&str; 3] = [
    "/nephrite.daemon.v1.Daemon/GetInfo",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// `bmm-provider serve` with `args`; killed on drop.
struct Serve {
    child: Child,
    log: PathBuf,
}

impl Serve {
    fn start(dir: &Path, name: &str, kubeconfig: &Path, args: &[&str]) -> Serve {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(BIN)
            .args(["serve", "--leader-elect=false", "--namespace", "default"])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("NEPHRITE_INSECURE")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("bmm-provider serve");
        Serve { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A channel with `credentials` once the server answers their health check (which is
    /// open, but not to credentials the server refuses).
    async fn channel(&mut self, endpoint: &Endpoint, credentials: &ClientArgs) -> AuthChannel {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let last = match credentials.dial(endpoint).await {
                Ok(channel) => {
                    let probe = nephrite_runtime::auth::probe::call_empty(
                        &channel,
                        "/grpc.health.v1.Health/Check",
                    );
                    match probe.await {
                        Ok(()) => return channel,
                        Err(status) => format!("{status:?}"),
                    }
                }
                Err(e) => e.to_string(),
            };
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("bmm-provider serve exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "bmm-provider serve never answered ({last}):\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn loopback() -> (String, Endpoint) {
    let port = nephrite_test_services::free_loopback_port().expect("port");
    let listen = format!("127.0.0.1:{port}");
    let endpoint = listen.parse().expect("endpoint");
    (listen, endpoint)
}

fn token(dir: &Path, name: &str, value: &str) -> ClientArgs {
    ClientArgs {
        token_file: Some(write(dir, name, &format!("{value}\n"))),
        ..ClientArgs::default()
    }
}

/// A CA, the server's certificate for `localhost` and client certificates with a subject CN.
struct Pki {
    ca_pem: String,
    server: (String, String),
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().expect("key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).expect("CA").pem();
        let issuer = Issuer::new(ca, ca_key);
        let server_key = KeyPair::generate().expect("key");
        let server = CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .signed_by(&server_key, &issuer)
            .expect("server certificate");
        Pki {
            ca_pem,
            server: (server.pem(), server_key.serialize_pem()),
            issuer,
        }
    }

    fn client(&self, cn: &str) -> (String, String) {
        use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec![cn.to_owned()]).expect("params");
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.issuer).expect("client");
        (cert.pem(), key.serialize_pem())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_api_needs_credentials() {
    let apiserver = TestApiServer::start().await.expect("apiserver");
    install_crds(&apiserver.client().expect("client")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let kubeconfig = write(d, "kubeconfig", &apiserver.kubeconfig());
    let methods: Vec<String> = METHODS.map(str::to_owned).to_vec();

    // A non-loopback address without credentials: refused at start.
    let open = Command::new(BIN)
        .args(["serve", "--leader-elect=false", "--listen", "0.0.0.0:0"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("NEPHRITE_INSECURE")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&open.stderr);
    assert!(!open.status.success(), "{stderr}");
    assert!(
        stderr.contains("without authentication") && stderr.contains("--insecure"),
        "{stderr}"
    );

    // Bearer tokens, with a policy that gives `idle` no role.
    let tokens = write(d, "tokens.csv", "ops-token,ops\nidle-token,idle\n");
    let policy = write(
        d,
        "policy.yaml",
        "identities:\n  ops: [admin]\n  idle: []\n",
    );
    let (listen, endpoint) = loopback();
    let mut serve = Serve::start(
        d,
        "tokens",
        &kubeconfig,
        &[
            "--listen",
            &listen,
            "--auth-tokens",
            &tokens.display().to_string(),
            "--auth-policy",
            &policy.display().to_string(),
        ],
    );
    let anonymous = serve.channel(&endpoint, &ClientArgs::default()).await;
    let ops = serve
        .channel(&endpoint, &token(d, "ops.token", "ops-token"))
        .await;
    let mut report = AccessReport::new();
    report
        .check("no credentials", &anonymous, &methods, |_| {
            Expected::Unauthenticated
        })
        .await;
    let wrong = token(d, "wrong.token", "guess")
        .dial(&endpoint)
        .await
        .expect("dial");
    report
        .check("a wrong token", &wrong, &methods, |_| {
            Expected::Unauthenticated
        })
        .await;
    report
        .check("ops", &ops, &methods, |_| Expected::Allowed)
        .await;
    let idle = serve
        .channel(&endpoint, &token(d, "idle.token", "idle-token"))
        .await;
    report
        .check("idle (no role)", &idle, &methods, |_| Expected::Allowed)
        .await;
    report.assert_as_expected();
    let info = DaemonClient::new(ops)
        .get_info(GetInfoRequest {})
        .await
        .expect("GetInfo with the ops token")
        .into_inner();
    assert_eq!(info.name, "bmm-provider");
    assert!(
        info.services.iter().any(|s| s == "grpc.health.v1.Health"),
        "{info:?}"
    );
    drop(serve);

    // Mutual TLS: the client certificate is the identity.
    let pki = Pki::new();
    let ca = write(d, "ca.pem", &pki.ca_pem);
    let server_cert = write(d, "server.pem", &pki.server.0);
    let server_key = write(d, "server.key", &pki.server.1);
    let (cert, key) = pki.client("ops");
    let client_cert = write(d, "ops.pem", &cert);
    let client_key = write(d, "ops.key", &key);
    let (listen, endpoint) = loopback();
    let mut serve = Serve::start(
        d,
        "mtls",
        &kubeconfig,
        &[
            "--listen",
            &listen,
            "--tls-cert",
            &server_cert.display().to_string(),
            "--tls-key",
            &server_key.display().to_string(),
            "--tls-client-ca",
            &ca.display().to_string(),
        ],
    );
    let with_certificate = ClientArgs {
        ca: Some(ca.clone()),
        cert: Some(client_cert),
        key: Some(client_key),
        tls_domain: Some("localhost".into()),
        ..ClientArgs::default()
    };
    let without_certificate = ClientArgs {
        ca: Some(ca.clone()),
        tls_domain: Some("localhost".into()),
        ..ClientArgs::default()
    };
    let mut report = AccessReport::new();
    let certified = serve.channel(&endpoint, &with_certificate).await;
    report
        .check("ops's certificate", &certified, &methods, |_| {
            Expected::Allowed
        })
        .await;
    report.assert_as_expected();
    // Without a certificate, or with one of another CA, the transport refuses: no call
    // reaches a method.
    let stranger = Pki::new();
    let (cert, key) = stranger.client("ops");
    let foreign = ClientArgs {
        cert: Some(write(d, "stranger.pem", &cert)),
        key: Some(write(d, "stranger.key", &key)),
        ..without_certificate.clone()
    };
    for (who, credentials) in [
        ("without a certificate", &without_certificate),
        ("with another CA's certificate", &foreign),
    ] {
        if let Ok(channel) = credentials.dial(&endpoint).await {
            let answer = nephrite_runtime::auth::probe::call_empty(&channel, METHODS[0]).await;
            let status = answer.expect_err(who);
            assert!(
                !matches!(
                    status.code(),
                    tonic::Code::Ok | tonic::Code::Unimplemented | tonic::Code::NotFound
                ),
                "{who}: {status:?}"
            );
        }
    }
    drop(serve);
}
