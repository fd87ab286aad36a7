//! No secret in any log line (issue 30): the real `preparer` binary and a real plugin process
//! (the `annotate_plugin` example), both at `RUST_LOG=debug`: the preparer serves TLS and
//! takes bearer tokens, the plugin requires a client certificate and a token (the preparer
//! presents both, `--plugin-*`), and the package the plugin is sent holds an operator's Secret. A wrong token is tried too.
//! Every line either process wrote is searched for each token, the Secret's value (plain and
//! base64) and every line of each private key's PEM body: none may appear.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nephrite_proto::nephrite::krm::v1::GroupVersionKind;
use nephrite_proto::nephrite::preparer::data::v1 as pb;
use nephrite_proto::nephrite::preparer::data::v1::data_client::DataClient;
use nephrite_runtime::{AuthChannel, ClientArgs, Endpoint};
use support::wait_for;

const OPS_TOKEN: &str = "ops-7f3c9a1e5b2d4c8f";
const PLUGIN_TOKEN: &str = "plugin-2b8e6d4f0a9c1e3b";
const WRONG_TOKEN: &str = "guess-5d1f9b3a7c2e8d6f";
const SECRET_VALUE: &str = "s3cr3t-database-password-4a9e";

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// A CA, a server certificate for 127.0.0.1 (both processes serve with it) and the
/// preparer's client certificate for plugins; the private keys' PEM texts.
fn pki(dir: &Path) -> Vec<String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    write(dir, "ca.pem", &ca.self_signed(&ca_key).unwrap().pem());
    let issuer = Issuer::new(ca, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    write(dir, "server.pem", &server.pem());
    write(dir, "server.key", &server_key.serialize_pem());
    let client_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["preparer.test".to_owned()]).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "preparer");
    write(
        dir,
        "preparer.pem",
        &params.signed_by(&client_key, &issuer).unwrap().pem(),
    );
    write(dir, "preparer.key", &client_key.serialize_pem());
    vec![server_key.serialize_pem(), client_key.serialize_pem()]
}

fn plugin_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir")
        .join("examples")
        .join("annotate_plugin");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p nephrite-preparer` (it builds the examples)",
        path.display()
    );
    path
}

fn spawn(program: &Path, args: &[String], log: &Path) -> Process {
    let log = std::fs::File::create(log).expect("log file");
    let child = Command::new(program)
        .args(args)
        .env("RUST_LOG", "debug")
        .env_remove("PREPARER_SERVER")
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("starts");
    Process(child)
}

async fn listening(port: u16) {
    wait_for(&format!("port {port}"), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
}

fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_key_or_secret_appears_in_any_log_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let keys = pki(d);
    let path = |name: &str| d.join(name).display().to_string();
    write(
        d,
        "preparer-tokens",
        &format!("{OPS_TOKEN},ops\n{PLUGIN_TOKEN},annotator\n"),
    );
    write(d, "preparer-policy.yaml", "identities:\n  ops: [admin]\n");
    write(d, "plugin-tokens", &format!("{PLUGIN_TOKEN},preparer\n"));
    write(d, "plugin-token", &format!("{PLUGIN_TOKEN}\n"));
    write(d, "ops-token", &format!("{OPS_TOKEN}\n"));
    write(d, "wrong-token", &format!("{WRONG_TOKEN}\n"));

    let plugin_port = nephrite_test_services::free_loopback_port().expect("port");
    let plugin_log = d.join("plugin.log");
    let plugin_args: Vec<String> = [
        "--listen",
        &format!("127.0.0.1:{plugin_port}"),
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--tls-client-ca",
        &path("ca.pem"),
        "--auth-tokens",
        &path("plugin-tokens"),
    ]
    .map(str::to_owned)
    .to_vec();
    let _plugin = spawn(&plugin_binary(), &plugin_args, &plugin_log);

    let port = nephrite_test_services::free_loopback_port().expect("port");
    let preparer_log = d.join("preparer.log");
    let preparer_args: Vec<String> = [
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--store",
        &format!("sqlite:{}", path("p.db")),
        "--interval",
        "200ms",
        "--retry-backoff",
        "100ms",
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--auth-tokens",
        &path("preparer-tokens"),
        "--auth-policy",
        &path("preparer-policy.yaml"),
        "--plugin-ca",
        &path("ca.pem"),
        "--plugin-cert",
        &path("preparer.pem"),
        "--plugin-key",
        &path("preparer.key"),
        "--plugin-token-file",
        &path("plugin-token"),
    ]
    .map(str::to_owned)
    .to_vec();
    let preparer = spawn(
        Path::new(support::binary::BINARY),
        &preparer_args,
        &preparer_log,
    );
    listening(plugin_port).await;
    listening(port).await;

    let endpoint: Endpoint = format!("127.0.0.1:{port}").parse().expect("endpoint");
    let credentials = |token: &str| ClientArgs {
        ca: Some(d.join("ca.pem")),
        token_file: Some(d.join(token)),
        ..ClientArgs::default()
    };
    let mut wrong: DataClient<AuthChannel> = DataClient::new(
        credentials("wrong-token")
            .dial(&endpoint)
            .await
            .expect("dial"),
    );
    let err = wrong
        .list_plugins(pb::ListPluginsRequest::default())
        .await
        .expect_err("a wrong token");
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");

    let mut ops = DataClient::new(
        credentials("ops-token")
            .dial(&endpoint)
            .await
            .expect("dial"),
    );
    ops.register_plugin(pb::RegisterPluginRequest {
        plugin: Some(pb::Plugin {
            r#type: pb::PluginType::Prepare as i32,
            name: "annotate".into(),
            endpoint: format!("https://127.0.0.1:{plugin_port}"),
            triggers: vec![GroupVersionKind {
                group: "example.org".into(),
                version: "v1".into(),
                kind: "Tuning".into(),
            }],
            ..Default::default()
        }),
    })
    .await
    .expect("register the plugin");
    let package = format!(
        "apiVersion: example.org/v1\nkind: Tuning\nmetadata: {{name: x}}\nspec: {{a: 1}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: db}}\ntype: Opaque\n\
         data: {{password: {}}}\nstringData: {{plain: {SECRET_VALUE}}}\n",
        base64(SECRET_VALUE)
    );
    ops.register_template(pb::RegisterTemplateRequest {
        id: "tuned".into(),
        metadata: Default::default(),
        package_yaml: package,
    })
    .await
    .expect("template");
    let id = ops
        .create_deployment(pb::CreateDeploymentRequest {
            template_id: "tuned".into(),
            ..Default::default()
        })
        .await
        .expect("create")
        .into_inner()
        .deployment_id;
    let prepared = wait_for("the plugin's preparation", || {
        let mut ops = ops.clone();
        let id = id.clone();
        async move {
            let deployment = ops
                .get_deployment(pb::GetRequest { id })
                .await
                .ok()?
                .into_inner();
            deployment
                .info
                .as_ref()
                .is_some_and(|i| i.prepared)
                .then_some(deployment)
        }
    })
    .await;
    assert!(
        prepared
            .package_yaml
            .contains("preparedBy: annotate-plugin"),
        "{}",
        prepared.package_yaml
    );
    drop(preparer);

    let mut needles: Vec<(String, String)> = vec![
        ("the ops token".into(), OPS_TOKEN.into()),
        ("the plugin token".into(), PLUGIN_TOKEN.into()),
        ("the wrong token".into(), WRONG_TOKEN.into()),
        ("the Secret's value".into(), SECRET_VALUE.into()),
        ("the Secret's base64 value".into(), base64(SECRET_VALUE)),
    ];
    for (n, key) in keys.iter().enumerate() {
        for line in key.lines().filter(|l| !l.starts_with("-----")) {
            needles.push((format!("a line of private key {n}"), line.to_owned()));
        }
    }
    let mut lines = 0;
    for log in [&preparer_log, &plugin_log] {
        let text = std::fs::read_to_string(log).expect("log");
        assert!(
            text.contains("DEBUG"),
            "{} has no debug lines:\n{text}",
            log.display()
        );
        for line in text.lines() {
            lines += 1;
            for (what, needle) in &needles {
                assert!(
                    !line.contains(needle.as_str()),
                    "{what} in {}: {line}",
                    log.display()
                );
            }
        }
    }
    assert!(lines > 10, "only {lines} log lines");
}
