//! TLS on the router: termination with SNI (Ingress Secrets, Route certificates, the default
//! certificate), ALPN h2, passthrough and reencrypt.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use nephrite_kuryr_l7::router::RouterConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use support::*;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;

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
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
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
async fn connect(
    address: SocketAddr,
    sni: &str,
    alpn: &[&[u8]],
) -> (TlsStream<TcpStream>, Vec<u8>) {
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
        .unwrap();
    let shown = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    (tls, shown)
}

fn der(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

async fn get_h1(stream: TlsStream<TcpStream>, host: &str, target: &str) -> Reply {
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

fn indent(pem: &str) -> String {
    indent_by(pem, 4)
}

fn indent_by(pem: &str, spaces: usize) -> String {
    pem.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(spaces)))
        .collect()
}

/// A TLS backend answering HTTP/1.1 with `name` and its certificate.
async fn tls_backend(name: &'static str, host: &str) -> (SocketAddr, String) {
    let (cert, key) = certificate(&[host, "127.0.0.1"]);
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
    (address, cert)
}

#[tokio::test]
async fn terminates_with_the_certificate_for_the_sni() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let web = echo("web").await;
    let (shop_cert, shop_key) = certificate(&["shop.example.com"]);
    let (edge_cert, edge_key) = certificate(&["edge.example.com"]);
    let (default_cert, default_key) = certificate(&["default.invalid"]);
    let dir = tempfile::tempdir().unwrap();
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-tls, namespace: shop}}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}---\n",
        indent(&shop_cert),
        indent(&shop_key)
    );
    let ingress = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: shop, namespace: shop}\nspec:\n  tls: [{hosts: [shop.example.com], secretName: shop-tls}]\n  rules:\n  - host: shop.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n---\n";
    let route = format!(
        "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {{name: edge, namespace: shop}}\nspec:\n  host: edge.example.com\n  to: {{kind: Service, name: web}}\n  tls:\n    termination: edge\n    certificate: |\n{}    key: |\n{}---\n",
        indent_by(&edge_cert, 6),
        indent_by(&edge_key, 6),
    );
    let plain = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: plain, namespace: shop}\nspec:\n  rules:\n  - host: plain.example.com\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n";
    std::fs::write(
        dir.path().join("all.yaml"),
        format!(
            "{}{secret}{ingress}{route}{plain}",
            service_yaml("shop", "web", &[web])
        ),
    )
    .unwrap();
    let config = RouterConfig {
        default_certificate: Some((default_cert.clone(), default_key)),
        ..RouterConfig::default()
    };
    let (_router, _http, https) = router(dir.path(), config).await;

    let (stream, shown) = connect(https, "shop.example.com", &[b"http/1.1"]).await;
    assert_eq!(shown, der(&shop_cert));
    let reply = get_h1(stream, "shop.example.com", "/cart").await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.contains("proto=https"), "{}", reply.body);

    let (stream, shown) = connect(https, "edge.example.com", &[]).await;
    assert_eq!(shown, der(&edge_cert));
    assert_eq!(get_h1(stream, "edge.example.com", "/").await.status, 200);

    // A host without its own certificate gets the default one, and is served over TLS too.
    let (stream, shown) = connect(https, "plain.example.com", &[b"h2", b"http/1.1"]).await;
    assert_eq!(shown, der(&default_cert));
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(executor(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let request = Request::get("https://plain.example.com/h2")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let answer = support::reply(sender.send_request(request).await.unwrap()).await;
    assert_eq!(answer.status, 200);
    assert!(answer.body.starts_with("web path=/h2"), "{}", answer.body);
}

#[tokio::test]
async fn passthrough_forwards_the_tls_stream_and_reencrypt_talks_tls_to_members() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let (backend, backend_cert) = tls_backend("secure", "pass.example.com").await;
    let dir = tempfile::tempdir().unwrap();
    let routes = "apiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: pass, namespace: shop}\nspec:\n  host: pass.example.com\n  to: {kind: Service, name: secure}\n  tls: {termination: passthrough, insecureEdgeTerminationPolicy: Redirect}\n---\napiVersion: route.openshift.io/v1\nkind: Route\nmetadata: {name: re, namespace: shop}\nspec:\n  host: re.example.com\n  to: {kind: Service, name: secure}\n  tls: {termination: reencrypt}\n";
    std::fs::write(
        dir.path().join("all.yaml"),
        format!("{}{routes}", service_yaml("shop", "secure", &[backend])),
    )
    .unwrap();
    let (default_cert, default_key) = certificate(&["router.invalid"]);
    let config = RouterConfig {
        default_certificate: Some((default_cert, default_key)),
        ..RouterConfig::default()
    };
    let (_router, http, https) = router(dir.path(), config).await;

    let (stream, shown) = connect(https, "pass.example.com", &[b"http/1.1"]).await;
    assert_eq!(
        shown,
        der(&backend_cert),
        "the member's own certificate: not terminated"
    );
    assert_eq!(
        get_h1(stream, "pass.example.com", "/").await.body,
        "secure over tls"
    );
    let reply = get(http, "pass.example.com", "/x").await;
    assert_eq!(reply.status, 302);
    assert_eq!(reply.headers["location"], "https://pass.example.com/x");

    let (stream, shown) = connect(https, "re.example.com", &[]).await;
    assert_ne!(shown, der(&backend_cert));
    let reply = get_h1(stream, "re.example.com", "/").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "secure over tls");
}
