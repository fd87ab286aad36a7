//! The agent's socket with credentials required (issue 30): `nimbess-agent serve
//! --auth-tokens F --auth-policy P` on the sim driver. Every method of its three services, and
//! the runtime's `GetInfo` and reflection, called with no credentials and with a wrong token
//! answers UNAUTHENTICATED; an identity without roles gets PERMISSION_DENIED from every agent
//! method; each role (`cni`, `read`, `vif`, `admin`) gets through exactly the methods the
//! README's table gives it and is refused the others; health stays open for probes. The
//! inspection subcommands present `--token-file` (or `NEPHRITE_TOKEN_FILE`) and say what to do
//! when refused.

mod support;

use std::path::Path;
use std::process::Command;

use nephrite_runtime::auth::probe::{AccessReport, Expected, proto_methods};
use nephrite_runtime::{AuthChannel, ClientArgs, Endpoint};
use support::{AGENT, AgentProcess, write};

const CONFIG: &str = "driver: sim\nnetworks:\n  - name: blue\n    subnet: 10.60.0.0/24\n";

const TOKENS: &str = "\
cni-token,kubelet
read-token,ops
vif-token,kuryr
admin-token,root
idle-token,idle
";

const POLICY: &str = "\
identities:
  kubelet: [cni]
  ops: [read]
  kuryr: [vif]
  root: [admin]
  idle: []
";

/// The identities of the policy and the role each has (`""`: none).
const IDENTITIES: [(&str, &str, &str); 5] = [
    ("idle", "idle-token", ""),
    ("kubelet", "cni-token", "cni"),
    ("ops", "read-token", "read"),
    ("kuryr", "vif-token", "vif"),
    ("root", "admin-token", "admin"),
];

/// Every method the agent serves that needs credentials: its own (from the proto file, so a
/// method added later is checked too) and the runtime's.
fn methods() -> Vec<String> {
    let mut methods = proto_methods(include_str!("../../proto/proto/nimbess/cni/v1/cni.proto"));
    assert_eq!(methods.len(), 15, "{methods:?}");
    methods.extend(
        [
            "/nephrite.daemon.v1.Daemon/GetInfo",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ]
        .map(str::to_owned),
    );
    methods
}

/// Whether `role` may call `method` (what the README's table promises).
fn allowed(role: &str, method: &str) -> bool {
    let (service, name) = method
        .trim_start_matches('/')
        .split_once('/')
        .expect("a method path");
    let reads = name.starts_with("List") || name.starts_with("Get");
    match service {
        // Every authenticated caller, whatever its roles.
        "nephrite.daemon.v1.Daemon"
        | "grpc.reflection.v1.ServerReflection"
        | "grpc.reflection.v1alpha.ServerReflection" => true,
        "nimbess.cni.v1.Cni" => matches!(role, "cni" | "admin"),
        "nimbess.cni.v1.Agent" => matches!(role, "read" | "admin"),
        "nimbess.cni.v1.Vifs" => matches!(role, "vif" | "admin") || (role == "read" && reads),
        other => panic!("a service the test does not know: {other}"),
    }
}

fn start(secrets: &Path) -> AgentProcess {
    AgentProcess::start_with_auth(CONFIG, secrets, TOKENS, POLICY)
}

/// `nimbess-agent ports -o json` with `args` and `env`: (exit code, stdout, stderr).
fn ports(agent: &AgentProcess, args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let out = Command::new(AGENT)
        .args(["ports", "-o", "json", "--socket"])
        .arg(&agent.socket)
        .args(args)
        .env_remove("NEPHRITE_TOKEN_FILE")
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .expect("nimbess-agent ports");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_method_needs_the_right_credentials_and_roles() {
    let secrets = tempfile::tempdir().expect("tempdir");
    let agent = start(secrets.path());
    let token_file = |token: &str| write(secrets.path(), &format!("{token}.txt"), token);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let methods = methods();
    runtime.block_on(async {
        let endpoint = Endpoint::unix(&agent.socket);
        let channel = |token: Option<&str>| {
            let args = ClientArgs {
                token_file: token.map(token_file),
                ..ClientArgs::default()
            };
            let endpoint = endpoint.clone();
            async move {
                args.dial(&endpoint)
                    .await
                    .unwrap_or_else(|e| panic!("dial: {e}"))
            }
        };
        let anonymous: AuthChannel = channel(None).await;
        let mut report = AccessReport::new();
        report
            .check("no credentials", &anonymous, &methods, |_| {
                Expected::Unauthenticated
            })
            .await;
        report
            .check(
                "a wrong token",
                &channel(Some("guess")).await,
                &methods,
                |_| Expected::Unauthenticated,
            )
            .await;
        for (identity, token, role) in IDENTITIES {
            report
                .check(identity, &channel(Some(token)).await, &methods, |method| {
                    if allowed(role, method) {
                        Expected::Allowed
                    } else {
                        Expected::PermissionDenied
                    }
                })
                .await;
        }
        // Probes carry no credentials: health answers anyone.
        report
            .check(
                "a health probe",
                &anonymous,
                &["/grpc.health.v1.Health/Check".to_owned()],
                |_| Expected::Allowed,
            )
            .await;
        assert_eq!(report.checked(), methods.len() * 7 + 1);
        report.assert_as_expected();
    });

    // The inspection subcommands: refused without a token, saying what to give.
    let (code, _, stderr) = ports(&agent, &[], &[]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("credentials are required") && stderr.contains("--token-file"),
        "{stderr}"
    );
    // An identity without the read role: refused, named.
    let cni = token_file("cni-token");
    let (code, _, stderr) = ports(&agent, &["--token-file", &cni.display().to_string()], &[]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("kubelet (roles: cni) may not call /nimbess.cni.v1.Agent/ListPorts"),
        "{stderr}"
    );
    // The read role, by flag and by environment.
    let read = token_file("read-token");
    let (code, stdout, stderr) = ports(&agent, &["--token-file", &read.display().to_string()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "[]");
    let (code, stdout, stderr) = ports(&agent, &[], &[("NEPHRITE_TOKEN_FILE", read.as_path())]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), "[]");
    // A token file that cannot be read is named.
    let missing = secrets.path().join("absent.txt");
    let (code, _, stderr) = ports(
        &agent,
        &["--token-file", &missing.display().to_string()],
        &[],
    );
    assert_ne!(code, 0);
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}
