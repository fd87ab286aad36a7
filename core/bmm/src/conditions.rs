//! Condition types and reasons the provider sets.

/// The VPC exists and is Ready.
pub const VPC_READY: &str = "VPCReady";
/// Every subnet exists and is Ready.
pub const SUBNETS_READY: &str = "SubnetsReady";
/// The NSG (when asked for) exists, is Ready and attached.
pub const NSG_READY: &str = "NSGReady";
/// The summary condition; Cluster API mirrors it into `InfrastructureReady`.
pub const READY: &str = "Ready";
/// Reconciliation is paused.
pub const PAUSED: &str = "Paused";
/// The instance exists in BMM.
pub const INSTANCE_PROVISIONED: &str = "InstanceProvisioned";
/// The instance's interfaces have addresses.
pub const NETWORK_CONFIGURED: &str = "NetworkConfigured";

/// Reasons.
pub mod reason {
    /// Waiting for a BMM object to become Ready.
    pub const PROVISIONING: &str = "Provisioning";
    /// The object is Ready.
    pub const READY: &str = "Ready";
    /// Deleting the cloud objects.
    pub const DELETING: &str = "Deleting";
    /// Deletion waits for instances still in the VPC.
    pub const WAITING_FOR_INSTANCES: &str = "WaitingForInstances";
    /// An object of the wanted name exists but is not the provider's.
    pub const NAME_CONFLICT: &str = "NameConflict";
    /// The platform allocated a subnet prefix different from `cidr`.
    pub const SUBNET_PREFIX_MISMATCH: &str = "SubnetPrefixMismatch";
    /// The cluster is provisioned but `controlPlaneEndpoint` is not set.
    pub const WAITING_FOR_CONTROL_PLANE_ENDPOINT: &str = "WaitingForControlPlaneEndpoint";
    /// A BMM object is in state Error.
    pub const CLOUD_ERROR: &str = "CloudObjectError";
    /// Cluster API asked to pause.
    pub const PAUSED: &str = "Paused";
    /// Not paused.
    pub const NOT_PAUSED: &str = "NotPaused";
    /// The API refused the request (400); the message is the API's.
    pub const API_REJECTED: &str = "APIRejected";
    /// The API refused the credentials (401/403).
    pub const AUTH_FAILED: &str = "AuthFailed";
    /// The credentials Secret is missing or malformed.
    pub const CREDENTIALS_INVALID: &str = "CredentialsInvalid";
    /// The site could not be found.
    pub const SITE_NOT_FOUND: &str = "SiteNotFound";
    /// The machine waits for its cluster's network.
    pub const WAITING_FOR_CLUSTER: &str = "WaitingForClusterInfrastructure";
    /// The machine waits for bootstrap data.
    pub const WAITING_FOR_BOOTSTRAP: &str = "WaitingForBootstrapData";
    /// The machine's subnet is not one of the cluster's.
    pub const SUBNET_NOT_FOUND: &str = "SubnetNotFound";
    /// The instance disappeared.
    pub const INSTANCE_NOT_FOUND: &str = "InstanceNotFound";
    /// The instance is in state Error.
    pub const INSTANCE_ERROR: &str = "InstanceError";
    /// The instance is being terminated.
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
}
