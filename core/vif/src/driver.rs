//! The multi-VIF drivers and `enabled_vif_drivers`.
//!
//! `generic` (the main VIF) and `specific_ports` are always on, as the seed says; the others
//! run only when listed in `[kubernetes] enabled_vif_drivers` (Kuryr's later name
//! `multi_vif_drivers` reads the same). Kuryr's `noop` is accepted and adds nothing. Any other
//! name is refused, so a typo stops the handler at start instead of silently dropping VIFs.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::VifError;

/// A driver that contributes VIFs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// The pod's main VIF (`eth0`), and specific ports whose `vnic_type` is `normal`.
    Generic,
    /// One VIF per subnet of `openstack.org/kuryr-additional-subnets`.
    AdditionalSubnets,
    /// One `direct` VIF per requested VF, and specific ports whose `vnic_type` is `direct`.
    Sriov,
    /// The pre-created ports of `spec-ports` (always on).
    SpecificPorts,
    /// One VIF per network of `k8s.v1.cni.cncf.io/networks`.
    NpwgMultipleInterfaces,
}

impl Driver {
    /// The name used in `enabled_vif_drivers` and in the `kuryr-vif` annotation.
    pub fn name(self) -> &'static str {
        match self {
            Driver::Generic => "generic",
            Driver::AdditionalSubnets => "additional_subnets",
            Driver::Sriov => "sriov",
            Driver::SpecificPorts => "specific_ports",
            Driver::NpwgMultipleInterfaces => "npwg_multiple_interfaces",
        }
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The names `enabled_vif_drivers` accepts, for messages.
pub const KNOWN_DRIVERS: &str =
    "additional_subnets, sriov, specific_ports, npwg_multiple_interfaces, noop";

/// The multi-VIF drivers that run, in the order they contribute VIFs (configured order; the
/// always-on `specific_ports` last when not listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnabledDrivers {
    order: Vec<Driver>,
}

impl Default for EnabledDrivers {
    /// Only the always-on drivers.
    fn default() -> Self {
        EnabledDrivers {
            order: vec![Driver::SpecificPorts],
        }
    }
}

impl EnabledDrivers {
    /// Parse a comma-separated list (`sriov, additional_subnets`); see [`Self::from_names`].
    pub fn parse(list: &str) -> Result<EnabledDrivers, VifError> {
        EnabledDrivers::from_names(list.split(','))
    }

    /// The drivers named (blank entries and `noop` skipped, repeats counted once); an unknown
    /// name is [`VifError::UnknownDriver`]. `generic` may be named; it is always on anyway.
    pub fn from_names<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<EnabledDrivers, VifError> {
        let mut order = Vec::new();
        for raw in names {
            let name = raw.trim();
            let driver = match name {
                "" | "noop" | "generic" => continue,
                "additional_subnets" => Driver::AdditionalSubnets,
                "sriov" => Driver::Sriov,
                "specific_ports" => Driver::SpecificPorts,
                "npwg_multiple_interfaces" => Driver::NpwgMultipleInterfaces,
                _ => {
                    return Err(VifError::UnknownDriver {
                        name: name.to_owned(),
                    });
                }
            };
            if !order.contains(&driver) {
                order.push(driver);
            }
        }
        if !order.contains(&Driver::SpecificPorts) {
            order.push(Driver::SpecificPorts);
        }
        Ok(EnabledDrivers { order })
    }

    /// Whether `driver` runs (`generic` always does).
    pub fn contains(&self, driver: Driver) -> bool {
        driver == Driver::Generic || self.order.contains(&driver)
    }

    /// The multi-VIF drivers in the order they contribute.
    pub fn order(&self) -> &[Driver] {
        &self.order
    }
}
