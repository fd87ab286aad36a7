//! NVIDIA Bare Metal Manager (BMM) for Cluster API: the provider's types and decisions, pure.
//!
//! - [`crd`]: the `infrastructure.cluster.x-k8s.io/v1beta1` custom resources
//!   (`NvidiaBMMCluster`, `NvidiaBMMMachine` and their templates), with schemas that enforce
//!   the API's enums, CIDRs and required fields.
//! - [`cidr`]: IPv4 prefixes and the smallest prefix covering a set of subnets.
//! - [`provider_id`]: `nvidia-bmm://<site-id>/<instance-id>`, written one way, read tolerantly.
//! - [`cloud`]: what the provider observed in the BMM platform, independent of the REST client.
//! - [`decide`]: the reconcile decisions, `(spec, observed cloud, observed Kubernetes) →
//!   actions + status`, run by both the controllers and standalone mode.
//! - [`machine_api`]: the OpenShift Machine API providerSpec and the Machine controller's
//!   next step.
//! - [`validation`]: checks `apply -f` runs on documents before anything is created.
//!
//! Nothing here performs IO or reads a clock: times and fresh ids are arguments.

pub mod cidr;
pub mod cloud;
pub mod conditions;
pub mod crd;
pub mod decide;
pub mod machine_api;
pub mod provider_id;
pub mod validation;

pub use cidr::{CidrError, Ipv4Cidr, covering_prefix};
pub use provider_id::{ProviderId, ProviderIdError};

/// The finalizer the cluster controller puts on an `NvidiaBMMCluster` before creating anything.
pub const CLUSTER_FINALIZER: &str = "nvidiabmmcluster.infrastructure.cluster.x-k8s.io";
/// The finalizer the machine controller puts on an `NvidiaBMMMachine` before creating anything.
pub const MACHINE_FINALIZER: &str = "nvidiabmmmachine.infrastructure.cluster.x-k8s.io";
/// Label naming the Cluster API `Cluster` an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label present on control-plane machines.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Annotation that pauses reconciliation of an object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// Label marking an infrastructure cluster managed by something else: the provider skips it.
pub const MANAGED_BY_LABEL: &str = "cluster.x-k8s.io/managed-by";
/// Label put on every BMM object the provider creates: `<namespace>.<name>` of the Kubernetes
/// object it was created for. An object with the right name but without this label is not
/// adopted (condition `NameConflict`).
pub const OWNER_LABEL: &str = "nephrite.io/bmm-owner";
/// The port `controlPlaneEndpoint` gets when it is taken from a control-plane instance.
pub const DEFAULT_API_SERVER_PORT: i32 = 6443;

/// The value of [`OWNER_LABEL`] for a Kubernetes object.
pub fn owner_value(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}
