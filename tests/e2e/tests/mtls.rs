//! The cross-daemon path with mutual TLS on: the preparer, ntc, the kuryr-l7 controller and its
//! router each serve TLS, require a client certificate from the lab's CA and check their
//! policy, and every caller presents its own identity — the preparer CLI (`operator`), the
//! preparer dialling ntc (`preparer`), ntc writing children back (`ntc`), the router following
//! the controller (`router-1`). The topology converges and the SMF is approved after its UPFs;
//! the router serves every endpoint. A caller without a certificate, or with one the policy
//! does not name, is refused; no log line (RUST_LOG=debug) holds a private key.
//!
//! The binaries come from `target/debug` (the workspace's test build puts them there); without
//! them the test is skipped, loudly (a failure under `CI=true`).

use std::time::Duration;

use nephrite_e2e::pki::ROUTER;
use nephrite_e2e::tko;
use nephrite_e2e::{interrupt, router, test_lab, workspace_root};

const BINARIES: &[&str] = &["preparer", "ntc", "kuryr-l7"];

#[test]
fn the_cross_daemon_path_runs_with_mutual_tls_on() {
    let Some(mut lab) = test_lab(BINARIES) else {
        return;
    };
    lab.set_log_level("debug");
    lab.enable_mtls().expect("the lab's PKI");

    // preparer ⇄ ntc: the whole TKO path over mutual TLS.
    let preparer = tko::start_preparer(&mut lab).unwrap();
    tko::register_sites(&lab, preparer, |_| {}).unwrap();
    tko::start_ntc(&mut lab, preparer).unwrap();
    let parent = tko::create_topology(&lab, preparer, &workspace_root()).unwrap();
    let children = tko::wait_children(&mut lab, preparer, &parent, |_| {}).unwrap();
    assert!(children.iter().all(|c| !c.approved), "{children:?}");
    for upf in children.iter().filter(|c| c.nf_type == "upf") {
        tko::preparer_cli(&lab, preparer, &["deployment", "approve", &upf.id]).unwrap();
    }
    interrupt::wait_for("ntc to approve the SMF", Duration::from_secs(60), || {
        lab.check_daemons()?;
        let children = tko::list_children(&lab, preparer, &parent)?;
        Ok(children
            .iter()
            .any(|c| c.nf_type == "smf" && c.approved)
            .then_some(()))
    })
    .unwrap();

    // controller ⇄ router: the rules over mutual TLS, the router as itself.
    let names = ["upf-west-edge01", "smf-regional", "amf-regional"];
    let endpoints = router::serve_endpoints(names).unwrap();
    let (_controller, router_addr) = router::start(&mut lab, &endpoints).unwrap();
    let mut answers = Vec::new();
    let (ok, sent) =
        router::call_all(router_addr, &endpoints, |a| answers.push(a.to_owned())).unwrap();
    assert_eq!((ok, sent), (6, 6), "{answers:#?}");

    // Refused: no client certificate (the handshake fails), and a certificate of the lab's CA
    // whose identity the preparer's policy does not name.
    let pki = lab.pki().unwrap().clone();
    let ca = pki.file("ca.pem").display().to_string();
    let server = lab.url(preparer);
    let list = ["--server", &server, "deployment", "list"];
    let anonymous = lab.run(
        "anonymous-cli",
        "preparer",
        &list,
        None,
        &[("NEPHRITE_CA", &ca)],
    );
    let anonymous = anonymous.expect_err("no certificate, yet the CLI listed deployments");
    let said = anonymous.to_string();
    assert!(
        said.contains("transport error") && !said.contains("role"),
        "refused by the transport (TLS 1.3 ends the connection with a CertificateRequired \
         alert, which the client sees as that alert or as the connection closing, by timing), \
         not by a method's role check: {said}"
    );
    let cert = pki.file(&format!("{ROUTER}.pem")).display().to_string();
    let key = pki.file(&format!("{ROUTER}-key.pem")).display().to_string();
    let stranger = lab
        .run(
            "stranger-cli",
            "preparer",
            &list,
            None,
            &[
                ("NEPHRITE_CA", &ca),
                ("NEPHRITE_CERT", &cert),
                ("NEPHRITE_KEY", &key),
            ],
        )
        .expect_err("an identity without a role listed deployments");
    assert!(
        stranger.to_string().contains(ROUTER),
        "the refusal names the identity: {stranger:#}"
    );

    // No private key in any log line.
    let keys: Vec<String> = pki
        .private_keys()
        .unwrap()
        .iter()
        .flat_map(|pem| {
            pem.lines()
                .filter(|l| !l.starts_with("-----") && l.len() > 16)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!keys.is_empty());
    let mut lines = 0;
    let mut leaks = Vec::new();
    for entry in std::fs::read_dir(lab.dir().join("logs")).unwrap() {
        let path = entry.unwrap().path();
        for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
            lines += 1;
            if keys.iter().any(|k| line.contains(k.as_str())) {
                leaks.push(format!("{}: {line}", path.display()));
            }
        }
    }
    assert!(lines > 100, "the run logged only {lines} lines");
    assert!(
        leaks.is_empty(),
        "private keys in the logs:\n{}",
        leaks.join("\n")
    );
    assert!(lab.cleanup().is_empty());
}
