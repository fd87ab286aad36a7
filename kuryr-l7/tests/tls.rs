//! TLS on the embedded router: the shared TLS conformance cases (termination with SNI from
//! Ingress Secrets, Route certificates and the default certificate, ALPN h2, passthrough,
//! reencrypt with and without a destination CA, `insecureEdgeTerminationPolicy`), which
//! `tests/haproxy.rs` runs against HAProxy too.

mod support;

use nephrite_kuryr_l7::router::RouterConfig;
use support::*;

#[tokio::test]
async fn tls_conformance_cases() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = tls_conformance::write_objects(dir.path()).await;
    let config = RouterConfig {
        default_certificate: Some((fixture.default_cert.clone(), fixture.default_key.clone())),
        ..RouterConfig::default()
    };
    let (_router, http, https) = router(dir.path(), config).await;
    tls_conformance::check(http, https, &fixture).await;
}
