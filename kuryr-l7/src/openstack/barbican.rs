//! The Barbican v1 client: the certificates of `TERMINATED_HTTPS` listeners, each a
//! `certificate` container of PEM secrets (`certificate`, `private_key`, `intermediates`), the
//! form Octavia's certificate managers read.
//!
//! Containers are named after what they hold ([`container_name`]: the cluster and a SHA-256 of
//! certificate and key), so a controller finds the ones it made after a restart, a changed
//! Secret becomes a new container (rotation: the listener is pointed at it, then the old one is
//! deleted), and nothing is ever stored twice.

use std::sync::Arc;

use nephrite_l7::model::Certificate;
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::session::{Endpoint, Session};

/// How many objects one list request asks for.
const PAGE: usize = 100;

/// The prefix of every container and secret name this controller gives in `cluster`.
pub fn name_prefix(cluster: &str) -> String {
    format!("kuryr-l7:{cluster}:")
}

/// The name of the container holding `certificate` in `cluster`: the prefix and the SHA-256
/// of the certificate chain and the key (hex), so the same Secret content is the same name.
pub fn container_name(cluster: &str, certificate: &Certificate) -> String {
    let mut digest = Sha256::new();
    digest.update(certificate.cert_pem.as_bytes());
    digest.update([0]);
    digest.update(certificate.key_pem.as_bytes());
    let hex: String = digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}{hex}", name_prefix(cluster))
}

/// A container as Barbican lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Container {
    /// Its reference (`http://…/v1/containers/<uuid>`), what a listener names.
    pub container_ref: String,
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its secrets.
    #[serde(default)]
    pub secret_refs: Vec<SecretRef>,
}

/// One secret of a container.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SecretRef {
    /// Its role in the container (`certificate`, `private_key`, `intermediates`).
    pub name: String,
    /// Its reference.
    pub secret_ref: String,
}

/// A secret as Barbican lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Secret {
    /// Its reference.
    pub secret_ref: String,
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
}

/// The Barbican v1 API (`/v1/…`) through a [`Session`].
#[derive(Debug, Clone)]
pub struct Barbican {
    session: Arc<Session>,
    endpoint: Endpoint,
}

impl Barbican {
    /// A client of the Barbican at `endpoint`.
    pub fn new(session: Arc<Session>, endpoint: Endpoint) -> Barbican {
        Barbican { session, endpoint }
    }

    async fn url(&self, path: &str) -> Result<String, ApiError> {
        Ok(format!(
            "{}/v1/{}",
            self.session
                .url_of(&self.endpoint)
                .await?
                .trim_end_matches('/')
                .trim_end_matches("/v1"),
            path.trim_start_matches('/')
        ))
    }

    /// Every object of `collection` (`containers`, `secrets`) whose name starts with `prefix`,
    /// page by page.
    async fn list<T: serde::de::DeserializeOwned + Named>(
        &self,
        collection: &str,
        prefix: &str,
    ) -> Result<Vec<T>, ApiError> {
        let mut found = Vec::new();
        let mut offset = 0;
        loop {
            let url = self
                .url(&format!("{collection}?limit={PAGE}&offset={offset}"))
                .await?;
            let answer = self.session.send(Method::GET, url, None).await?.success()?;
            let page: Vec<T> = answer.field(collection)?;
            let count = page.len();
            found.extend(
                page.into_iter()
                    .filter(|o| o.name().is_some_and(|n| n.starts_with(prefix))),
            );
            if count < PAGE {
                return Ok(found);
            }
            offset += count;
        }
    }

    /// The containers whose name starts with `prefix`.
    pub async fn containers(&self, prefix: &str) -> Result<Vec<Container>, ApiError> {
        self.list("containers", prefix).await
    }

    /// The secrets whose name starts with `prefix`.
    pub async fn secrets(&self, prefix: &str) -> Result<Vec<Secret>, ApiError> {
        self.list("secrets", prefix).await
    }

    /// One container; None when it does not exist.
    pub async fn container(&self, container_ref: &str) -> Result<Option<Container>, ApiError> {
        let answer = self
            .session
            .send(Method::GET, container_ref.to_owned(), None)
            .await?;
        if answer.status == 404 {
            return Ok(None);
        }
        answer.success()?.json().map(Some)
    }

    /// A secret's payload (PEM text).
    pub async fn payload(&self, secret_ref: &str) -> Result<String, ApiError> {
        let url = format!("{}/payload", secret_ref.trim_end_matches('/'));
        Ok(self
            .session
            .send(Method::GET, url, None)
            .await?
            .success()?
            .body)
    }

    async fn store_secret(
        &self,
        name: String,
        payload: &str,
        secret_type: &str,
    ) -> Result<String, ApiError> {
        let body = json!({
            "name": name,
            "payload": payload,
            "payload_content_type": "text/plain",
            "secret_type": secret_type,
        });
        let url = self.url("secrets").await?;
        let answer = self
            .session
            .send(Method::POST, url, Some(&body))
            .await?
            .success()?;
        answer.field("secret_ref")
    }

    /// Store `certificate` as a `certificate` container named `name`: the first certificate
    /// of the chain as `certificate`, the rest as `intermediates`, the key as `private_key`.
    /// Returns the container's reference.
    pub async fn store_certificate(
        &self,
        name: &str,
        certificate: &Certificate,
    ) -> Result<String, ApiError> {
        let (leaf, intermediates) = split_chain(&certificate.cert_pem);
        let mut refs = vec![json!({
            "name": "certificate",
            "secret_ref": self.store_secret(format!("{name}/certificate"), &leaf, "certificate").await?,
        })];
        refs.push(json!({
            "name": "private_key",
            "secret_ref": self
                .store_secret(format!("{name}/private_key"), &certificate.key_pem, "private")
                .await?,
        }));
        if !intermediates.is_empty() {
            refs.push(json!({
                "name": "intermediates",
                "secret_ref": self
                    .store_secret(format!("{name}/intermediates"), &intermediates, "certificate")
                    .await?,
            }));
        }
        let body = json!({"type": "certificate", "name": name, "secret_refs": refs});
        let url = self.url("containers").await?;
        let answer = self
            .session
            .send(Method::POST, url, Some(&body))
            .await?
            .success()?;
        answer.field("container_ref")
    }

    /// Delete a container and then its secrets (a 404 counts as deleted).
    pub async fn delete_container(&self, container: &Container) -> Result<(), ApiError> {
        self.delete(&container.container_ref).await?;
        for secret in &container.secret_refs {
            self.delete(&secret.secret_ref).await?;
        }
        Ok(())
    }

    /// Delete one object by reference (a 404 counts as deleted).
    pub async fn delete(&self, reference: &str) -> Result<(), ApiError> {
        let answer = self
            .session
            .send(Method::DELETE, reference.to_owned(), None)
            .await?;
        if answer.status == 404 {
            return Ok(());
        }
        answer.success().map(|_| ())
    }
}

/// What a list filters by.
trait Named {
    fn name(&self) -> Option<&str>;
}

impl Named for Container {
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

impl Named for Secret {
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// A PEM chain as its first certificate and the rest (each block ending with a newline).
pub fn split_chain(chain: &str) -> (String, String) {
    const END: &str = "-----END CERTIFICATE-----";
    let mut blocks = chain
        .split_inclusive(END)
        .map(str::trim)
        .filter(|b| b.contains("-----BEGIN"))
        .map(|b| format!("{b}\n"));
    let leaf = blocks.next().unwrap_or_default();
    (leaf, blocks.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(cert_pem: &str, key_pem: &str) -> Certificate {
        Certificate {
            hosts: vec!["shop.example.com".to_owned()],
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            origin: "Secret shop/tls".to_owned(),
        }
    }

    #[test]
    fn a_container_is_named_by_cluster_and_content() {
        let a = container_name("c1", &certificate("CERT", "KEY"));
        assert!(a.starts_with("kuryr-l7:c1:"), "{a}");
        assert_eq!(a.len(), "kuryr-l7:c1:".len() + 64);
        assert_eq!(a, container_name("c1", &certificate("CERT", "KEY")));
        assert_ne!(a, container_name("c2", &certificate("CERT", "KEY")));
        assert_ne!(a, container_name("c1", &certificate("CERT", "KEY2")));
        // The separator keeps "AB" + "C" apart from "A" + "BC".
        assert_ne!(
            container_name("c", &certificate("AB", "C")),
            container_name("c", &certificate("A", "BC"))
        );
    }

    #[test]
    fn a_chain_splits_into_its_leaf_and_the_intermediates() {
        let one = "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n";
        let two = "-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----\n";
        let three = "-----BEGIN CERTIFICATE-----\nCCC\n-----END CERTIFICATE-----";
        assert_eq!(split_chain(one), (one.to_owned(), String::new()));
        assert_eq!(
            split_chain(&format!("{one}{two}\n{three}\n")),
            (one.to_owned(), format!("{two}{three}\n"))
        );
    }
}
