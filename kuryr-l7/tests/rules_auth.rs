//! The controller's rules service with authentication on (`--auth-tokens`, `--auth-policy`),
//! the built binary as an operator runs it: without credentials or with a wrong token every
//! method answers UNAUTHENTICATED; an identity without a role, or with another role's, gets
//! PERMISSION_DENIED; a reader gets snapshots without private keys; a router watches and
//! acknowledges only as itself and gets the keys; an admin does everything; and a `kuryr-l7
//! router` given its token file (`--token-file`) follows the controller and acknowledges.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nephrite_proto::kuryr::l7::v1 as pb;
use support::daemon::Daemon;
use support::*;
use tonic::Code;
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_kuryr-l7");

/// The calls of the rules service.
#[derive(Debug, Clone, Copy)]
enum Method {
    Get,
    ListRouters,
    /// Watch as the router named.
    Watch(&'static str),
    /// Acknowledge as the router named.
    Acknowledge(&'static str),
}

const EVERY: [Method; 4] = [
    Method::Get,
    Method::ListRouters,
    Method::Watch("r1"),
    Method::Acknowledge("r1"),
];

fn with_token<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

/// Calls `method` with `token`: the snapshot it gave (Get, Watch's first), or the status code.
async fn call(
    channel: &Channel,
    token: Option<&str>,
    method: Method,
) -> Result<Option<pb::Snapshot>, Code> {
    let mut client = pb::rules_client::RulesClient::new(channel.clone());
    match method {
        Method::Get => client
            .get(with_token(pb::GetRequest {}, token))
            .await
            .map(|r| Some(r.into_inner()))
            .map_err(|s| s.code()),
        Method::ListRouters => client
            .list_routers(with_token(pb::ListRoutersRequest {}, token))
            .await
            .map(|_| None)
            .map_err(|s| s.code()),
        Method::Watch(router) => {
            let request = pb::WatchRequest {
                router: router.to_owned(),
                ..pb::WatchRequest::default()
            };
            let mut stream = client
                .watch(with_token(request, token))
                .await
                .map_err(|s| s.code())?
                .into_inner();
            match stream.message().await.map_err(|s| s.code())? {
                Some(pb::WatchEvent {
                    event: Some(pb::watch_event::Event::Snapshot(snapshot)),
                }) => Ok(Some(snapshot)),
                other => panic!("the first event of a Watch is a snapshot: {other:?}"),
            }
        }
        Method::Acknowledge(router) => {
            let request = pb::AcknowledgeRequest {
                router: router.to_owned(),
                version: "v".to_owned(),
                address: "127.0.0.1:1".to_owned(),
            };
            client
                .acknowledge(with_token(request, token))
                .await
                .map(|_| None)
                .map_err(|s| s.code())
        }
    }
}

fn indent(text: &str, by: usize) -> String {
    text.lines()
        .map(|line| format!("{}{line}\n", " ".repeat(by)))
        .collect()
}

/// The key of the (one) certificate in `snapshot`.
fn key_of(snapshot: &pb::Snapshot) -> &str {
    assert_eq!(snapshot.certificates.len(), 1, "{snapshot:?}");
    assert!(snapshot.certificates[0].cert_pem.contains("CERTIFICATE"));
    &snapshot.certificates[0].key_pem
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

async fn connect(listen: SocketAddr) -> Channel {
    let start = Instant::now();
    loop {
        if let Ok(channel) = Channel::from_shared(format!("http://{listen}"))
            .unwrap()
            .connect()
            .await
        {
            return channel;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the controller never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn every_method_needs_the_right_credentials() {
    let web = echo("web").await;
    let objects = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(&["edge.example.com"]);
    write(
        objects.path(),
        "objects.yaml",
        &format!(
            "{}apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: edge, namespace: shop}}\nspec:\n  host: edge.example.com\n  to: {{kind: Service, name: web}}\n  tls:\n    termination: edge\n    certificate: |\n{}    key: |\n{}",
            service_yaml("shop", "web", &[web]),
            indent(&cert, 6),
            indent(&key, 6),
        ),
    );
    let secrets = tempfile::tempdir().unwrap();
    let tokens = write(
        secrets.path(),
        "tokens",
        "tok-r1,r1\ntok-r2,r2\ntok-dash,dash\ntok-ops,ops\ntok-nobody,nobody\n",
    );
    let policy = write(
        secrets.path(),
        "policy.yaml",
        "identities:\n  r1: [router]\n  r2: [router]\n  dash: [read]\n  ops: [admin]\n",
    );
    let listen = dead_address();
    let _controller = Daemon(
        Command::new(BIN)
            .args(["controller", "--driver", "embedded", "--listen"])
            .arg(listen.to_string())
            .arg("--source")
            .arg(format!("dir:{}", objects.path().display()))
            .arg("--auth-tokens")
            .arg(&tokens)
            .arg("--auth-policy")
            .arg(&policy)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let channel = connect(listen).await;

    // Nobody known: UNAUTHENTICATED; known without the role: PERMISSION_DENIED.
    for method in EVERY {
        for token in [None, Some("wrong")] {
            assert_eq!(
                call(&channel, token, method).await.unwrap_err(),
                Code::Unauthenticated,
                "{method:?} with {token:?}"
            );
        }
        assert_eq!(
            call(&channel, Some("tok-nobody"), method)
                .await
                .unwrap_err(),
            Code::PermissionDenied,
            "{method:?} without a role"
        );
    }

    // An admin: everything, keys included, acknowledging for any router.
    for method in [
        Method::Get,
        Method::ListRouters,
        Method::Watch("r1"),
        Method::Acknowledge("anyone"),
    ] {
        let answer = call(&channel, Some("tok-ops"), method).await;
        let snapshot = answer.unwrap_or_else(|code| panic!("admin {method:?}: {code:?}"));
        if let Some(snapshot) = snapshot {
            assert!(key_of(&snapshot).contains("PRIVATE KEY"), "{method:?}");
        }
    }

    // A reader: snapshots without the private key, no acknowledging.
    for method in [Method::Get, Method::Watch("dash")] {
        let snapshot = call(&channel, Some("tok-dash"), method)
            .await
            .unwrap()
            .unwrap();
        let key = key_of(&snapshot);
        assert!(
            key.starts_with("sha256:") && !key.contains("PRIVATE KEY"),
            "{method:?} gives the key's fingerprint only: {key}"
        );
        assert_eq!(
            kuryr_l7_client::wire::version_of(&snapshot),
            snapshot.version,
            "the snapshot without keys still checks against its version"
        );
    }
    call(&channel, Some("tok-dash"), Method::ListRouters)
        .await
        .unwrap();
    assert_eq!(
        call(&channel, Some("tok-dash"), Method::Acknowledge("r1"))
            .await
            .unwrap_err(),
        Code::PermissionDenied
    );

    // `kuryr-l7 rules` as the reader: the certificate by its fingerprint, no key; without
    // credentials it is refused.
    let dash_token = write(secrets.path(), "dash.token", "tok-dash\n");
    let rules = |token: Option<&Path>| {
        let mut command = Command::new(BIN);
        command.args(["rules", "--rules"]).arg(listen.to_string());
        if let Some(token) = token {
            command.arg("--token-file").arg(token);
        }
        command.output().unwrap()
    };
    let shown = rules(Some(&dash_token));
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.status.success(), "{shown:?}");
    assert!(
        text.contains("CERTIFICATE") && text.contains("sha256:"),
        "{text}"
    );
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    let refused = rules(None);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("credentials"),
        "{refused:?}"
    );

    // A router: Watch (with keys) and Acknowledge as itself only.
    let snapshot = call(&channel, Some("tok-r1"), Method::Watch("r1"))
        .await
        .unwrap()
        .unwrap();
    assert!(key_of(&snapshot).contains("PRIVATE KEY"));
    call(&channel, Some("tok-r1"), Method::Acknowledge("r1"))
        .await
        .unwrap();
    for method in [
        Method::Get,
        Method::ListRouters,
        Method::Watch("r2"),
        Method::Acknowledge("r2"),
    ] {
        assert_eq!(
            call(&channel, Some("tok-r1"), method).await.unwrap_err(),
            Code::PermissionDenied,
            "r1: {method:?}"
        );
    }

    // The router binary with its token file follows and acknowledges the current version.
    let token_file = write(secrets.path(), "r2.token", "tok-r2\n");
    let router_listen = dead_address();
    let _router = Daemon(
        Command::new(BIN)
            .args(["router", "--threads", "1", "--name", "r2", "--listen"])
            .arg(router_listen.to_string())
            .arg("--rules")
            .arg(listen.to_string())
            .arg("--token-file")
            .arg(&token_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let version = snapshot.version.clone();
    let start = Instant::now();
    loop {
        let mut client = pb::rules_client::RulesClient::new(channel.clone());
        let routers = client
            .list_routers(with_token(pb::ListRoutersRequest {}, Some("tok-ops")))
            .await
            .unwrap()
            .into_inner()
            .routers;
        if routers
            .iter()
            .any(|r| r.router == "r2" && r.version == version)
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "r2 never acknowledged {version}: {routers:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issues a (certificate, key) for a CN with subject alternative names.
type Issue = Box<dyn Fn(&str, &[&str]) -> (String, String)>;

/// A CA, and certificates it signs.
struct Ca {
    pem: String,
    issue: Issue,
}

fn ca() -> Ca {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kuryr-l7 test CA");
    let issuer =
        rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap();
    Ca {
        pem: issuer.pem(),
        issue: Box::new(move |cn: &str, sans: &[&str]| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(
                sans.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
            .unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            let cert = params.signed_by(&key, &issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        }),
    }
}

/// With mutual TLS on (`--tls-client-ca`), the identity is the client certificate's CN: a
/// router presenting `--ca`/`--cert`/`--key` follows the controller over https:// and
/// acknowledges as itself; the rules CLI with an admin certificate sees it; with another
/// router's certificate the router is refused.
#[tokio::test]
async fn routers_follow_with_client_certificates() {
    let web = echo("web").await;
    let objects = tempfile::tempdir().unwrap();
    write(
        objects.path(),
        "objects.yaml",
        &service_yaml("shop", "web", &[web]),
    );
    let pki = tempfile::tempdir().unwrap();
    let ca = ca();
    let ca_file = write(pki.path(), "ca.pem", &ca.pem);
    let pair = |name: &str, cn: &str, sans: &[&str]| {
        let (cert, key) = (ca.issue)(cn, sans);
        (
            write(pki.path(), &format!("{name}.pem"), &cert),
            write(pki.path(), &format!("{name}.key"), &key),
        )
    };
    let (server_cert, server_key) = pair("server", "controller", &["127.0.0.1", "localhost"]);
    let (r3_cert, r3_key) = pair("r3", "r3", &[]);
    let (ops_cert, ops_key) = pair("ops", "ops", &[]);
    let policy = write(
        pki.path(),
        "policy.yaml",
        "identities:\n  r3: [router]\n  r4: [router]\n  ops: [admin]\n",
    );
    let listen = dead_address();
    let _controller = Daemon(
        Command::new(BIN)
            .args(["controller", "--driver", "embedded", "--listen"])
            .arg(format!("tcp://{listen}"))
            .arg("--source")
            .arg(format!("dir:{}", objects.path().display()))
            .arg("--tls-cert")
            .arg(&server_cert)
            .arg("--tls-key")
            .arg(&server_key)
            .arg("--tls-client-ca")
            .arg(&ca_file)
            .arg("--auth-policy")
            .arg(&policy)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("https://{listen}");
    let router = |name: &str, cert: &Path, key: &Path| {
        let log = pki.path().join(format!("{name}.log"));
        let daemon = Daemon(
            Command::new(BIN)
                .args(["router", "--threads", "1", "--name", name, "--listen"])
                .arg(dead_address().to_string())
                .arg("--rules")
                .arg(&url)
                .arg("--ca")
                .arg(&ca_file)
                .arg("--cert")
                .arg(cert)
                .arg("--key")
                .arg(key)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        (daemon, log)
    };
    // r4 presents r3's certificate: refused (it says so), never listed.
    let (_impostor, impostor_log) = router("r4", &r3_cert, &r3_key);
    let (_router, _) = router("r3", &r3_cert, &r3_key);
    let start = Instant::now();
    while !std::fs::read_to_string(&impostor_log)
        .unwrap_or_default()
        .contains("refuses us")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "r4 never said it was refused: {}",
            std::fs::read_to_string(&impostor_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        let out = Command::new(BIN)
            .args(["rules", "-o", "json", "--rules"])
            .arg(&url)
            .arg("--ca")
            .arg(&ca_file)
            .arg("--cert")
            .arg(&ops_cert)
            .arg("--key")
            .arg(&ops_key)
            .output()
            .unwrap();
        if out.status.success() {
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let routers = json["routers"].as_array().cloned().unwrap_or_default();
            if routers
                .iter()
                .any(|r| r["router"] == "r3" && r["current"] == true)
            {
                assert!(
                    !routers.iter().any(|r| r["router"] == "r4"),
                    "r4 acknowledged with r3's certificate: {routers:?}"
                );
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "r3 never acknowledged: {out:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
