//! The Octavia v2 objects as the API reads and writes them: load balancers, listeners, pools,
//! members, L7 policies and rules, and the provisioning status every one of them carries.

use serde::{Deserialize, Serialize};

/// A provisioning status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProvisioningStatus {
    /// Settled.
    Active,
    /// Being created.
    PendingCreate,
    /// Being changed.
    PendingUpdate,
    /// Being deleted.
    PendingDelete,
    /// Deleted (Octavia mostly answers 404 instead).
    Deleted,
    /// The provider failed.
    Error,
}

impl ProvisioningStatus {
    /// Whether a change is in flight.
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            ProvisioningStatus::PendingCreate
                | ProvisioningStatus::PendingUpdate
                | ProvisioningStatus::PendingDelete
        )
    }
}

/// `{"id": …}` as Octavia lists related objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdRef {
    /// The related object's id.
    pub id: String,
}

/// A load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LoadBalancer {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its description.
    #[serde(default)]
    pub description: String,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// The VIP address.
    #[serde(default)]
    pub vip_address: Option<String>,
    /// The VIP's Neutron port.
    #[serde(default)]
    pub vip_port_id: Option<String>,
    /// The VIP's subnet.
    #[serde(default)]
    pub vip_subnet_id: Option<String>,
    /// Its project.
    #[serde(default)]
    pub project_id: String,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Its listeners.
    #[serde(default)]
    pub listeners: Vec<IdRef>,
    /// Its pools.
    #[serde(default)]
    pub pools: Vec<IdRef>,
}

/// A new load balancer. With Octavia's noop network driver (and to keep the VIP port under
/// the controller's name), create the VIP port in Neutron first and pass `vip_port_id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewLoadBalancer {
    /// Its name.
    pub name: String,
    /// Its description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// An existing Neutron port for the VIP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_port_id: Option<String>,
    /// The VIP's subnet (Octavia allocates a port on it when no port is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_subnet_id: Option<String>,
    /// The VIP address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vip_address: Option<String>,
    /// The provider (`amphora`, `ovn`); Octavia's default when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Listener {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// `HTTP`, `HTTPS`, `TERMINATED_HTTPS`, `TCP`, …
    pub protocol: String,
    /// The port it listens on.
    pub protocol_port: u16,
    /// The pool requests go to when no L7 policy matches.
    #[serde(default)]
    pub default_pool_id: Option<String>,
    /// A `TERMINATED_HTTPS` listener's default certificate (a Barbican reference).
    #[serde(default)]
    pub default_tls_container_ref: Option<String>,
    /// A `TERMINATED_HTTPS` listener's SNI certificates (Barbican references).
    #[serde(default)]
    pub sni_container_refs: Vec<String>,
    /// Its L7 policies.
    #[serde(default)]
    pub l7policies: Vec<IdRef>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewListener {
    /// Its name.
    pub name: String,
    /// The load balancer.
    pub loadbalancer_id: String,
    /// `HTTP`, …
    pub protocol: String,
    /// The port.
    pub protocol_port: u16,
    /// The default pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_pool_id: Option<String>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A pool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Pool {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// `HTTP`, `PROXY`, `TCP`, …
    pub protocol: String,
    /// `ROUND_ROBIN`, `LEAST_CONNECTIONS`, `SOURCE_IP`, …
    pub lb_algorithm: String,
    /// Its members.
    #[serde(default)]
    pub members: Vec<IdRef>,
    /// The listeners using it as default pool.
    #[serde(default)]
    pub listeners: Vec<IdRef>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new pool on a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewPool {
    /// Its name.
    pub name: String,
    /// The load balancer.
    pub loadbalancer_id: String,
    /// `HTTP`, …
    pub protocol: String,
    /// `ROUND_ROBIN`, …
    pub lb_algorithm: String,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// A pool member.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Member {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The backend address.
    pub address: String,
    /// The backend port.
    pub protocol_port: u16,
    /// Its weight.
    #[serde(default)]
    pub weight: u32,
    /// The subnet the address is on.
    #[serde(default)]
    pub subnet_id: Option<String>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new pool member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewMember {
    /// Its name.
    pub name: String,
    /// The backend address.
    pub address: String,
    /// The backend port.
    pub protocol_port: u16,
    /// Its weight (Octavia's default 1 when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// The subnet the address is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// An L7 policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct L7Policy {
    /// Its id.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its listener.
    pub listener_id: String,
    /// `REJECT`, `REDIRECT_TO_URL`, `REDIRECT_PREFIX`, `REDIRECT_TO_POOL`.
    pub action: String,
    /// Its position, 1..n.
    pub position: u32,
    /// The pool of `REDIRECT_TO_POOL`.
    #[serde(default)]
    pub redirect_pool_id: Option<String>,
    /// The URL of `REDIRECT_TO_URL`.
    #[serde(default)]
    pub redirect_url: Option<String>,
    /// The prefix of `REDIRECT_PREFIX`.
    #[serde(default)]
    pub redirect_prefix: Option<String>,
    /// The redirect's status code.
    #[serde(default)]
    pub redirect_http_code: Option<u16>,
    /// Its rules.
    #[serde(default)]
    pub rules: Vec<IdRef>,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new L7 policy (rules are created one call each: Octavia 19 answers 500 to inline rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewL7Policy {
    /// Its name.
    pub name: String,
    /// Its listener.
    pub listener_id: String,
    /// The action.
    pub action: String,
    /// Where to insert it (appended when unset or past the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    /// The pool of `REDIRECT_TO_POOL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_pool_id: Option<String>,
    /// The URL of `REDIRECT_TO_URL`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_url: Option<String>,
    /// The prefix of `REDIRECT_PREFIX`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_prefix: Option<String>,
    /// The redirect's status code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_http_code: Option<u16>,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// An L7 rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct L7Rule {
    /// Its id.
    pub id: String,
    /// `HOST_NAME`, `PATH`, `HEADER`, `COOKIE`, `FILE_TYPE`, …
    #[serde(rename = "type")]
    pub rule_type: String,
    /// `EQUAL_TO`, `STARTS_WITH`, `ENDS_WITH`, `CONTAINS`, `REGEX`.
    pub compare_type: String,
    /// The header or cookie name.
    #[serde(default)]
    pub key: Option<String>,
    /// The value compared.
    pub value: String,
    /// Whether the match is inverted.
    #[serde(default)]
    pub invert: bool,
    /// Provisioning status.
    pub provisioning_status: ProvisioningStatus,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A new L7 rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NewL7Rule {
    /// The rule type.
    #[serde(rename = "type")]
    pub rule_type: String,
    /// The comparison.
    pub compare_type: String,
    /// The header or cookie name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The value compared.
    pub value: String,
    /// Whether the match is inverted.
    pub invert: bool,
    /// Tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}
