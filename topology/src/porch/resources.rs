//! The Kubernetes resources the Porch backend reads and writes, as dynamic API resources.

use kube::api::ApiResource;
use nephrite_krm::Gvk;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    Gvk::new(group, version, kind).api_resource(plural)
}

/// `topology.nephio.org/v1alpha1` NFTopology (namespaced).
pub fn nf_topology() -> ApiResource {
    resource(
        "topology.nephio.org",
        "v1alpha1",
        "NFTopology",
        "nftopologies",
    )
}

/// `topology.nephio.org/v1alpha1` NFClass (cluster scoped).
pub fn nf_class() -> ApiResource {
    resource("topology.nephio.org", "v1alpha1", "NFClass", "nfclasses")
}

/// `topology.nephio.org/v1alpha1` NFDeployedTopology (namespaced).
pub fn nf_deployed_topology() -> ApiResource {
    resource(
        "topology.nephio.org",
        "v1alpha1",
        "NFDeployedTopology",
        "nfdeployedtopologies",
    )
}

/// `config.porch.kpt.dev/v1alpha2` PackageVariantSet.
pub fn package_variant_set() -> ApiResource {
    resource(
        "config.porch.kpt.dev",
        "v1alpha2",
        "PackageVariantSet",
        "packagevariantsets",
    )
}

/// `porch.kpt.dev/v1alpha1` PackageRevision.
pub fn package_revision() -> ApiResource {
    resource(
        "porch.kpt.dev",
        "v1alpha1",
        "PackageRevision",
        "packagerevisions",
    )
}

/// `infra.nephio.org/v1alpha1` WorkloadCluster.
pub fn workload_cluster() -> ApiResource {
    resource(
        "infra.nephio.org",
        "v1alpha1",
        "WorkloadCluster",
        "workloadclusters",
    )
}

/// `req.nephio.org/v1alpha1` Capacity.
pub fn capacity() -> ApiResource {
    resource("req.nephio.org", "v1alpha1", "Capacity", "capacities")
}
