use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::binaries::{ETCD_VERSION, KUBERNETES_VERSION, KubeBinaries, bin_dir, release_dir};
use super::flags::{EtcdPorts, apiserver_args, etcd_args};
use super::kubeconfig::kubeconfig;
use super::pki::{Pki, token_file_line};

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

#[test]
fn the_binaries_live_under_a_directory_named_for_both_pinned_versions() {
    let root = Path::new("/t/kube");
    assert_eq!(
        bin_dir(root),
        Path::new(&format!(
            "/t/kube/{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}/bin"
        ))
    );
    assert_eq!(bin_dir(root).parent(), Some(release_dir(root).as_path()));
    let binaries = KubeBinaries::under(Path::new("/nowhere/bin"));
    assert_eq!(binaries.etcd, Path::new("/nowhere/bin/etcd"));
    assert!(!binaries.exist());
}

#[test]
fn etcd_runs_one_member_on_the_given_ports_without_fsync() {
    let ports = EtcdPorts {
        client: "127.0.0.1:2001".parse().unwrap(),
        peer: "127.0.0.1:2002".parse().unwrap(),
    };
    let args = etcd_args(ports, Path::new("/s/etcd-1"));
    assert_eq!(
        flag(&args, "listen-client-urls"),
        Some("http://127.0.0.1:2001")
    );
    assert_eq!(
        flag(&args, "listen-peer-urls"),
        Some("http://127.0.0.1:2002")
    );
    assert_eq!(
        flag(&args, "initial-cluster"),
        Some("nephrite-kube=http://127.0.0.1:2002")
    );
    assert_eq!(flag(&args, "data-dir"), Some("/s/etcd-1"));
    assert_eq!(flag(&args, "unsafe-no-fsync"), Some("true"));
}

#[test]
fn the_apiserver_authorises_with_node_and_rbac_and_authenticates_with_its_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::create(dir.path()).unwrap();
    let secure: SocketAddr = "127.0.0.1:6443".parse().unwrap();
    let args = apiserver_args(secure, "127.0.0.1:2001".parse().unwrap(), &pki, dir.path());
    assert_eq!(flag(&args, "authorization-mode"), Some("Node,RBAC"));
    assert_eq!(flag(&args, "etcd-servers"), Some("http://127.0.0.1:2001"));
    assert_eq!(flag(&args, "bind-address"), Some("127.0.0.1"));
    assert_eq!(flag(&args, "secure-port"), Some("6443"));
    let token_file = dir.path().join("tokens.csv");
    assert_eq!(
        flag(&args, "token-auth-file"),
        Some(token_file.to_str().unwrap())
    );
    let public = dir.path().join("service-account.pub");
    assert_eq!(
        flag(&args, "service-account-key-file"),
        Some(public.to_str().unwrap())
    );
    let private = dir.path().join("service-account.key");
    assert_eq!(
        flag(&args, "service-account-signing-key-file"),
        Some(private.to_str().unwrap())
    );
    let public_pem = std::fs::read_to_string(&public).unwrap();
    assert!(
        public_pem.starts_with("-----BEGIN PUBLIC KEY-----"),
        "{public_pem}"
    );
    assert!(flag(&args, "service-account-issuer").is_some());
    assert!(flag(&args, "service-cluster-ip-range").is_some());
}

#[test]
fn fresh_credentials_put_the_admin_in_system_masters_and_keep_secrets_private() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::create(dir.path()).unwrap();
    assert_eq!(pki.admin_token.len(), 32);
    assert!(pki.admin_token.chars().all(|c| c.is_ascii_hexdigit()));
    let tokens = std::fs::read_to_string(&pki.token_file).unwrap();
    assert_eq!(tokens, token_file_line(&pki.admin_token));
    assert!(tokens.ends_with(",nephrite-admin,nephrite-admin,\"system:masters\"\n"));
    for secret in [&pki.token_file, &pki.serving_key, &pki.service_account_key] {
        let mode = std::fs::metadata(secret).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o077,
            0,
            "{} is readable by others",
            secret.display()
        );
    }
    assert!(pki.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    let key = std::fs::read_to_string(&pki.service_account_key).unwrap();
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
    let other = Pki::create(tempfile::tempdir().unwrap().path()).unwrap();
    assert_ne!(
        other.admin_token, pki.admin_token,
        "every start has its own token"
    );
    assert_ne!(other.ca_pem, pki.ca_pem);
}

#[test]
fn a_kubeconfig_embeds_the_ca_and_the_token_under_one_context() {
    let text = kubeconfig("https://127.0.0.1:6443", "PEM\n", "admin", "t0k3n");
    let config: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(config["current-context"], "nephrite");
    let cluster = &config["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], "https://127.0.0.1:6443");
    let ca = BASE64
        .decode(cluster["certificate-authority-data"].as_str().unwrap())
        .unwrap();
    assert_eq!(ca, b"PEM\n");
    assert_eq!(config["users"][0]["name"], "admin");
    assert_eq!(config["users"][0]["user"]["token"], "t0k3n");
    assert_eq!(config["contexts"][0]["context"]["user"], "admin");
}

#[test]
fn missing_binaries_are_missing_and_say_how_to_build_them() {
    let e = KubeBinaries::under(Path::new("/nonexistent/kube/bin"))
        .present()
        .unwrap_err();
    assert!(e.is_missing(), "a skip outside CI, not a failure: {e}");
    assert!(e.how_to_install().contains("cargo xtask kube build"), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(KUBERNETES_VERSION) && text.contains(ETCD_VERSION),
        "{text}"
    );
    assert!(
        text.contains("/nonexistent/kube/bin/kube-apiserver"),
        "{text}"
    );
    assert!(text.contains("/nonexistent/kube/bin/etcd"), "{text}");
}

#[test]
fn down_refuses_a_directory_without_a_record_and_names_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    match super::down(dir.path()) {
        Err(super::ClusterError::NoCluster { dir: named }) => assert_eq!(named, dir.path()),
        other => panic!("expected NoCluster, got {other:?}"),
    }
    let record = dir.path().join("cluster.json");
    std::fs::write(&record, "{\"pids\": {}}").unwrap();
    match super::down(dir.path()) {
        Err(e @ super::ClusterError::BadRecord { .. }) => {
            let text = e.to_string();
            assert!(text.contains("pids.kube-apiserver"), "{text}");
            assert!(text.contains(record.to_str().unwrap()), "{text}");
        }
        other => panic!("expected BadRecord, got {other:?}"),
    }
    assert!(
        record.exists(),
        "a broken record is left for a person to read"
    );
}

#[test]
fn up_refuses_a_directory_that_already_holds_a_pair() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("cluster.json"),
        "{\"pids\": {\"kube-apiserver\": 41, \"etcd\": 42}}",
    )
    .unwrap();
    match super::up(dir.path()) {
        Err(e @ super::ClusterError::AlreadyUp { .. }) => {
            let text = e.to_string();
            assert!(text.contains("[41, 42]"), "{text}");
            assert!(text.contains("cargo xtask kube down --dir"), "{text}");
        }
        other => panic!("expected AlreadyUp, got {other:?}"),
    }
}

#[test]
fn down_never_signals_a_recorded_pid_whose_command_line_does_not_name_the_state() {
    // A pid reused by another process after the pair died: here, a sleep of this test.
    let mut bystander = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    std::fs::create_dir_all(cluster.join("state")).unwrap();
    std::fs::write(cluster.join("kubeconfig"), "{}").unwrap();
    std::fs::write(
        cluster.join("cluster.json"),
        format!(
            "{{\"pids\": {{\"kube-apiserver\": {0}, \"etcd\": {0}}}}}",
            bystander.id()
        ),
    )
    .unwrap();
    let stopped = super::down(&cluster).unwrap();
    assert!(stopped.stopped.is_empty(), "{stopped:?}");
    assert!(
        crate::process::runs(bystander.id()),
        "the bystander was signalled"
    );
    assert!(stopped.removed_dir && !cluster.exists());
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}
