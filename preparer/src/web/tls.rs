//! The web dashboard's TLS: the certificate, key and client CA the daemon's gRPC API serves
//! with (`--tls-cert`, `--tls-key`, `--tls-client-ca`), read again here as a rustls server
//! configuration for the HTTP listener.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nephrite_runtime::ServeArgs;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Why the web dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebTlsError {
    /// A PEM file that cannot be read or holds nothing usable.
    #[error("web dashboard: {what} {path}: {reason}")]
    Pem {
        /// Certificate, private key or client CA.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// The TLS configuration was refused.
    #[error("web dashboard: TLS configuration: {0}")]
    Config(String),
    /// A non-loopback address without authentication and without `--insecure`.
    #[error(
        "web dashboard: refusing to serve {addr} without authentication: it is not a loopback \
         address. Configure --auth-tokens or --tls-client-ca (with --auth-policy for roles), \
         or pass --insecure"
    )]
    Unauthenticated {
        /// The address.
        addr: SocketAddr,
    },
    /// The address could not be bound.
    #[error("web dashboard: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

fn certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, WebTlsError> {
    let pem = |reason: String| WebTlsError::Pem {
        what,
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem("holds no certificate".to_owned()));
    }
    Ok(certs)
}

/// The acceptor for `serve`'s TLS flags; `None` when the daemon serves plaintext.
pub(super) fn acceptor(serve: &ServeArgs) -> Result<Option<TlsAcceptor>, WebTlsError> {
    let (Some(cert), Some(key)) = (&serve.tls_cert, &serve.tls_key) else {
        return Ok(None);
    };
    let chain = certificates("certificate", cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| WebTlsError::Pem {
        what: "private key",
        path: key.clone(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| WebTlsError::Config(e.to_string()))?;
    let builder = match &serve.tls_client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates("client CA", ca)? {
                roots
                    .add(cert)
                    .map_err(|e| WebTlsError::Config(e.to_string()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| WebTlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| WebTlsError::Config(e.to_string()))?;
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}
