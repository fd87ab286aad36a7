//! The TLS conformance cases: one set of objects (Ingress `spec.tls` with a Secret, Routes
//! edge / passthrough / reencrypt with each `insecureEdgeTerminationPolicy`) and what each
//! connection must get, run against the embedded router (`tests/tls.rs`) and against HAProxy
//! driven by the `haproxy` driver (`tests/haproxy.rs`).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;

use super::{Reply, certificate, echo, executor, get, reply, service_yaml};

#[derive(Debug)]
struct AcceptAny;

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify_tls13_signature(message, cert, signature)
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Connects with `sni` and `alpn`; returns the stream and the certificate the server showed.
pub async fn connect(
    address: SocketAddr,
    sni: &str,
    alpn: &[&[u8]],
) -> (TlsStream<TcpStream>, Vec<u8>) {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let stream = TcpStream::connect(address).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(sni.to_owned()).unwrap(), stream)
        .await
        .unwrap_or_else(|err| panic!("TLS to {address} with SNI {sni}: {err}"));
    let shown = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    (tls, shown)
}

/// The DER of a PEM certificate.
pub fn der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// One HTTP/1.1 request over `stream`.
pub async fn get_h1(stream: TlsStream<TcpStream>, host: &str, target: &str) -> Reply {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get(target)
        .header("host", host)
        .body(Empty::<Bytes>::new())
        .unwrap();
    reply(sender.send_request(request).await.unwrap()).await
}

/// `pem` with every line indented by `spaces` (for YAML block scalars).
pub fn indent_by(pem: &str, spaces: usize) -> String {
    pem.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(spaces)))
        .collect()
}

/// A certificate for `hosts` signed by a new CA: (cert PEM, key PEM, CA cert PEM).
pub fn ca_signed(hosts: &[&str]) -> (String, String, String) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kuryr-l7 test backend CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let cert = rcgen::CertificateParams::new(hosts)
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (cert.pem(), key.serialize_pem(), ca.pem())
}

/// A TLS backend answering HTTP/1.1 with `name`: its address, certificate and CA.
pub async fn tls_backend(name: &'static str, host: &str) -> (SocketAddr, String, String) {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let (cert, key, ca) = ca_signed(&[host, "127.0.0.1"]);
    let key_pair = nephrite_kuryr_l7::router::tls::certified_key(&cert, &key).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(
        nephrite_kuryr_l7::router::tls::CertificateResolver::new(&[], Some(key_pair)),
    ));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |_request: Request<hyper::body::Incoming>| async move {
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(Bytes::from(format!("{name} over tls"))),
                        ))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (address, cert, ca)
}

/// What the cases need to know about the objects written.
pub struct Fixture {
    /// The default certificate and key (PEM) the target must be given.
    pub default_cert: String,
    /// Its key.
    pub default_key: String,
    shop_cert: String,
    edge_cert: String,
    backend_cert: String,
}

/// Starts the backends and writes the objects into `dir`.
pub async fn write_objects(dir: &Path) -> Fixture {
    let web = echo("web").await;
    let (backend, backend_cert, backend_ca) = tls_backend("secure", "pass.example.com").await;
    let (shop_cert, shop_key) = certificate(&["shop.example.com"]);
    let (edge_cert, edge_key) = certificate(&["edge.example.com"]);
    let (default_cert, default_key) = certificate(&["default.invalid"]);
    let (_, _, other_ca) = ca_signed(&["other.invalid"]);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-tls, namespace: shop}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}---\n",
        indent_by(&shop_cert, 4),
        indent_by(&shop_key, 4)
    );
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: shop, namespace: shop}\nspec:\n  tls: [{hosts: [shop.example.com], secretName: shop-tls}]\n  rules:\n  - host: shop.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n---\n";
    let edge = format!(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: edge, namespace: shop}}\nspec:\n  host: edge.example.com\n  to: {{kind: Service, name: web}}\n  tls:\n    termination: edge\n    certificate: |\n{}    key: |\n{}---\n",
        indent_by(&edge_cert, 6),
        indent_by(&edge_key, 6),
    );
    let plain = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: plain, namespace: shop}\nspec:\n  rules:\n  - host: plain.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n---\n";
    let routes = "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: pass, namespace: shop}\nspec:\n  host: pass.example.com\n  to: {kind: Service, name: secure}\n  tls: {termination: passthrough, insecureEdgeTerminationPolicy: Redirect}\n---\napiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: re, namespace: shop}\nspec:\n  host: re.example.com\n  to: {kind: Service, name: secure}\n  tls: {termination: reencrypt}\n---\napiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: allow, namespace: shop}\nspec:\n  host: allow.example.com\n  to: {kind: Service, name: web}\n  tls: {termination: edge, insecureEdgeTerminationPolicy: Allow}\n---\n";
    let verified = |name: &str, ca: &str| {
        format!(
            "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  host: {name}.example.com\n  to: {{kind: Service, name: secure}}\n  tls:\n    termination: reencrypt\n    destinationCACertificate: |\n{}---\n",
            indent_by(ca, 6)
        )
    };
    std::fs::write(
        dir.join("tls.yaml"),
        format!(
            "{}{}{secret}{ingress}{edge}{plain}{routes}{}{}",
            service_yaml("shop", "web", &[web]),
            service_yaml("shop", "secure", &[backend]),
            verified("re-verified", &backend_ca),
            verified("re-wrong-ca", &other_ca),
        ),
    )
    .unwrap();
    Fixture {
        default_cert,
        default_key,
        shop_cert,
        edge_cert,
        backend_cert,
    }
}

/// Checks every case on the target's plain HTTP address `http` and TLS address `https`;
/// panics at the first case answered wrongly, naming it.
pub async fn check(http: SocketAddr, https: SocketAddr, fixture: &Fixture) {
    // Ingress spec.tls: the Secret's certificate for its host, X-Forwarded-Proto https.
    let (stream, shown) = connect(https, "shop.example.com", &[b"http/1.1"]).await;
    assert_eq!(
        shown,
        der(&fixture.shop_cert),
        "shop.example.com certificate"
    );
    let reply = get_h1(stream, "shop.example.com", "/cart").await;
    assert_eq!(reply.status, 200, "https://shop.example.com/cart");
    assert!(reply.body.starts_with("web path=/cart "), "{}", reply.body);
    assert!(reply.body.contains("proto=https"), "{}", reply.body);

    // Route edge with its own certificate; insecureEdgeTerminationPolicy None: no plain HTTP.
    let (stream, shown) = connect(https, "edge.example.com", &[]).await;
    assert_eq!(
        shown,
        der(&fixture.edge_cert),
        "edge.example.com certificate"
    );
    assert_eq!(get_h1(stream, "edge.example.com", "/").await.status, 200);
    assert_eq!(
        get(http, "edge.example.com", "/").await.status,
        404,
        "http://edge.example.com (None)"
    );

    // A host without its own certificate gets the default one, and is served over TLS too,
    // with ALPN h2.
    let (stream, shown) = connect(https, "plain.example.com", &[b"h2", b"http/1.1"]).await;
    assert_eq!(shown, der(&fixture.default_cert), "default certificate");
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "ALPN");
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(executor(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::get("https://plain.example.com/h2")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let answer = super::reply(sender.send_request(request).await.unwrap()).await;
    assert_eq!(answer.status, 200, "h2 https://plain.example.com/h2");
    assert!(answer.body.starts_with("web path=/h2"), "{}", answer.body);

    // insecureEdgeTerminationPolicy Allow: both.
    let (stream, shown) = connect(https, "allow.example.com", &[]).await;
    assert_eq!(
        shown,
        der(&fixture.default_cert),
        "allow.example.com certificate"
    );
    assert_eq!(get_h1(stream, "allow.example.com", "/").await.status, 200);
    let reply = get(http, "allow.example.com", "/x").await;
    assert_eq!(reply.status, 200, "http://allow.example.com/x (Allow)");
    assert!(reply.body.contains("proto=http "), "{}", reply.body);

    // Passthrough: the member's own certificate (not terminated); Redirect on plain HTTP.
    let (stream, shown) = connect(https, "pass.example.com", &[b"http/1.1"]).await;
    assert_eq!(
        shown,
        der(&fixture.backend_cert),
        "the member's own certificate: not terminated"
    );
    assert_eq!(
        get_h1(stream, "pass.example.com", "/").await.body,
        "secure over tls"
    );
    let reply = get(http, "pass.example.com", "/x").await;
    assert_eq!(reply.status, 302, "http://pass.example.com/x (Redirect)");
    assert_eq!(reply.headers["location"], "https://pass.example.com/x");

    // Reencrypt: terminated here, TLS again to the member.
    let (stream, shown) = connect(https, "re.example.com", &[]).await;
    assert_ne!(shown, der(&fixture.backend_cert));
    let reply = get_h1(stream, "re.example.com", "/").await;
    assert_eq!(reply.status, 200, "https://re.example.com");
    assert_eq!(reply.body, "secure over tls");

    // Reencrypt verified against destinationCACertificate: the right CA passes, another fails.
    let (stream, _) = connect(https, "re-verified.example.com", &[]).await;
    let reply = get_h1(stream, "re-verified.example.com", "/").await;
    assert_eq!(reply.status, 200, "https://re-verified.example.com");
    assert_eq!(reply.body, "secure over tls");
    let (stream, _) = connect(https, "re-wrong-ca.example.com", &[]).await;
    let reply = get_h1(stream, "re-wrong-ca.example.com", "/").await;
    assert!(
        matches!(reply.status, 502 | 503),
        "https://re-wrong-ca.example.com: {} {}",
        reply.status,
        reply.body
    );
    assert!(!reply.body.contains("secure over tls"));
}
