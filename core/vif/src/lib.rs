//! Kuryr's VIF handler decisions, pure: which VIFs a pod needs, how they change when the pod
//! does, and the `openstack.org/kuryr-vif` annotation that records them. No IO, no clock, no
//! async runtime; the handler in `kuryr-l7` reads pods and NetworkAttachmentDefinitions,
//! calls a backend and writes the annotation.
//!
//! The seed splits the work between a VIF handler that "stays clean" and a multi-VIF driver
//! that parses the pod. Here the multi-VIF driver is [`desired`]: the main VIF from the
//! generic driver, then one request per item of each enabled driver
//! ([`EnabledDrivers`], from `enabled_vif_drivers`):
//!
//! | driver | reads | gives |
//! |---|---|---|
//! | `generic` (always) | — | the main VIF `eth0` on the pod network |
//! | `additional_subnets` | `openstack.org/kuryr-additional-subnets: ["<subnet>", …]` | one VIF per subnet |
//! | `sriov` | container requests `pod.alpha.kubernetes.io/opaque-int-resource-sriov-vf-<physnet>` or a device-plugin resource mapped to a physnet | one `direct` VIF per VF |
//! | `specific_ports` (always) | `spec-ports: ["<port>", …]` | the pre-created port, its own `vnic_type` choosing generic (`normal`) or SR-IOV (`direct`) |
//! | `npwg_multiple_interfaces` | `k8s.v1.cni.cncf.io/networks` (JSON or `ns/name@ifname, name`) | one VIF per NetworkAttachmentDefinition: a Neutron subnet (`openstack.org/kuryr-config`) or a Nimbess network (`spec.config`'s `name`) |
//!
//! Every request has a stable [`VifRequest::key`]; [`update`] compares the VIFs a pod has
//! (its annotation) with the requests and keeps, releases or allocates by key, so an
//! annotation change touches only what changed. Interface names are kept for life: a new VIF
//! takes the asked `@ifname`, else the lowest free `eth1`, `eth2`, ….
//!
//! SR-IOV VFs are a node's to give: [`vfs::check`] decides whether the VFs an update
//! allocates fit in what the pod's node advertises beside what its pods hold.
//!
//! ```
//! use std::collections::BTreeMap;
//! use nephrite_vif::{Config, EnabledDrivers, Pod, desired, update};
//!
//! let pod = Pod {
//!     namespace: "shop".into(),
//!     name: "web".into(),
//!     annotations: BTreeMap::from([(
//!         "openstack.org/kuryr-additional-subnets".to_owned(),
//!         r#"["subnet-a", "subnet-b"]"#.to_owned(),
//!     )]),
//!     ..Pod::default()
//! };
//! let config = Config {
//!     drivers: EnabledDrivers::parse("additional_subnets")?,
//!     ..Config::default()
//! };
//! let requests = desired(&pod, &config, &[])?;
//! let plan = update(&[], &requests)?;
//! let names: Vec<&str> = plan.allocate.iter().map(|a| a.ifname.as_str()).collect();
//! assert_eq!(names, ["eth0", "eth1", "eth2"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod annotations;
mod driver;
mod plan;
mod pod;
mod record;
mod update;
pub mod vfs;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use driver::{Driver, EnabledDrivers, KNOWN_DRIVERS};
pub use plan::desired;
pub use pod::{ContainerResources, NetworkAttachment, Pod};
pub use record::{Failure, FailureKind, VIF_ANNOTATION, VIF_ANNOTATION_VERSION, Vif, VifRecord};
pub use update::{Allocation, Update, update};

/// The main VIF's interface name.
pub const MAIN_IFNAME: &str = "eth0";

/// Where a VIF is attached.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// The pod network (Neutron: `[neutron_defaults] pod_subnet`; Nimbess: the node's default
    /// network).
    PodNetwork,
    /// A Neutron subnet.
    Subnet {
        /// Its id.
        id: String,
    },
    /// A pre-created Neutron port (`spec-ports`).
    Port {
        /// Its id.
        id: String,
    },
    /// An SR-IOV VF on a physical network.
    Physnet {
        /// The physical network's name.
        physnet: String,
    },
    /// A named Nimbess network.
    Network {
        /// Its name.
        name: String,
    },
}

/// A port's `binding:vnic_type`, as far as the drivers care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VnicType {
    /// A virtual NIC (`normal`).
    Normal,
    /// An SR-IOV VF passed to the pod (`direct`).
    Direct,
}

impl VnicType {
    /// Neutron's name.
    pub fn name(self) -> &'static str {
        match self {
            VnicType::Normal => "normal",
            VnicType::Direct => "direct",
        }
    }

    /// The driver that handles a specific port of `vnic_type` (the seed: `normal` → generic,
    /// `direct` → SR-IOV); another type is [`VifError::VnicType`].
    pub fn driver_of_port(port: &str, vnic_type: &str) -> Result<(Driver, VnicType), VifError> {
        match vnic_type {
            "normal" => Ok((Driver::Generic, VnicType::Normal)),
            "direct" => Ok((Driver::Sriov, VnicType::Direct)),
            other => Err(VifError::VnicType {
                port: port.to_owned(),
                vnic_type: other.to_owned(),
            }),
        }
    }
}

/// How NetworkAttachmentDefinitions are read: which backend the networks they name live on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AttachmentFlavor {
    /// `spec.config` is a nimbess-cni configuration; its `name` is the Nimbess network.
    #[default]
    Nimbess,
    /// The annotation `openstack.org/kuryr-config` holds `{subnetId, driverType}`.
    Neutron,
}

/// What the drivers are configured with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// `enabled_vif_drivers`.
    pub drivers: EnabledDrivers,
    /// How NetworkAttachmentDefinitions are read.
    pub attachments: AttachmentFlavor,
    /// Device-plugin resource names (`intel.com/sriov_a`) → physical network: Kuryr's
    /// `[sriov] physnet_resource_mappings`.
    pub sriov_resources: BTreeMap<String, String>,
}

/// One VIF a pod needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VifRequest {
    /// Identity across plans: `main`, `subnet/<id>/<n>`, `sriov/<physnet>/<n>`, `port/<id>`,
    /// `network/<ns>/<name>/<n>` or `network/<ns>/<name>@<ifname>`.
    pub key: String,
    /// The driver asking.
    pub driver: Driver,
    /// Where.
    pub target: Target,
    /// The vnic type; None for a specific port (the port's own decides).
    pub vnic_type: Option<VnicType>,
    /// The interface name asked for (`eth0` for the main VIF, `@ifname`), if any.
    pub interface: Option<String>,
    /// The NetworkAttachmentDefinition (`namespace/name`) an NPWG request resolves.
    pub attachment: Option<String>,
}

impl VifRequest {
    /// What asks for this VIF, for messages: the main VIF, an annotation (with the
    /// NetworkAttachmentDefinition for an NPWG network) or a physnet's SR-IOV resources.
    pub fn origin(&self) -> String {
        match (&self.target, &self.attachment) {
            (_, Some(attachment)) => format!(
                "annotation {}: NetworkAttachmentDefinition {attachment}",
                annotations::NETWORKS
            ),
            (Target::PodNetwork, None) => "the pod's main VIF".to_owned(),
            (Target::Subnet { .. }, None) => {
                format!("annotation {}", annotations::ADDITIONAL_SUBNETS)
            }
            (Target::Port { .. }, None) => format!("annotation {}", annotations::SPEC_PORTS),
            (Target::Physnet { physnet }, None) => {
                format!("the SR-IOV resources of physnet {physnet}")
            }
            (Target::Network { name }, None) => format!("network {name}"),
        }
    }
}

/// What was wrong with a pod's request or the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VifError {
    /// `enabled_vif_drivers` names a driver that does not exist.
    #[error("unknown VIF driver {name:?} (expected {})", KNOWN_DRIVERS)]
    UnknownDriver {
        /// The name.
        name: String,
    },
    /// An annotation does not parse or asks for something impossible.
    #[error("annotation {annotation}: {error}")]
    Annotation {
        /// The annotation's key.
        annotation: String,
        /// What is wrong.
        error: String,
    },
    /// A container's resource request cannot be read as VFs.
    #[error("container {container:?}: resource {resource}: {error}")]
    Resource {
        /// The container.
        container: String,
        /// The resource name.
        resource: String,
        /// What is wrong.
        error: String,
    },
    /// `k8s.v1.cni.cncf.io/networks` names a NetworkAttachmentDefinition that does not exist.
    #[error(
        "annotation {}: NetworkAttachmentDefinition {attachment} not found",
        annotations::NETWORKS
    )]
    UnknownAttachment {
        /// `namespace/name`.
        attachment: String,
    },
    /// A NetworkAttachmentDefinition does not say which network it is.
    #[error("NetworkAttachmentDefinition {attachment}: {error}")]
    Attachment {
        /// `namespace/name`.
        attachment: String,
        /// What is wrong.
        error: String,
    },
    /// A specific port's `binding:vnic_type` is neither `normal` nor `direct`.
    #[error(
        "annotation {}: port {port} has binding:vnic_type {vnic_type:?} (expected normal or direct)",
        annotations::SPEC_PORTS
    )]
    VnicType {
        /// The port id.
        port: String,
        /// Its vnic type.
        vnic_type: String,
    },
    /// An interface name asked for is held by another VIF of the pod.
    #[error("interface {ifname} asked for by {key} is already used by {holder}")]
    InterfaceTaken {
        /// The name.
        ifname: String,
        /// The request asking.
        key: String,
        /// The VIF holding it.
        holder: String,
    },
}

/// Every error of one pod's plan (a pod can get several annotations wrong at once).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct PlanError(pub Vec<VifError>);

#[cfg(test)]
mod tests;
