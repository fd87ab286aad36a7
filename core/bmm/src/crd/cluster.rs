//! `NvidiaBMMCluster` and `NvidiaBMMClusterTemplate`.

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use nephrite_krm::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ApiEndpoint, Authentication, FailureDomain, Initialization};

/// The regular expression the CRD schema uses for an IPv4 CIDR.
pub const CIDR_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/([0-9]|[12][0-9]|3[0-2])$";
/// The regular expression for a port or port range (`6443`, `30000-32767`).
pub const PORT_RANGE_PATTERN: &str = r"^[0-9]{1,5}(-[0-9]{1,5})?$";

/// The desired network of a workload cluster in one BMM site.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "NvidiaBMMCluster",
    plural = "nvidiabmmclusters",
    namespaced,
    status = "NvidiaBMMClusterStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta1"),
    category = "cluster-api",
    shortname = "bmmc",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"VPC","type":"string","jsonPath":".status.vpcID"}"#,
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaBMMClusterSpec {
    /// The BMM site, by name or id.
    pub site_ref: SiteRef,
    /// The tenant; `tenant/current` of the org when absent.
    #[serde(rename = "tenantID", default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The VPC.
    pub vpc: VpcSpec,
    /// The subnets, at least one.
    #[schemars(length(min = 1))]
    pub subnets: Vec<SubnetSpec>,
    /// A user-supplied IP block the subnets are carved from; never deleted by the provider.
    /// When absent the provider creates the smallest block covering the subnets and deletes it
    /// with the cluster.
    #[serde(rename = "ipBlockID", default, skip_serializing_if = "Option::is_none")]
    pub ip_block_id: Option<String>,
    /// Where the workload cluster's API server answers (a VIP or DNS name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// The credentials Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
}

/// The site, by name or by id (at least one).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "has(self.name) || has(self.id)", "message": "siteRef needs name or id"}]))]
pub struct SiteRef {
    /// The site's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The site's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// How a VPC's network is virtualised (the API's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum NetworkVirtualizationType {
    /// Software-defined networking.
    #[default]
    #[serde(rename = "ETHERNET_VIRTUALIZER")]
    EthernetVirtualizer,
    /// Flat network namespace, for DPU workloads.
    #[serde(rename = "FNN")]
    Fnn,
}

impl NetworkVirtualizationType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkVirtualizationType::EthernetVirtualizer => "ETHERNET_VIRTUALIZER",
            NetworkVirtualizationType::Fnn => "FNN",
        }
    }
}

/// The VPC of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VpcSpec {
    /// The VPC's name (found by this exact name; 2–256 characters).
    #[schemars(length(min = 2, max = 256))]
    pub name: String,
    /// Virtualisation type; `ETHERNET_VIRTUALIZER` when absent.
    #[serde(default)]
    pub network_virtualization_type: NetworkVirtualizationType,
    /// Labels put on the VPC (the API allows 10 in total, one is the provider's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 9))]
    pub labels: Option<BTreeMap<String, String>>,
    /// An optional network security group attached to the VPC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_security_group: Option<NetworkSecurityGroupSpec>,
}

/// A network security group and its rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkSecurityGroupSpec {
    /// The NSG's name (2–256 characters).
    #[schemars(length(min = 2, max = 256))]
    pub name: String,
    /// Its rules.
    #[serde(default)]
    pub rules: Vec<SecurityRule>,
}

/// Rule direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RuleDirection {
    /// Inbound traffic.
    Ingress,
    /// Outbound traffic.
    Egress,
}

/// Rule protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RuleProtocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP (no ports).
    Icmp,
    /// Any protocol (no ports).
    Any,
}

/// Rule action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RuleAction {
    /// Allow the traffic.
    Permit,
    /// Drop the traffic.
    Deny,
}

/// One NSG rule. A missing CIDR means `0.0.0.0/0`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "!has(self.portRange) || self.protocol == 'TCP' || self.protocol == 'UDP'", "message": "portRange is only allowed for TCP and UDP"}]))]
pub struct SecurityRule {
    /// The rule's name.
    pub name: String,
    /// INGRESS or EGRESS.
    pub direction: RuleDirection,
    /// TCP, UDP, ICMP or ANY.
    pub protocol: RuleProtocol,
    /// PERMIT or DENY.
    pub action: RuleAction,
    /// Destination port or range (`6443`, `30000-32767`); TCP/UDP only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(PORT_RANGE_PATTERN))]
    pub port_range: Option<String>,
    /// Source CIDR; `0.0.0.0/0` when absent.
    #[serde(
        rename = "sourceCIDR",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(pattern(CIDR_PATTERN))]
    pub source_cidr: Option<String>,
    /// Destination CIDR; `0.0.0.0/0` when absent.
    #[serde(
        rename = "destinationCIDR",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(pattern(CIDR_PATTERN))]
    pub destination_cidr: Option<String>,
    /// Priority 0–60000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 60000))]
    pub priority: Option<i32>,
}

/// What a subnet is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SubnetRole {
    /// Control-plane machines.
    ControlPlane,
    /// Worker machines.
    Worker,
}

/// One subnet of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SubnetSpec {
    /// The subnet's name, unique in the cluster.
    #[schemars(length(min = 2, max = 256))]
    pub name: String,
    /// The IPv4 CIDR; its prefix length is what the provider asks the API for.
    #[schemars(pattern(CIDR_PATTERN))]
    pub cidr: String,
    /// control-plane or worker.
    pub role: SubnetRole,
    /// Labels (kept for the user; subnets carry no labels in the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// What the provider observed and decided for a cluster.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaBMMClusterStatus {
    /// Deprecated readiness flag, still read by Cluster API.
    #[serde(default)]
    pub ready: bool,
    /// v1beta2 readiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// The resolved site id.
    #[serde(rename = "siteID", default, skip_serializing_if = "Option::is_none")]
    pub site_id: Option<String>,
    /// The resolved tenant id.
    #[serde(rename = "tenantID", default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The VPC's id.
    #[serde(rename = "vpcID", default, skip_serializing_if = "Option::is_none")]
    pub vpc_id: Option<String>,
    /// Ids of the network objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_status: Option<NetworkStatus>,
    /// The failure domains (the site).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<FailureDomain>,
    /// Conditions: VPCReady, SubnetsReady, NSGReady, Ready, Paused, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Ids of the cluster's network objects.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct NetworkStatus {
    /// Subnet name → subnet id.
    #[serde(
        rename = "subnetIDs",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub subnet_ids: BTreeMap<String, String>,
    /// Subnet name → the prefix the platform allocated.
    #[serde(
        rename = "subnetPrefixes",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub subnet_prefixes: BTreeMap<String, String>,
    /// The NSG's id.
    #[serde(rename = "nsgID", default, skip_serializing_if = "Option::is_none")]
    pub nsg_id: Option<String>,
    /// The IP block's id.
    #[serde(rename = "ipBlockID", default, skip_serializing_if = "Option::is_none")]
    pub ip_block_id: Option<String>,
}

/// A template for `NvidiaBMMCluster`s (for ClusterClass).
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "NvidiaBMMClusterTemplate",
    plural = "nvidiabmmclustertemplates",
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
pub struct NvidiaBMMClusterTemplateSpec {
    /// The template.
    pub template: NvidiaBMMClusterTemplateResource,
}

/// `spec.template` of a cluster template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NvidiaBMMClusterTemplateResource {
    /// The spec of the clusters made from it.
    pub spec: NvidiaBMMClusterSpec,
}
