//! `bmm-sim --tls-cert F --tls-key F`: HTTPS with rustls; the client trusts the given CA and
//! refuses an endpoint it cannot verify.

mod support;

use std::time::Duration;

use nephrite_bmm_provider::client::{BmmClient, ClientConfig};
use nephrite_bmm_sim::{Sim, server_config};
use support::{ORG, fast_config, token};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reaches_the_simulator_over_tls_when_it_trusts_the_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let issued =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let (cert, key) = (dir.path().join("sim.crt"), dir.path().join("sim.key"));
    let cert_pem = issued.cert.pem();
    std::fs::write(&cert, &cert_pem).expect("write cert");
    std::fs::write(&key, issued.signing_key.serialize_pem()).expect("write key");

    let sim = Sim::new(fast_config());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let tls = server_config(&cert, &key).expect("TLS config");
    tokio::spawn(sim.clone().serve_tls(listener, tls, std::future::pending()));
    let endpoint = format!("https://localhost:{port}");

    let mut trusting = ClientConfig::new(&endpoint, ORG, token());
    trusting.ca_pem = Some(cert_pem.into_bytes());
    trusting.timeout = Duration::from_secs(5);
    let client = BmmClient::new(trusting).expect("client");
    let tenant = client.current_tenant().await.expect("tenant over TLS");
    assert!(!tenant.id.is_empty());
    let site = client.site_named("sim-site").await.expect("site");
    assert_eq!(site.map(|s| s.id), Some(sim.site_id()));

    let mut untrusting = ClientConfig::new(&endpoint, ORG, token());
    untrusting.timeout = Duration::from_secs(5);
    untrusting.retry.max_attempts = 1;
    let stranger = BmmClient::new(untrusting).expect("client");
    assert!(
        stranger.current_tenant().await.is_err(),
        "a certificate the client does not trust is refused"
    );

    // Plain HTTP against the TLS port gets no answer it could parse either.
    let plain = BmmClient::new({
        let mut c = ClientConfig::new(format!("http://127.0.0.1:{port}"), ORG, token());
        c.timeout = Duration::from_secs(2);
        c.retry.max_attempts = 1;
        c
    })
    .expect("client");
    assert!(plain.current_tenant().await.is_err());
}
