//! The API's request and response bodies, as the provider reads and writes them.
//!
//! Responses are read tolerantly (unknown fields ignored, most fields optional) because the
//! platform adds fields over time; requests carry exactly the fields the spec declares.
//! Field names and enums follow `openapi.yaml`; the tests validate every body against it.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// An object the API serves at `{PATH}` (list, create) and `{PATH}/{id}` (get, delete), with a
/// name the client matches exactly.
pub trait ApiObject: DeserializeOwned {
    /// The collection's path under the base URL, e.g. `vpc`.
    const PATH: &'static str;
    /// The object's name.
    fn name(&self) -> &str;
}

macro_rules! api_object {
    ($($ty:ty => $path:literal),* $(,)?) => {
        $(impl ApiObject for $ty {
            const PATH: &'static str = $path;
            fn name(&self) -> &str {
                &self.name
            }
        })*
    };
}

api_object! {
    Site => "site",
    IpBlock => "ipblock",
    Vpc => "vpc",
    Subnet => "subnet",
    Nsg => "network-security-group",
    Instance => "instance",
}

/// `CarbideAPIError`: `{source, message, data}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// Always `carbide`.
    #[serde(default)]
    pub source: String,
    /// What went wrong.
    #[serde(default)]
    pub message: String,
    /// Details (validation errors by field, the existing object's id on a conflict, …).
    #[serde(default)]
    pub data: Option<serde_json::Value>,
}

/// The `X-Pagination` header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pagination {
    /// The page returned (from 1).
    pub page_number: u32,
    /// Its size.
    pub page_size: u32,
    /// Objects matching the query, over all pages.
    pub total: u64,
    /// The ordering.
    #[serde(default)]
    pub order_by: Option<String>,
}

/// `Tenant`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    /// Its id.
    pub id: String,
    /// The org.
    #[serde(default)]
    pub org: Option<String>,
}

/// `Site`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Site {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Pending / Registered / Error.
    #[serde(default)]
    pub status: Option<String>,
}

/// `IpBlock`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpBlock {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// `Public` or `DatacenterOnly` (responses; requests say `Datacenter Only`).
    #[serde(default)]
    pub routing_type: Option<String>,
    /// Network address.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Prefix length.
    #[serde(default)]
    pub prefix_length: Option<u8>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
}

/// `IpBlockCreateRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpBlockCreateRequest {
    /// Name.
    pub name: String,
    /// Site.
    pub site_id: String,
    /// `Public` or `Datacenter Only`.
    pub routing_type: String,
    /// Network address.
    pub prefix: String,
    /// Prefix length.
    pub prefix_length: u8,
    /// `IPv4`.
    pub protocol_version: String,
}

/// `VPC`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Vpc {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// Its tenant.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// Virtualisation type.
    #[serde(default)]
    pub network_virtualization_type: Option<String>,
    /// The attached NSG.
    #[serde(default)]
    pub network_security_group_id: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
}

/// `VpcCreateRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VpcCreateRequest {
    /// Client-chosen id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Name.
    pub name: String,
    /// Site.
    pub site_id: String,
    /// ETHERNET_VIRTUALIZER or FNN.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_virtualization_type: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `VpcUpdateRequest` (only the NSG attachment is used).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VpcUpdateRequest {
    /// The NSG to attach, `null` to detach.
    pub network_security_group_id: Option<String>,
}

/// `Subnet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its VPC.
    #[serde(default)]
    pub vpc_id: Option<String>,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// The allocated prefix.
    #[serde(default)]
    pub ipv4_prefix: Option<String>,
    /// The IP block.
    #[serde(default)]
    pub ipv4_block_id: Option<String>,
    /// Prefix length.
    #[serde(default)]
    pub prefix_length: Option<u8>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
}

/// `SubnetCreateRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetCreateRequest {
    /// Name.
    pub name: String,
    /// VPC.
    pub vpc_id: String,
    /// IP block.
    pub ipv4_block_id: String,
    /// Prefix length.
    pub prefix_length: u8,
}

/// `NetworkSecurityGroupRule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NsgRule {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// INGRESS / EGRESS.
    pub direction: String,
    /// Source ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_port_range: Option<String>,
    /// Destination ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port_range: Option<String>,
    /// TCP / UDP / ICMP / ANY.
    pub protocol: String,
    /// PERMIT / DENY.
    pub action: String,
    /// Priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Source prefix.
    pub source_prefix: String,
    /// Destination prefix.
    pub destination_prefix: String,
}

/// `NetworkSecurityGroup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nsg {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
    /// Rules.
    #[serde(default)]
    pub rules: Vec<NsgRule>,
    /// Labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `NetworkSecurityGroupCreateRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NsgCreateRequest {
    /// Name.
    pub name: String,
    /// Site.
    pub site_id: String,
    /// Rules.
    pub rules: Vec<NsgRule>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `Interface` of an instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    /// Its id.
    #[serde(default)]
    pub id: Option<String>,
    /// Its subnet.
    #[serde(default)]
    pub subnet_id: Option<String>,
    /// Physical function.
    #[serde(default)]
    pub is_physical: Option<bool>,
    /// Addresses.
    #[serde(default)]
    pub ip_addresses: Vec<String>,
    /// Its MAC address.
    #[serde(default)]
    pub mac_address: Option<String>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
}

/// `InterfaceCreateRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceCreateRequest {
    /// Subnet.
    pub subnet_id: String,
    /// Physical function.
    pub is_physical: bool,
    /// Virtual function 1–16.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_function_id: Option<i32>,
}

/// `Instance`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its VPC.
    #[serde(default)]
    pub vpc_id: Option<String>,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// Its machine.
    #[serde(default)]
    pub machine_id: Option<String>,
    /// Its instance type.
    #[serde(default)]
    pub instance_type_id: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Interfaces.
    #[serde(default)]
    pub interfaces: Vec<Interface>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
    /// The statuses it went through, with when (newest first, as the API lists them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_history: Vec<StatusDetail>,
    /// When it was created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

impl Instance {
    /// How long it took from its creation to `Ready`, by its status history (`None` until it
    /// is Ready, or when the times are missing or unreadable).
    pub fn provisioning_time(&self) -> Option<std::time::Duration> {
        let created: jiff::Timestamp = self.created.as_deref()?.parse().ok()?;
        let ready: jiff::Timestamp = self
            .status_history
            .iter()
            .filter(|d| d.status.as_deref() == Some("Ready"))
            .filter_map(|d| d.created.as_deref()?.parse().ok())
            .min()?;
        std::time::Duration::try_from(ready.duration_since(created)).ok()
    }
}

/// `InstanceCreateRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceCreateRequest {
    /// Name.
    pub name: String,
    /// Tenant.
    pub tenant_id: String,
    /// Instance type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_type_id: Option<String>,
    /// Targeted machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// VPC.
    pub vpc_id: String,
    /// User data (cloud-init).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// Operating system.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operating_system_id: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Interfaces.
    pub interfaces: Vec<InterfaceCreateRequest>,
    /// SSH key groups.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ssh_key_group_ids: Vec<String>,
    /// Allow an unhealthy machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_unhealthy_machine: Option<bool>,
}

/// `StatusDetail`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusDetail {
    /// The status.
    #[serde(default)]
    pub status: Option<String>,
    /// Why.
    #[serde(default)]
    pub message: Option<String>,
    /// When.
    #[serde(default)]
    pub created: Option<String>,
}

/// `InstanceType`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceType {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
}

/// `Machine`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// Its id.
    pub id: String,
    /// Its site.
    #[serde(default)]
    pub site_id: Option<String>,
    /// Its instance type.
    #[serde(default)]
    pub instance_type_id: Option<String>,
    /// The instance on it.
    #[serde(default)]
    pub instance_id: Option<String>,
    /// Status.
    #[serde(default)]
    pub status: Option<String>,
    /// Its network interfaces, with the addresses its instance was given.
    #[serde(default)]
    pub machine_interfaces: Vec<MachineInterface>,
}

/// `MachineInterface`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineInterface {
    /// The host name the platform gave it.
    #[serde(default)]
    pub hostname: Option<String>,
    /// Whether it is the machine's primary interface.
    #[serde(default)]
    pub is_primary: Option<bool>,
    /// Its MAC address.
    #[serde(default)]
    pub mac_address: Option<String>,
    /// Addresses.
    #[serde(default)]
    pub ip_addresses: Vec<String>,
}

/// `Tray`: a component of a rack; a compute tray's `componentId` is its machine's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tray {
    /// Its id.
    pub id: String,
    /// The component in it (a machine's id for a compute tray).
    #[serde(default)]
    pub component_id: Option<String>,
    /// `compute`, `switch` or `powershelf`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// `on` or `off` (other values as the platform reports them).
    #[serde(default)]
    pub power_state: Option<String>,
}
