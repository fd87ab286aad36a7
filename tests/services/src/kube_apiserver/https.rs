//! One HTTPS GET with a bearer token, for polling kube-apiserver's `/readyz`.
//!
//! kube-apiserver serves only TLS. Readiness is polled many times a second while it starts,
//! from code that has no async runtime (and `cargo xtask`, which shares this code, has none),
//! so this is a blocking rustls connection trusting only the server's own CA.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::http::parse_response;

/// A TLS client that trusts one CA.
#[derive(Debug, Clone)]
pub(crate) struct HttpsProbe {
    config: Arc<ClientConfig>,
}

/// Why a probe could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot trust the kube-apiserver CA: {0}")]
pub(crate) struct ProbeSetupError(String);

impl HttpsProbe {
    /// A client trusting only the CA in `ca_pem`.
    pub(crate) fn trusting(ca_pem: &str) -> Result<HttpsProbe, ProbeSetupError> {
        let ca = CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .map_err(|e| ProbeSetupError(format!("not a PEM certificate: {e}")))?;
        let mut roots = RootCertStore::empty();
        roots.add(ca).map_err(|e| ProbeSetupError(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ProbeSetupError(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(HttpsProbe {
            config: Arc::new(config),
        })
    }

    /// `GET path` on `addr` (its IP is the name checked in the certificate) with
    /// `Authorization: Bearer token`: (status, body).
    pub(crate) fn get(
        &self,
        addr: SocketAddr,
        token: &str,
        path: &str,
    ) -> std::io::Result<(u16, String)> {
        let name = ServerName::IpAddress(addr.ip().into());
        let connection =
            ClientConnection::new(self.config.clone(), name).map_err(std::io::Error::other)?;
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(2)))?;
        let mut stream = StreamOwned::new(connection, tcp);
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Connection: close\r\n\r\n"
        )?;
        let mut response = Vec::new();
        match stream.read_to_end(&mut response) {
            Ok(_) => {}
            // The server may close without close_notify after a complete response.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
            Err(e) => return Err(e),
        }
        parse_response(&String::from_utf8_lossy(&response)).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP response")
        })
    }
}
