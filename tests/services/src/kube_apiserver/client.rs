//! kube-rs clients for a [`KubeEndpoint`](super::KubeEndpoint): the admin's, and a
//! ServiceAccount's through the TokenRequest API, for tests that run a controller with only
//! the rights its manifests grant it.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PostParams};

use super::KubeEndpoint;

/// How long a requested ServiceAccount token lives (the API's minimum is 10 minutes).
const TOKEN_LIFETIME_SECONDS: i64 = 3600;

/// Why a client or a token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    /// The CA or URL was refused while building the client.
    #[error("cannot build a kube client for {url}: {detail}")]
    Config {
        /// The API URL.
        url: String,
        /// What was refused.
        detail: String,
    },
    /// The API refused or failed a call.
    #[error("{call} failed: {source}")]
    Api {
        /// Which call, with the object it named.
        call: String,
        /// kube's error (the API's status for a refusal).
        source: kube::Error,
    },
    /// The TokenRequest answer carried no token.
    #[error("the TokenRequest for ServiceAccount {namespace}/{name} returned no token")]
    NoToken {
        /// The ServiceAccount's namespace.
        namespace: String,
        /// The ServiceAccount's name.
        name: String,
    },
}

impl KubeEndpoint {
    /// A kube client authenticating as admin. Must be called inside a tokio runtime.
    pub fn client(&self) -> Result<kube::Client, KubeClientError> {
        self.client_with_token(&self.admin_token)
    }

    /// A kube client for this server authenticating with `token` (e.g. from
    /// [`KubeEndpoint::service_account_token`]). Must be called inside a tokio runtime.
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, KubeClientError> {
        let url = self.url();
        let config_error = |detail: String| KubeClientError::Config {
            url: url.clone(),
            detail,
        };
        let mut config = kube::Config::new(url.parse().map_err(|e| config_error(format!("{e}")))?);
        let ca = rustls::pki_types::pem::PemObject::from_pem_slice(self.ca_pem.as_bytes())
            .map(|der: rustls::pki_types::CertificateDer<'static>| der.to_vec())
            .map_err(|e| config_error(format!("the CA is not PEM: {e}")))?;
        config.root_cert = Some(vec![ca]);
        config.auth_info.token = Some(token.to_owned().into());
        config.default_namespace = "default".to_owned();
        kube::Client::try_from(config).map_err(|e| config_error(e.to_string()))
    }

    /// A bearer token for ServiceAccount `namespace/name` from the TokenRequest API (valid one
    /// hour), creating the ServiceAccount first when it does not exist (its namespace must).
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, KubeClientError> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client()?, namespace);
        let api = |call: &str| {
            let call = format!("{call} ServiceAccount {namespace}/{name}");
            move |source| KubeClientError::Api { call, source }
        };
        if accounts.get_opt(name).await.map_err(api("get"))?.is_none() {
            let account = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    ..ObjectMeta::default()
                },
                ..ServiceAccount::default()
            };
            accounts
                .create(&PostParams::default(), &account)
                .await
                .map_err(api("create"))?;
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(TOKEN_LIFETIME_SECONDS),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let answer = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(api("TokenRequest for"))?;
        answer
            .status
            .map(|status| status.token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| KubeClientError::NoToken {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
    }
}
