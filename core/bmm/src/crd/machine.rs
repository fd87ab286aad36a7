//! `NvidiaBMMMachine` and `NvidiaBMMMachineTemplate`.

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use nephrite_krm::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Initialization, MachineAddress};

/// The desired bare-metal instance behind a Cluster API `Machine`.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "NvidiaBMMMachine",
    plural = "nvidiabmmmachines",
    namespaced,
    status = "NvidiaBMMMachineStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta1"),
    category = "cluster-api",
    shortname = "bmmm",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.instanceState"}"#,
    printcolumn = r#"{"name":"ProviderID","type":"string","jsonPath":".spec.providerID"}"#,
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaBMMMachineSpec {
    /// `nvidia-bmm://<site-id>/<instance-id>`, written by the provider.
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// What to allocate: an instance type or one targeted machine.
    pub instance_type: InstanceTypeRef,
    /// The operating system to install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_system: Option<OperatingSystem>,
    /// The instance's network interfaces.
    pub network: MachineNetwork,
    /// SSH key group ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_key_groups: Vec<String>,
    /// Labels put on the instance (the API allows 10 in total, one is the provider's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 9))]
    pub labels: Option<BTreeMap<String, String>>,
}

/// An instance type or a targeted machine (at least one).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.id) || has(self.machineID)", "message": "instanceType needs id or machineID"}]))]
pub struct InstanceTypeRef {
    /// The instance type's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A specific machine (targeted instance creation).
    #[serde(rename = "machineID", default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// Allow a machine with health alerts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unhealthy_machine: Option<bool>,
}

/// The operating system of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperatingSystem {
    /// The operating system's id in BMM.
    pub id: String,
}

/// The network of a machine: a primary subnet and additional interfaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineNetwork {
    /// The cluster subnet of the primary interface.
    #[schemars(length(min = 1))]
    pub subnet_name: String,
    /// More interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_interfaces: Vec<AdditionalInterface>,
}

/// One additional interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalInterface {
    /// The cluster subnet it is on.
    #[schemars(length(min = 1))]
    pub subnet_name: String,
    /// A physical function (true) or a virtual one.
    #[serde(default)]
    pub is_physical: bool,
    /// The virtual function, 1–16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16))]
    pub virtual_function_id: Option<i32>,
}

/// What the provider observed for a machine.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaBMMMachineStatus {
    /// Deprecated readiness flag.
    #[serde(default)]
    pub ready: bool,
    /// v1beta2 readiness; `provisioned` never goes back to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// The instance's id.
    #[serde(
        rename = "instanceID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub instance_id: Option<String>,
    /// The machine the instance runs on.
    #[serde(rename = "machineID", default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// The instance's BMM status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_state: Option<String>,
    /// InternalIP and Hostname addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// The failure domain (site) the machine is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// Conditions: InstanceProvisioned, NetworkConfigured, Ready, Paused, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// A template for `NvidiaBMMMachine`s (MachineDeployments clone it).
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "NvidiaBMMMachineTemplate",
    plural = "nvidiabmmmachinetemplates",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1beta1"),
    category = "cluster-api",
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
pub struct NvidiaBMMMachineTemplateSpec {
    /// The template.
    pub template: NvidiaBMMMachineTemplateResource,
}

/// `spec.template` of a machine template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NvidiaBMMMachineTemplateResource {
    /// The spec of the machines made from it.
    pub spec: NvidiaBMMMachineSpec,
}
