//! The `bmm-sim` binary: `bmm-sim token` prints a token and nothing else, `--version` names the
//! binary and its version, every flag has its variable, and TLS files it cannot use are named
//! in the error.

use std::process::Command;

#[test]
fn bmm_sim_token_prints_only_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_bmm-sim"))
        .args(["token", "--secret", "s", "--org", "acme", "--ttl", "1h"])
        .output()
        .expect("run");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf8");
    let token = text.trim_end();
    assert_eq!(token.matches('.').count(), 2, "{token}");
    assert!(!token.contains(char::is_whitespace));
    let now = jiff::Timestamp::now().as_second() as u64;
    let claims = nephrite_bmm_sim::auth::check("s", Some(&format!("Bearer {token}")), "acme")
        .expect("valid");
    assert!(claims.exp > now + 3000 && claims.exp <= now + 3600);
}

#[test]
fn bmm_sim_answers_version_and_its_help_names_every_variable() {
    let run = |arg: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_bmm-sim"))
            .arg(arg)
            .output()
            .expect("run");
        assert!(out.status.success(), "bmm-sim {arg}");
        String::from_utf8(out.stdout).expect("utf8")
    };
    assert_eq!(
        run("--version"),
        format!("bmm-sim {}\n", env!("CARGO_PKG_VERSION"))
    );
    let help = run("--help");
    for variable in [
        "LISTEN",
        "JWT_SECRET",
        "PROVISION_DELAY",
        "NETWORK_DELAY",
        "REBOOT_DELAY",
        "FAULT_RATE",
        "LOST_RESPONSE_RATE",
        "LATENCY",
        "MACHINES",
        "RETRY_AFTER",
        "TLS_CERT",
        "TLS_KEY",
    ] {
        assert!(
            help.contains(&format!("[env: BMM_SIM_{variable}")),
            "{variable}: {help}"
        );
    }
}

#[test]
fn bad_tls_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("empty.crt");
    std::fs::write(&cert, "not a pem").expect("write");
    let err = nephrite_bmm_sim::server_config(&cert, &dir.path().join("missing.key"))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("empty.crt"), "{err}");
    // The binary says the same and exits non-zero.
    let out = Command::new(env!("CARGO_BIN_EXE_bmm-sim"))
        .args(["--listen", "127.0.0.1:0", "--jwt-secret", "s"])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(dir.path().join("missing.key"))
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("empty.crt"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
