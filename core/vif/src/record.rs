//! `openstack.org/kuryr-vif`: the VIFs a pod has, written by the handler for the CNI side.
//!
//! Versioned JSON (`{"version": 1, "vifs": […]}`): the version is read first, so a value
//! from a newer handler is refused by name ("version 2, this handler reads 1") rather than
//! half-understood. Every VIF carries its key (what the drivers asked for), interface name,
//! network, addresses, MAC, backend id and whether it is active.
//!
//! When the handler cannot give the pod what it asks for, the record also carries the
//! [`Failure`] (what was wrong and whether waiting can help), so the CNI side fails the pod's
//! ADD at once with the handler's words instead of waiting for VIFs that will not come. The
//! field is left out when there is none, so a record without a failure reads as before.

use serde::{Deserialize, Serialize};

use crate::{Driver, Target, VifError, VnicType};

/// The annotation's key.
pub const VIF_ANNOTATION: &str = "openstack.org/kuryr-vif";
/// The version this crate writes and reads.
pub const VIF_ANNOTATION_VERSION: u32 = 1;

/// One VIF of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vif {
    /// The request it satisfies ([`crate::VifRequest::key`]).
    pub key: String,
    /// Its interface in the pod (`eth0`, `eth1`, …).
    pub ifname: String,
    /// The driver that made it.
    pub driver: Driver,
    /// What was asked for.
    pub target: Target,
    /// `normal` or `direct`.
    pub vnic_type: VnicType,
    /// The backend's network (a Neutron network id, a Nimbess network name).
    pub network: String,
    /// Addresses in CIDR notation (`10.1.0.5/24`).
    pub addresses: Vec<String>,
    /// Gateway, when the network has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// MAC address.
    pub mac: String,
    /// The backend's id for it (the Neutron port id, the Nimbess port name).
    pub backend_id: String,
    /// Whether the backend reports it up.
    pub active: bool,
}

/// Whether a failed request can be met later as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The request is wrong (an annotation, an unknown network, subnet or port, a port held by
    /// another pod): it must change. The CNI's code 7.
    Invalid,
    /// The request is right but cannot be met now (no free VF on the node): the handler
    /// allocates once it can. The CNI's code 11 (try again later).
    Unavailable,
}

/// Why the handler gave the pod nothing new.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Whether waiting can help.
    pub kind: FailureKind,
    /// What was wrong, naming the annotation, network, port or resource.
    pub message: String,
}

/// The annotation's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VifRecord {
    /// [`VIF_ANNOTATION_VERSION`].
    pub version: u32,
    /// The VIFs, main VIF first.
    pub vifs: Vec<Vif>,
    /// Why the last pass gave the pod nothing new; `None` once it got what it asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: serde_json::Value,
}

impl VifRecord {
    /// A record of `vifs` at the current version.
    pub fn new(vifs: Vec<Vif>) -> VifRecord {
        VifRecord {
            version: VIF_ANNOTATION_VERSION,
            vifs,
            failure: None,
        }
    }

    /// A record of the `vifs` a pod keeps, with the `failure` that stopped the rest.
    pub fn failed(vifs: Vec<Vif>, failure: Failure) -> VifRecord {
        VifRecord {
            failure: Some(failure),
            ..VifRecord::new(vifs)
        }
    }

    /// Parse the annotation's value; errors name the annotation.
    pub fn parse(value: &str) -> Result<VifRecord, VifError> {
        let refused = |error: String| VifError::Annotation {
            annotation: VIF_ANNOTATION.to_owned(),
            error,
        };
        let version: VersionOnly = serde_json::from_str(value)
            .map_err(|e| refused(format!("not a versioned VIF record: {e}")))?;
        if version.version != VIF_ANNOTATION_VERSION {
            return Err(refused(format!(
                "version {}, this handler reads {VIF_ANNOTATION_VERSION}",
                version.version
            )));
        }
        serde_json::from_str(value).map_err(|e| refused(format!("version 1: {e}")))
    }

    /// The annotation's value.
    pub fn to_json(&self) -> String {
        // A record of strings, bools and enums always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The VIF on interface `ifname`.
    pub fn vif(&self, ifname: &str) -> Option<&Vif> {
        self.vifs.iter().find(|v| v.ifname == ifname)
    }

    /// Whether every VIF is active.
    pub fn all_active(&self) -> bool {
        self.vifs.iter().all(|v| v.active)
    }
}
