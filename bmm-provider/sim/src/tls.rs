//! Serving the simulator over HTTPS (rustls), for `bmm-sim --tls-cert F --tls-key F`.

use std::path::Path;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::{Sim, router};

/// Why the TLS material could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SimTlsError {
    /// The certificate file.
    #[error("certificate {path}: {problem}")]
    Certificate {
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The key file.
    #[error("private key {path}: {problem}")]
    Key {
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The pair was refused by rustls.
    #[error("certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

/// A rustls server configuration from a PEM certificate chain and key file.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, SimTlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|items| items.collect::<Result<Vec<_>, _>>())
        .map_err(|e| SimTlsError::Certificate {
            path: cert.display().to_string(),
            problem: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(SimTlsError::Certificate {
            path: cert.display().to_string(),
            problem: "no CERTIFICATE in the file".into(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| SimTlsError::Key {
        path: key.display().to_string(),
        problem: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimTlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| SimTlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

impl Sim {
    /// Serves HTTPS on a listener until `shutdown` resolves.
    pub async fn serve_tls(
        self,
        listener: tokio::net::TcpListener,
        tls: Arc<rustls::ServerConfig>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let acceptor = TlsAcceptor::from(tls);
        let app = router(self);
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => accepted?,
                _ = &mut shutdown => return Ok(()),
            };
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let stream = match acceptor.accept(stream).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                };
                let service = TowerToHyperService::new(app);
                if let Err(e) = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
            });
        }
    }
}
