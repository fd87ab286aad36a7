//! What the drivers read of the cluster: a pod's annotations and resource requests, and the
//! NetworkAttachmentDefinitions its `k8s.v1.cni.cncf.io/networks` annotation names.
//!
//! These are plain values rather than `k8s-openapi` types so the crate stays free of any
//! Kubernetes client; the handler copies the few fields it needs from the API objects.

use std::collections::BTreeMap;

/// A pod, as far as VIFs are concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    /// `metadata.namespace`: the default namespace of the networks it names.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// Its containers' (and init containers') resources, in spec order.
    pub containers: Vec<ContainerResources>,
}

/// One container's `resources`: quantities as the API server holds them (`"1"`, `"2"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerResources {
    /// The container's name (for messages).
    pub name: String,
    /// `resources.requests`.
    pub requests: BTreeMap<String, String>,
    /// `resources.limits` (an extended resource given only as a limit is requested at it).
    pub limits: BTreeMap<String, String>,
}

impl ContainerResources {
    /// The requested quantity of `resource`: the request, else the limit.
    pub fn requested(&self, resource: &str) -> Option<&str> {
        self.requests
            .get(resource)
            .or_else(|| self.limits.get(resource))
            .map(String::as_str)
    }

    /// Every resource requested (requests, plus limits with no request), sorted by name.
    pub fn resources(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self
            .requests
            .keys()
            .chain(self.limits.keys())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }
}

/// A NetworkAttachmentDefinition (`k8s.cni.cncf.io/v1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkAttachment {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.annotations` (Kuryr's `openstack.org/kuryr-config` lives here).
    pub annotations: BTreeMap<String, String>,
    /// `spec.config`: a CNI network configuration (JSON text), when set.
    pub config: Option<String>,
}
