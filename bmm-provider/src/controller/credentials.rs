//! The credentials Secret (`endpoint`, `orgName`, `token`), re-read on every reconcile that
//! calls BMM; the client built from it, kept while the Secret's resourceVersion stays the same
//! (so its connection pool and TLS sessions are reused, and a rotated Secret gives a new one at
//! once); and the memory of tokens the API refused, so a 401 is retried only once the Secret
//! changes.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use nephrite_bmm::crd::SecretRef;

use crate::client::{BmmClient, ClientConfig, Token};

/// A client built from a Secret, with what identifies the token it carries.
#[derive(Clone)]
pub(crate) struct Credentials {
    /// The client.
    pub client: BmmClient,
    /// `namespace/name` of the Secret.
    pub secret: String,
    /// A fingerprint of the token (never the token).
    pub fingerprint: u64,
}

/// Tokens the API answered 401/403 to, per Secret, so the controllers do not call the API
/// again with the same token. Cheap to clone; clones share the memory.
#[derive(Debug, Clone, Default)]
pub struct RejectedTokens(Arc<Mutex<HashMap<String, u64>>>);

impl RejectedTokens {
    pub(super) fn is_rejected(&self, c: &Credentials) -> bool {
        self.0
            .lock()
            .map(|m| m.get(&c.secret) == Some(&c.fingerprint))
            .unwrap_or(false)
    }

    pub(super) fn reject(&self, c: &Credentials) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(c.secret.clone(), c.fingerprint);
        }
    }

    pub(super) fn accept(&self, c: &Credentials) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(&c.secret);
        }
    }
}

/// The clients built from Secrets, per `namespace/name`, with the resourceVersion they were
/// built from.
#[derive(Default)]
pub(super) struct ClientCache(Mutex<HashMap<String, (String, Credentials)>>);

impl ClientCache {
    fn get(&self, secret: &str, version: &str) -> Option<Credentials> {
        let cache = self.0.lock().ok()?;
        cache
            .get(secret)
            .filter(|(v, _)| v == version)
            .map(|(_, c)| c.clone())
    }

    fn put(&self, version: String, credentials: &Credentials) {
        if let Ok(mut cache) = self.0.lock() {
            cache.insert(credentials.secret.clone(), (version, credentials.clone()));
        }
    }
}

fn fingerprint(token: &str) -> u64 {
    let mut h = DefaultHasher::new();
    token.hash(&mut h);
    h.finish()
}

/// Reads the Secret `named` (or the default); `Err` carries the condition message.
pub(crate) async fn read(
    client: &Client,
    controller: &super::ControllerConfig,
    cache: &ClientCache,
    namespace: &str,
    named: Option<&SecretRef>,
) -> Result<Credentials, String> {
    let (ns, name) = match (named, controller.default_credentials.as_deref()) {
        (Some(r), _) => (
            r.namespace.clone().unwrap_or_else(|| namespace.to_string()),
            r.name.clone(),
        ),
        (None, Some(default)) => match default.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => (namespace.to_string(), default.to_string()),
        },
        (None, None) => {
            return Err(
                "spec.authentication.secretRef is not set and the controller has no default credentials"
                    .into(),
            );
        }
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = match secrets.get_opt(&name).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(format!("Secret {ns}/{name} does not exist")),
        Err(e) => return Err(format!("reading Secret {ns}/{name}: {e}")),
    };
    let version = secret.metadata.resource_version.clone().unwrap_or_default();
    if !version.is_empty()
        && let Some(credentials) = cache.get(&format!("{ns}/{name}"), &version)
    {
        return Ok(credentials);
    }
    let data = secret.data.unwrap_or_default();
    let string_data = secret.string_data.unwrap_or_default();
    let field = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .or_else(|| string_data.get(key).cloned())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("Secret {ns}/{name} has no key {key:?}"))
    };
    let token = field("token")?;
    let fingerprint = fingerprint(&token);
    let mut config = ClientConfig::new(field("endpoint")?, field("orgName")?, Token::new(token));
    config.ca_pem = data
        .get("caCert")
        .map(|v| v.0.clone())
        .or_else(|| string_data.get("caCert").map(|v| v.clone().into_bytes()));
    config.timeout = controller.request_timeout;
    config.retry = controller.retry;
    let client = BmmClient::new(config)
        .map_err(|e| format!("Secret {ns}/{name}: {e}"))?
        .with_metrics(controller.metrics.clone());
    let credentials = Credentials {
        client,
        secret: format!("{ns}/{name}"),
        fingerprint,
    };
    if !version.is_empty() {
        cache.put(version, &credentials);
    }
    Ok(credentials)
}

/// The credentials to call BMM with; when the Secret is unusable, `Ready=False` with the
/// reason is written to the object's status (if that changes it) and the answer is what to do
/// instead (a token the API refused waits for the Secret to change, without a call).
pub(super) async fn usable_or_report<K, S>(
    ctx: &super::Ctx,
    api: &Api<K>,
    (namespace, name): (&str, &str),
    named: Option<&SecretRef>,
    status: &mut S,
    written: Option<&S>,
    now: &str,
) -> Result<Result<Credentials, super::Next>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: super::Conditions + PartialEq + serde::Serialize,
{
    match read(&ctx.client, &ctx.config, &ctx.clients, namespace, named).await {
        Ok(c) if ctx.rejected.is_rejected(&c) => {
            Ok(Err(super::Next::After(ctx.config.dependency_poll)))
        }
        Ok(c) => Ok(Ok(c)),
        Err(message) => {
            super::set_not_ready(
                status.conditions_mut(),
                nephrite_bmm::conditions::reason::CREDENTIALS_INVALID,
                message,
                now,
            );
            super::report(api, name, status, written).await?;
            Ok(Err(super::Next::Change))
        }
    }
}
