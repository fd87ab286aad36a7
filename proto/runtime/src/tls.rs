//! TLS material for serving and dialing, loaded from PEM and checked up front
//! so that a bad file fails at start-up with its path in the message.

use std::io;
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// Why TLS material could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// What the file should hold ("certificate", "private key", "CA").
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: io::Error,
    },
    /// A PEM file holds no usable item of the expected kind.
    #[error("{what} {path}: {problem}")]
    Invalid {
        /// What the file should hold.
        what: &'static str,
        /// The file (or `<memory>` for in-memory PEM).
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A certificate was given without its key or the other way round.
    #[error("TLS needs both a certificate and a key (got only the {present})")]
    Incomplete {
        /// Which of the two was given.
        present: &'static str,
    },
}

/// Server-side TLS: the server's certificate chain and key, and optionally a
/// CA that client certificates must chain to (mutual TLS).
#[derive(Clone)]
pub struct ServerTls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    client_ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mutual", &self.client_ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// From in-memory PEM; the material is validated.
    ///
    /// # Errors
    /// When the certificate or key PEM holds no certificate or key.
    pub fn from_pem(cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Result<Self, TlsError> {
        let memory = Path::new("<memory>");
        check_certificates("certificate", memory, &cert_pem)?;
        check_private_key(memory, &key_pem)?;
        Ok(ServerTls {
            cert_pem,
            key_pem,
            client_ca_pem: None,
        })
    }

    /// From PEM files: certificate chain and private key.
    ///
    /// # Errors
    /// When a file cannot be read or holds no certificate or key; the error
    /// names the file.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_pem = read("certificate", cert)?;
        check_certificates("certificate", cert, &cert_pem)?;
        let key_pem = read("private key", key)?;
        check_private_key(key, &key_pem)?;
        Ok(ServerTls {
            cert_pem,
            key_pem,
            client_ca_pem: None,
        })
    }

    /// Require client certificates signed by this CA (PEM in memory).
    ///
    /// # Errors
    /// When the PEM holds no certificate.
    pub fn with_client_ca_pem(mut self, ca_pem: Vec<u8>) -> Result<Self, TlsError> {
        check_certificates("client CA", Path::new("<memory>"), &ca_pem)?;
        self.client_ca_pem = Some(ca_pem);
        Ok(self)
    }

    /// Require client certificates signed by the CA in this PEM file.
    ///
    /// # Errors
    /// When the file cannot be read or holds no certificate.
    pub fn with_client_ca_file(mut self, ca: &Path) -> Result<Self, TlsError> {
        let ca_pem = read("client CA", ca)?;
        check_certificates("client CA", ca, &ca_pem)?;
        self.client_ca_pem = Some(ca_pem);
        Ok(self)
    }

    /// Whether client certificates are required.
    pub fn is_mutual(&self) -> bool {
        self.client_ca_pem.is_some()
    }

    pub(crate) fn to_tonic(&self) -> ServerTlsConfig {
        let config = ServerTlsConfig::new().identity(Identity::from_pem(
            self.cert_pem.clone(),
            self.key_pem.clone(),
        ));
        match &self.client_ca_pem {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca.clone())),
            None => config,
        }
    }
}

/// Client-side TLS: the CA that the server's certificate must chain to, the
/// name to verify (defaults to the dialed host), and an optional client
/// certificate for mutual TLS.
#[derive(Clone, Default)]
pub struct ClientTls {
    ca_pem: Option<Vec<u8>>,
    domain: Option<String>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("has_ca", &self.ca_pem.is_some())
            .field("domain", &self.domain)
            .field("has_identity", &self.identity.is_some())
            .finish()
    }
}

impl ClientTls {
    /// TLS with no trust anchors yet: add a CA with
    /// [`ClientTls::with_ca_pem`] or [`ClientTls::with_ca_file`] (no system
    /// root store is compiled in).
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust the CA certificates in this PEM.
    ///
    /// # Errors
    /// When the PEM holds no certificate.
    pub fn with_ca_pem(mut self, ca_pem: Vec<u8>) -> Result<Self, TlsError> {
        check_certificates("CA", Path::new("<memory>"), &ca_pem)?;
        self.ca_pem = Some(ca_pem);
        Ok(self)
    }

    /// Trust the CA certificates in this PEM file.
    ///
    /// # Errors
    /// When the file cannot be read or holds no certificate.
    pub fn with_ca_file(self, ca: &Path) -> Result<Self, TlsError> {
        let ca_pem = read("CA", ca)?;
        check_certificates("CA", ca, &ca_pem)?;
        Ok(ClientTls {
            ca_pem: Some(ca_pem),
            ..self
        })
    }

    /// Verify the server certificate against this name instead of the host
    /// being dialed (needed for Unix sockets and IP literals without IP SANs).
    #[must_use]
    pub fn with_domain(mut self, domain: impl Into<String>) -> Self {
        self.domain = Some(domain.into());
        self
    }

    /// Present this client certificate and key (mutual TLS).
    ///
    /// # Errors
    /// When the PEM holds no certificate or key.
    pub fn with_identity_pem(
        mut self,
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
    ) -> Result<Self, TlsError> {
        let memory = Path::new("<memory>");
        check_certificates("client certificate", memory, &cert_pem)?;
        check_private_key(memory, &key_pem)?;
        self.identity = Some((cert_pem, key_pem));
        Ok(self)
    }

    /// Present the client certificate and key in these PEM files (mutual TLS).
    ///
    /// # Errors
    /// When a file cannot be read or holds no certificate or key; the error names the file.
    pub fn with_identity_files(mut self, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_pem = read("client certificate", cert)?;
        check_certificates("client certificate", cert, &cert_pem)?;
        let key_pem = read("private key", key)?;
        check_private_key(key, &key_pem)?;
        self.identity = Some((cert_pem, key_pem));
        Ok(self)
    }

    pub(crate) fn to_tonic(&self, default_domain: Option<&str>) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &self.ca_pem {
            config = config.ca_certificate(Certificate::from_pem(ca.clone()));
        }
        if let Some(domain) = self.domain.as_deref().or(default_domain) {
            config = config.domain_name(domain);
        }
        if let Some((cert, key)) = &self.identity {
            config = config.identity(Identity::from_pem(cert.clone(), key.clone()));
        }
        config
    }
}

/// Install aws-lc-rs as the process's rustls provider unless one is already
/// installed, so TLS works even when another dependency compiles in `ring`.
pub(crate) fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn check_certificates(what: &'static str, path: &Path, pem: &[u8]) -> Result<(), TlsError> {
    let invalid = |problem: String| TlsError::Invalid {
        what,
        path: path.to_owned(),
        problem,
    };
    let mut count = 0usize;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| invalid(format!("malformed PEM: {e}")))?;
        count += 1;
    }
    if count == 0 {
        return Err(invalid("no PEM certificate found".to_owned()));
    }
    Ok(())
}

fn check_private_key(path: &Path, pem: &[u8]) -> Result<(), TlsError> {
    let invalid = |problem: String| TlsError::Invalid {
        what: "private key",
        path: path.to_owned(),
        problem,
    };
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(_) => Ok(()),
        Err(pem::Error::NoItemsFound) => Err(invalid("no PEM private key found".to_owned())),
        Err(e) => Err(invalid(format!("malformed PEM: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing.pem");
        let err = ServerTls::from_files(&missing, &missing).expect_err("missing");
        assert!(err.to_string().contains("missing.pem"), "{err}");

        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "hello").expect("write");
        let err = ServerTls::from_files(&junk, &junk).expect_err("junk");
        assert!(err.to_string().contains("junk.pem"), "{err}");
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }

    #[test]
    fn accepts_generated_material() {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let tls = ServerTls::from_pem(cert.pem().into_bytes(), key.serialize_pem().into_bytes())
            .expect("valid")
            .with_client_ca_pem(cert.pem().into_bytes())
            .expect("ca");
        assert!(tls.is_mutual());
        // a certificate is not a key
        assert!(ServerTls::from_pem(cert.pem().into_bytes(), cert.pem().into_bytes()).is_err());
    }
}
