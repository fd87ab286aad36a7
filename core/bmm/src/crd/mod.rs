//! The provider's custom resources, group `infrastructure.cluster.x-k8s.io`, version `v1beta1`.
//!
//! Field names follow the reference provider (`siteRef`, `tenantID`, `vpc`, `subnets[]`,
//! `instanceType`, …) and the enums are the BMM API's own spellings, so what the CRD schema
//! accepts is what the API accepts. Every CRD carries the contract label
//! `cluster.x-k8s.io/v1beta2: v1beta1`, which Cluster API reads to pick the served version.

mod cluster;
mod common;
mod machine;

pub use cluster::{
    NetworkSecurityGroupSpec, NetworkStatus, NetworkVirtualizationType, NvidiaBMMCluster,
    NvidiaBMMClusterSpec, NvidiaBMMClusterStatus, NvidiaBMMClusterTemplate,
    NvidiaBMMClusterTemplateResource, NvidiaBMMClusterTemplateSpec, RuleAction, RuleDirection,
    RuleProtocol, SecurityRule, SiteRef, SubnetRole, SubnetSpec, VpcSpec,
};
pub use common::{
    ApiEndpoint, Authentication, FailureDomain, Initialization, MachineAddress, MachineAddressType,
    SecretRef,
};
pub use machine::{
    AdditionalInterface, InstanceTypeRef, MachineNetwork, NvidiaBMMMachine, NvidiaBMMMachineSpec,
    NvidiaBMMMachineStatus, NvidiaBMMMachineTemplate, NvidiaBMMMachineTemplateResource,
    NvidiaBMMMachineTemplateSpec, OperatingSystem,
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_core::CustomResourceExt;

/// The API group of every provider resource.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The served and stored version.
pub const VERSION: &str = "v1beta1";
/// `apiVersion` of the provider's objects.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
/// The Cluster API contract label each CRD carries (value: the served versions).
pub const CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";

/// The four CRDs, in the order `bmm-provider crds` prints them.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        NvidiaBMMCluster::crd(),
        NvidiaBMMClusterTemplate::crd(),
        NvidiaBMMMachine::crd(),
        NvidiaBMMMachineTemplate::crd(),
    ]
}

/// JSON schema for a `conditions` list of `metav1.Condition`s, as Cluster API declares it.
pub(crate) fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "Conditions (metav1.Condition) describing the observed state.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string", "maxLength": 316},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "reason": {"type": "string", "maxLength": 1024},
                "message": {"type": "string", "maxLength": 32768}
            }
        }
    })
}

#[cfg(test)]
mod tests;
