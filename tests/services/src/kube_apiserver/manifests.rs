//! A daemon's `deploy/` manifests applied to the real API server as its operator would apply
//! them, and the daemon's own credentials taken from them.
//!
//! The acceptance tests run each daemon with only what its manifests grant: they apply the
//! ServiceAccount, Roles, ClusterRoles and bindings (and Namespaces) of the daemon's YAML with
//! server-side apply, then mint that ServiceAccount's token. A verb missing from the manifests
//! then fails the daemon's scenario, as it would in a cluster. Workload kinds (Deployments,
//! DaemonSets, …) are skipped: no kubelet runs here.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};

use super::KubeEndpoint;
use super::client::KubeClientError;

/// The field manager of the applies.
const MANAGER: &str = "nephrite-tests";

/// The kinds [`KubeEndpoint::apply_access`] applies: `(group, version, kind, plural,
/// namespaced)`.
const ACCESS_KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Namespace", "namespaces", false),
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
];

/// What applying a manifest refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A document is not YAML, or not an object with `apiVersion`, `kind` and `metadata.name`.
    #[error("{source_name}, document {index}: {detail}")]
    Invalid {
        /// Where the YAML came from (a file name).
        source_name: String,
        /// The document's index, from 0.
        index: usize,
        /// What is wrong with it.
        detail: String,
    },
    /// The API refused an apply, or a client could not be had.
    #[error(transparent)]
    Client(#[from] KubeClientError),
}

/// A ServiceAccount a manifest defines, with a token minted for it.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub name: String,
    /// A bearer token for it (TokenRequest, valid an hour).
    pub token: String,
    /// A kubeconfig authenticating with that token.
    pub kubeconfig: String,
}

impl KubeEndpoint {
    /// Applies, as admin, every Namespace, ServiceAccount, Role, ClusterRole, RoleBinding and
    /// ClusterRoleBinding in `yaml` (multi-document; other kinds are skipped), then mints a
    /// token for the ServiceAccount named `account` (`namespace/name`), which the manifest must
    /// define. `source_name` names the YAML in errors.
    pub async fn apply_access(
        &self,
        source_name: &str,
        yaml: &str,
        account: &str,
    ) -> Result<Credentials, ManifestError> {
        let client = self.client()?;
        let mut defines_account = false;
        for (index, document) in serde_norway::Deserializer::from_str(yaml).enumerate() {
            let invalid = |detail: String| ManifestError::Invalid {
                source_name: source_name.to_owned(),
                index,
                detail,
            };
            let value = <serde_json::Value as serde::Deserialize>::deserialize(document)
                .map_err(|e| invalid(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let object: DynamicObject =
                serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
            let Some(types) = object.types.as_ref() else {
                return Err(invalid("no apiVersion and kind".to_owned()));
            };
            let (group, version) = types
                .api_version
                .split_once('/')
                .unwrap_or(("", types.api_version.as_str()));
            let Some(&(_, _, kind, plural, namespaced)) = ACCESS_KINDS
                .iter()
                .find(|(g, v, k, _, _)| *g == group && *v == version && *k == types.kind)
            else {
                continue;
            };
            let name = object
                .metadata
                .name
                .clone()
                .ok_or_else(|| invalid(format!("a {kind} without metadata.name")))?;
            let namespace = object.metadata.namespace.clone();
            if kind == "ServiceAccount"
                && format!("{}/{name}", namespace.as_deref().unwrap_or("default")) == account
            {
                defines_account = true;
            }
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let api: Api<DynamicObject> = match (namespaced, namespace.as_deref()) {
                (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
                (true, None) => Api::default_namespaced_with(client.clone(), &resource),
                (false, _) => Api::all_with(client.clone(), &resource),
            };
            api.patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(|source| KubeClientError::Api {
                call: format!("apply {kind} {name} from {source_name}"),
                source,
            })?;
        }
        let (namespace, name) = account.split_once('/').unwrap_or(("default", account));
        if !defines_account {
            return Err(ManifestError::Invalid {
                source_name: source_name.to_owned(),
                index: 0,
                detail: format!("no ServiceAccount {namespace}/{name} in the manifest"),
            });
        }
        let token = self.service_account_token(namespace, name).await?;
        let kubeconfig = self.kubeconfig_for(&format!("{namespace}/{name}"), &token);
        Ok(Credentials {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            token,
            kubeconfig,
        })
    }
}
