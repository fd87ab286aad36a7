//! The handler's options from `kuryr.conf`.
//!
//! `[kubernetes] enabled_vif_drivers` and `[neutron_defaults] pod_subnet` and the Neutron
//! credentials come through the shared parser ([`crate::openstack::config`]); an unknown
//! driver is refused with the file and line. Kuryr's `[sriov]` options, which only the VIF
//! handler reads, are read here from the same text:
//!
//! | option | example | meaning |
//! |---|---|---|
//! | `physnet_resource_mappings` | `physnet2:sriov_a` | device-plugin resource → physnet |
//! | `device_plugin_resource_prefix` | `intel.com` (default) | prefix of a resource name without `/` |
//! | `default_physnet_subnets` | `physnet2:<subnet id>` | the subnet of a physnet's VF ports |

use std::collections::BTreeMap;
use std::path::Path;

use nephrite_vif::EnabledDrivers;

use crate::openstack::config::{self, ConfigError, KuryrConf, LineIndex};

/// What the VIF handler reads from `kuryr.conf`.
#[derive(Debug, Clone)]
pub struct HandlerConf {
    /// The whole file as the shared parser reads it (credentials, endpoints).
    pub conf: KuryrConf,
    /// `[kubernetes] enabled_vif_drivers`.
    pub drivers: EnabledDrivers,
    /// `[sriov]` resource names (prefixed) → physnet.
    pub sriov_resources: BTreeMap<String, String>,
    /// `[sriov] default_physnet_subnets`.
    pub physnet_subnets: BTreeMap<String, String>,
}

/// A `kuryr.conf` the handler cannot use.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The shared parser refused the file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An option of the handler's does not parse.
    #[error("{file}:{line}: [{section}] {option}: {message}")]
    Value {
        /// The file.
        file: String,
        /// Its line.
        line: usize,
        /// Section.
        section: String,
        /// Option.
        option: String,
        /// What is wrong.
        message: String,
    },
}

/// Read `path`: the shared parser's warnings (except for `[sriov]`, read here) are logged.
pub fn load(path: &Path) -> Result<HandlerConf, SettingsError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    parse(&file, &text)
}

/// Parse `text`, the contents of `file`.
pub fn parse(file: &str, text: &str) -> Result<HandlerConf, SettingsError> {
    let loaded = config::parse(file, text)?;
    for warning in loaded.warnings.iter().filter(|w| w.section != "sriov") {
        tracing::warn!("{warning}");
    }
    let lines = LineIndex::new(text);
    let refused = |section: &str, option: &str, message: String| SettingsError::Value {
        file: file.to_owned(),
        line: lines.option(section, option),
        section: section.to_owned(),
        option: option.to_owned(),
        message,
    };
    let drivers = EnabledDrivers::from_names(
        loaded
            .conf
            .kubernetes
            .enabled_vif_drivers
            .iter()
            .map(String::as_str),
    )
    .map_err(|e| {
        let option = if lines.option("kubernetes", "multi_vif_drivers")
            > lines.option("kubernetes", "enabled_vif_drivers")
        {
            "multi_vif_drivers"
        } else {
            "enabled_vif_drivers"
        };
        refused("kubernetes", option, e.to_string())
    })?;
    let ini = ini::Ini::load_from_str(text).map_err(|e| ConfigError::Syntax {
        file: file.to_owned(),
        line: e.line,
        message: e.msg.into_owned(),
    })?;
    let sriov = ini.section(Some("sriov"));
    let get = |option: &str| {
        sriov
            .and_then(|s| s.get(option))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let pairs = |option: &str| -> Result<Vec<(String, String)>, SettingsError> {
        let Some(value) = get(option) else {
            return Ok(Vec::new());
        };
        value
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|pair| match pair.split_once(':') {
                Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                    Ok((a.trim().to_owned(), b.trim().to_owned()))
                }
                _ => Err(refused(
                    "sriov",
                    option,
                    format!("{pair:?} is not <physnet>:<value>"),
                )),
            })
            .collect()
    };
    let prefix = get("device_plugin_resource_prefix").unwrap_or("intel.com");
    let sriov_resources = pairs("physnet_resource_mappings")?
        .into_iter()
        .map(|(physnet, resource)| {
            let name = if resource.contains('/') {
                resource
            } else {
                format!("{prefix}/{resource}")
            };
            (name, physnet)
        })
        .collect();
    let physnet_subnets = pairs("default_physnet_subnets")?.into_iter().collect();
    Ok(HandlerConf {
        conf: loaded.conf,
        drivers,
        sriov_resources,
        physnet_subnets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_pod_subnet_and_sriov_options_are_read() {
        let text = "[kubernetes]\nenabled_vif_drivers = sriov, additional_subnets\n\
                    [neutron_defaults]\npod_subnet = 0f8fad5b-d9cb-469f-a165-70867728950e\n\
                    [sriov]\nphysnet_resource_mappings = physnet2:sriov_a, physnet3:example.org/vf\n\
                    default_physnet_subnets = physnet2:sub-2\n";
        let conf = parse("kuryr.conf", text).unwrap();
        assert!(conf.drivers.contains(nephrite_vif::Driver::Sriov));
        assert_eq!(
            conf.conf.neutron_defaults.pod_subnet.as_deref(),
            Some("0f8fad5b-d9cb-469f-a165-70867728950e")
        );
        assert_eq!(
            conf.sriov_resources,
            BTreeMap::from([
                ("intel.com/sriov_a".to_owned(), "physnet2".to_owned()),
                ("example.org/vf".to_owned(), "physnet3".to_owned()),
            ])
        );
        assert_eq!(conf.physnet_subnets["physnet2"], "sub-2");
    }

    #[test]
    fn an_unknown_driver_is_refused_with_file_and_line() {
        let text = "[DEFAULT]\n\n[kubernetes]\nenabled_vif_drivers = sriov, additonal_subnets\n";
        assert_eq!(
            parse("kuryr.conf", text).unwrap_err().to_string(),
            "kuryr.conf:4: [kubernetes] enabled_vif_drivers: unknown VIF driver \"additonal_subnets\" (expected additional_subnets, sriov, specific_ports, npwg_multiple_interfaces, noop)"
        );
        let bad = "[sriov]\ndefault_physnet_subnets = physnet2\n";
        assert_eq!(
            parse("kuryr.conf", bad).unwrap_err().to_string(),
            "kuryr.conf:2: [sriov] default_physnet_subnets: \"physnet2\" is not <physnet>:<value>"
        );
    }
}
