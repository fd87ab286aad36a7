//! `nimbess-cni`'s credentials (issue 30), the plugin executed as a runtime executes it against
//! an agent (sim driver) that requires tokens: an ADD whose network configuration names the
//! agent's token (`tokenFile`), or whose environment does (`NEPHRITE_TOKEN_FILE`), attaches
//! the container; without a token, with a wrong one, or with the token of an identity without
//! the `cni` role, it fails with a CNI error (code 7) saying what the agent refused and where
//! credentials go, and nothing is attached; a token file that cannot be read is code 7 naming
//! it. Over mutual TLS (a CA made with `openssl`): the configuration's (or the environment's)
//! `ca`, `cert` and `key` are presented; another identity's certificate is refused by its role
//! and an agent certificate the CA did not issue by the plugin, each code 7; without a
//! certificate the handshake fails and nothing is attached.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use support::{AgentProcess, run_plugin, write};

const CONFIG: &str = "driver: sim\nnetworks:\n  - name: blue\n    subnet: 10.61.0.0/24\n";

/// The plugin's configuration for the agent's `blue`, with `extra` keys.
fn netconf(agent: &AgentProcess, extra: Value) -> String {
    let mut conf = json!({
        "cniVersion": "1.1.0",
        "name": "blue",
        "type": "nimbess-cni",
        "agentSocket": agent.socket,
    });
    if let (Some(conf), Some(extra)) = (conf.as_object_mut(), extra.as_object()) {
        conf.extend(extra.clone());
    }
    conf.to_string()
}

/// Runs `command` for `container`, with `vars` added to the CNI environment.
fn cni(
    agent: &AgentProcess,
    command: &str,
    container: &str,
    conf: &str,
    vars: &[(&'static str, &Path)],
) -> (i32, Value) {
    let netns = write(&agent.dir, &format!("netns-{container}"), "");
    let mut env = BTreeMap::from([
        ("CNI_COMMAND", command.to_owned()),
        ("CNI_CONTAINERID", container.to_owned()),
        ("CNI_NETNS", netns.display().to_string()),
        ("CNI_IFNAME", "eth0".to_owned()),
    ]);
    for (var, value) in vars {
        env.insert(*var, value.display().to_string());
    }
    run_plugin(&env, conf)
}

/// The error document's code, message and details.
fn error(out: &Value) -> (u64, &str, &str) {
    (
        out["code"].as_u64().unwrap_or(0),
        out["msg"].as_str().unwrap_or(""),
        out["details"].as_str().unwrap_or(""),
    )
}

#[test]
fn add_with_the_agents_token_attaches_and_without_it_fails_clearly() {
    let secrets = tempfile::tempdir().expect("tempdir");
    let agent = AgentProcess::start_with_auth(
        CONFIG,
        secrets.path(),
        "cni-token,kubelet\nread-token,ops\n",
        "identities:\n  kubelet: [cni]\n  ops: [read]\n",
    );
    let token = |name: &str, value: &str| write(secrets.path(), name, &format!("{value}\n"));
    let right = token("cni.token", "cni-token");
    let wrong = token("wrong.token", "guess");
    let reader = token("read.token", "read-token");
    let missing = secrets.path().join("absent.token");
    let with_token = |path: &Path| netconf(&agent, json!({"tokenFile": path}));

    // Refused: the agent's reason, and where the credentials go.
    let refusals = [
        (netconf(&agent, json!({})), "credentials are required"),
        (with_token(&wrong), "the bearer token is not valid"),
        (
            with_token(&reader),
            "ops (roles: read) may not call /nimbess.cni.v1.Cni/Add",
        ),
    ];
    for (conf, reason) in &refusals {
        let (code, out) = cni(&agent, "ADD", "c1", conf, &[]);
        assert_eq!(code, 1, "{out}");
        let (number, msg, details) = error(&out);
        assert_eq!(number, 7, "{out}");
        assert!(msg.contains("refused ADD") && msg.contains(reason), "{out}");
        assert!(details.contains("\"tokenFile\""), "{out}");
    }
    // A token file that cannot be read: named, before the agent is asked.
    let (code, out) = cni(&agent, "ADD", "c1", &with_token(&missing), &[]);
    assert_eq!((code, error(&out).0), (1, 7), "{out}");
    assert!(
        error(&out).2.contains(&missing.display().to_string()),
        "{out}"
    );
    // A certificate without its key is a configuration error.
    let half = netconf(&agent, json!({"ca": right, "cert": right}));
    let (_, out) = cni(&agent, "ADD", "c1", &half, &[]);
    assert_eq!(error(&out).0, 7, "{out}");

    // With the agent's token: attached, and the first address (nothing was attached before).
    let (code, added) = cni(&agent, "ADD", "c1", &with_token(&right), &[]);
    assert_eq!(code, 0, "{added}");
    assert_eq!(added["ips"][0]["address"], "10.61.0.2/24");
    // The token from the runtime's environment.
    let plain = netconf(&agent, json!({}));
    let (code, second) = cni(
        &agent,
        "ADD",
        "c2",
        &plain,
        &[("NEPHRITE_TOKEN_FILE", right.as_path())],
    );
    assert_eq!(code, 0, "{second}");
    assert_eq!(second["ips"][0]["address"], "10.61.0.3/24");

    // DEL needs the token too.
    let (code, out) = cni(&agent, "DEL", "c1", &plain, &[]);
    assert_eq!((code, error(&out).0), (1, 7), "{out}");
    assert_eq!(cni(&agent, "DEL", "c1", &with_token(&right), &[]).0, 0);
    let (code, out) = cni(&agent, "CHECK", "c2", &with_token(&right), &[]);
    assert_eq!(code, 0, "{out}");
}

/// A test CA made with `openssl` in `dir`: `ca.pem`, and per name `NAME.pem`/`NAME.key`, a
/// certificate for the DNS name (and subject CN) `NAME` with the extended key usage `usage`.
fn openssl_pki(
    dir: &Path,
    leaves: &[(&str, &str)],
) -> Result<(), nephrite_test_services::Unavailable> {
    let openssl = nephrite_test_services::program("openssl", "openssl")?;
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&openssl)
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=nimbess-test-ca"];
    ca.extend(ec);
    ca.extend([
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&ca);
    for (name, usage) in leaves {
        write(
            dir,
            &format!("{name}.ext"),
            &format!("subjectAltName=DNS:{name}\nextendedKeyUsage={usage}\n"),
        );
        let (subject, key, csr, pem, ext) = (
            format!("/CN={name}"),
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        let mut request = vec![
            "req", "-new", "-subj", &subject, "-keyout", &key, "-out", &csr,
        ];
        request.extend(ec);
        run(&request);
        run(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            &ext,
        ]);
    }
    Ok(())
}

#[test]
fn add_over_mutual_tls_presents_the_configured_certificate() {
    let pki = tempfile::tempdir().expect("tempdir");
    let d = pki.path();
    if let Err(unavailable) = openssl_pki(
        d,
        &[
            ("localhost", "serverAuth"),
            ("kubelet", "clientAuth"),
            ("ops", "clientAuth"),
        ],
    ) {
        unavailable.skip("add_over_mutual_tls_presents_the_configured_certificate");
        return;
    }
    write(
        d,
        "policy.yaml",
        "identities:\n  kubelet: [cni]\n  ops: [read]\n",
    );
    let path = |name: &str| d.join(name).display().to_string();
    let agent = AgentProcess::start_with(
        CONFIG,
        "sim",
        &[],
        &[],
        &[
            "--tls-cert",
            &path("localhost.pem"),
            "--tls-key",
            &path("localhost.key"),
            "--tls-client-ca",
            &path("ca.pem"),
            "--auth-policy",
            &path("policy.yaml"),
        ],
    );
    let with_certificate = |name: &str| json!({"ca": path("ca.pem"), "cert": path(&format!("{name}.pem")), "key": path(&format!("{name}.key"))});

    // The cni role's certificate: attached.
    let (code, added) = cni(
        &agent,
        "ADD",
        "m1",
        &netconf(&agent, with_certificate("kubelet")),
        &[],
    );
    assert_eq!(code, 0, "{added}");
    assert_eq!(added["ips"][0]["address"], "10.61.0.2/24");
    // Another identity's certificate: refused by its role, code 7 naming it.
    let (code, out) = cni(
        &agent,
        "ADD",
        "m2",
        &netconf(&agent, with_certificate("ops")),
        &[],
    );
    assert_eq!((code, error(&out).0), (1, 7), "{out}");
    assert!(
        error(&out)
            .1
            .contains("ops (roles: read) may not call /nimbess.cni.v1.Cni/Add"),
        "{out}"
    );
    // No certificate (only the CA to trust the agent's): the handshake is refused. Whether the
    // plugin reads the agent's alert (code 7 naming it) or finds the connection closed on its
    // first write (code 11, the broken pipe in the details) is a race; either way nothing is
    // attached (the next ADD below gets the next address).
    let (code, out) = cni(
        &agent,
        "ADD",
        "m3",
        &netconf(&agent, json!({"ca": path("ca.pem")})),
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(matches!(error(&out).0, 7 | 11), "{out}");
    // An agent certificate the configured CA did not issue: refused by the plugin, code 7.
    let (code, out) = cni(
        &agent,
        "ADD",
        "m3",
        &netconf(
            &agent,
            json!({"ca": path("kubelet.pem"), "cert": path("kubelet.pem"), "key": path("kubelet.key")}),
        ),
        &[],
    );
    assert_eq!((code, error(&out).0), (1, 7), "{out}");
    assert!(error(&out).1.contains("TLS handshake"), "{out}");
    let (code, added) = cni(
        &agent,
        "ADD",
        "m4",
        &netconf(&agent, with_certificate("kubelet")),
        &[],
    );
    assert_eq!(code, 0, "{added}");
    assert_eq!(added["ips"][0]["address"], "10.61.0.3/24");
    // The same from the runtime's environment.
    let (code, out) = cni(
        &agent,
        "DEL",
        "m1",
        &netconf(&agent, json!({})),
        &[
            ("NEPHRITE_CA", d.join("ca.pem").as_path()),
            ("NEPHRITE_CERT", d.join("kubelet.pem").as_path()),
            ("NEPHRITE_KEY", d.join("kubelet.key").as_path()),
        ],
    );
    assert_eq!(code, 0, "{out}");
}
