//! TLS for the router: the server configuration that picks a certificate by SNI (Ingress
//! `spec.tls` Secrets and Route certificates), reading the SNI of a connection before deciding
//! between termination and passthrough, and the client configuration for reencrypt pools.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nephrite_l7::Certificate;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

/// Certificates by exact host and by wildcard suffix, plus an optional default.
#[derive(Debug, Default)]
pub struct CertificateResolver {
    exact: HashMap<String, Arc<CertifiedKey>>,
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

/// Parses a PEM certificate chain and key into a signing key.
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<Arc<CertifiedKey>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in the PEM".into());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| format!("bad key PEM: {e}"))?;
    let signing = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key)
        .map_err(|e| format!("unsupported key: {e}"))?;
    Ok(Arc::new(CertifiedKey::new(certs, signing)))
}

impl CertificateResolver {
    /// Builds the resolver; certificates that do not parse are logged and left out (their hosts
    /// get the default certificate). Earlier certificates win for a host.
    pub fn new(certificates: &[Certificate], default: Option<Arc<CertifiedKey>>) -> Self {
        let mut resolver = CertificateResolver {
            default,
            ..CertificateResolver::default()
        };
        for certificate in certificates {
            let key = match certified_key(&certificate.cert_pem, &certificate.key_pem) {
                Ok(key) => key,
                Err(err) => {
                    tracing::warn!(origin = %certificate.origin, "certificate left out: {err}");
                    continue;
                }
            };
            if certificate.hosts.is_empty() && resolver.default.is_none() {
                resolver.default = Some(key.clone());
            }
            for host in &certificate.hosts {
                let host = host.to_ascii_lowercase();
                match host.strip_prefix("*.") {
                    Some(suffix) => resolver
                        .wildcard
                        .entry(suffix.to_owned())
                        .or_insert_with(|| key.clone()),
                    None => resolver.exact.entry(host).or_insert_with(|| key.clone()),
                };
            }
        }
        resolver
    }

    /// Whether it has any certificate at all.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty() && self.default.is_none()
    }

    /// The certificate for `sni`.
    pub fn find(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let sni = sni.map(str::to_ascii_lowercase);
        if let Some(host) = sni.as_deref() {
            if let Some(key) = self.exact.get(host) {
                return Some(key.clone());
            }
            if let Some((_, suffix)) = host.split_once('.')
                && let Some(key) = self.wildcard.get(suffix)
            {
                return Some(key.clone());
            }
        }
        self.default.clone()
    }
}

impl ResolvesServerCert for CertificateResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.find(hello.server_name())
    }
}

/// A server configuration answering with `resolver`'s certificates, ALPN h2 and http/1.1.
pub fn server_config(resolver: CertificateResolver) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = match rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
    {
        Ok(builder) => builder
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver)),
        // The default protocol versions are always supported by the default provider.
        Err(_) => rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(CertificateResolver::default())),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// Reads the SNI of a TLS connection without consuming its bytes (they stay in the socket for
/// the terminator or for passthrough). `Err` when the client does not send a ClientHello in time.
pub async fn peek_sni(stream: &TcpStream) -> Result<Option<String>, String> {
    let mut buffer = vec![0u8; 16 * 1024 + 5];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = tokio::time::timeout_at(deadline, stream.peek(&mut buffer))
            .await
            .map_err(|_| "no ClientHello within 10 s".to_owned())?
            .map_err(|e| e.to_string())?;
        if read == 0 {
            return Err("connection closed before the ClientHello".into());
        }
        let mut acceptor = rustls::server::Acceptor::default();
        let mut data = &buffer[..read];
        acceptor.read_tls(&mut data).map_err(|e| e.to_string())?;
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                return Ok(accepted.client_hello().server_name().map(str::to_owned));
            }
            Ok(None) if read < buffer.len() => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(None) => return Err("ClientHello larger than 16 KiB".into()),
            Err((err, _)) => return Err(format!("not a TLS ClientHello: {err}")),
        }
    }
}

/// A client configuration for a reencrypt pool: verified against `ca_pem`, or against nothing
/// but the handshake when no CA is given (OpenShift then trusts the service CA, which a
/// directory source does not have).
pub fn client_config(ca_pem: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = match ca_pem {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots
                    .add(cert.map_err(|e| format!("bad destination CA PEM: {e}"))?)
                    .map_err(|e| format!("bad destination CA: {e}"))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider)))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// Accepts any backend certificate whose handshake signature verifies (reencrypt without a
/// destination CA).
#[derive(Debug)]
struct AnyServerCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
