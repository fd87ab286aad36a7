//! Types shared by the cluster and machine resources.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `controlPlaneEndpoint`: where the workload cluster's API server answers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ApiEndpoint {
    /// Host name or IP address; empty means not set yet.
    #[serde(default)]
    pub host: String,
    /// TCP port; 0 means not set yet.
    #[serde(default)]
    #[schemars(range(min = 0, max = 65535))]
    pub port: i32,
}

impl ApiEndpoint {
    /// Whether both host and port are set (Cluster API's "valid" endpoint).
    pub fn is_valid(&self) -> bool {
        !self.host.trim().is_empty() && self.port > 0 && self.port <= 65535
    }
}

/// `authentication`: where the BMM credentials live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Authentication {
    /// The Secret with keys `endpoint`, `orgName` and `token`.
    pub secret_ref: SecretRef,
}

/// A reference to a Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretRef {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Its namespace; the referring object's namespace when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `status.initialization` of the Cluster API v1beta2 contract.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Initialization {
    /// True once the infrastructure is provisioned; never goes back to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// One entry of `status.failureDomains` (a list in v1beta2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// The failure domain's name: the BMM site.
    pub name: String,
    /// Whether control-plane machines may be placed there.
    #[serde(default)]
    pub control_plane: bool,
    /// Free-form attributes.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub attributes: std::collections::BTreeMap<String, String>,
}

/// The kind of a machine address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MachineAddressType {
    /// The host name.
    Hostname,
    /// An address reachable inside the site.
    InternalIP,
    /// An address reachable from outside.
    ExternalIP,
    /// An internal DNS name.
    InternalDNS,
    /// An external DNS name.
    ExternalDNS,
}

/// One entry of `status.addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MachineAddress {
    /// The kind of address.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// The address.
    pub address: String,
}
