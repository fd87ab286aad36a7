//! `explain --kube`: the objects `explain` needs of the cluster (Pods,
//! Namespaces, NetworkPolicies, AdminNetworkPolicies,
//! BaselineAdminNetworkPolicies), listed once from the API server the
//! caller's configuration names (in-cluster or `KUBECONFIG`). Services and
//! their endpoints are not listed: the agent's own load balancers are
//! what it renders. A kind the cluster does not serve (no ANP CRDs) has
//! none.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::ListParams;

use crate::northbound::Objects;
use crate::northbound::admin::{AdminNetworkPolicy, BaselineAdminNetworkPolicy};

/// Why the cluster's objects could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("listing {kind} from the API server: {source}")]
pub struct ListError {
    /// The kind.
    pub kind: String,
    /// kube's error.
    pub source: kube::Error,
}

async fn all<K>(client: &kube::Client) -> Result<Vec<K>, ListError>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(list.items),
        // the cluster does not serve the kind: it has none
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(source) => Err(ListError {
            kind: K::kind(&()).to_string(),
            source,
        }),
    }
}

/// The objects of the cluster `client` reaches, as `explain` reads them.
///
/// # Errors
/// A kind the cluster serves could not be listed (naming it).
pub async fn list_objects(client: &kube::Client) -> Result<Objects, ListError> {
    Ok(Objects {
        pods: all::<Pod>(client).await?,
        namespaces: all::<Namespace>(client).await?,
        policies: all::<NetworkPolicy>(client).await?,
        admin_policies: all::<AdminNetworkPolicy>(client).await?,
        baseline_policies: all::<BaselineAdminNetworkPolicy>(client).await?,
        ..Objects::default()
    })
}
