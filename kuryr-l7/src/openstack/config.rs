//! `kuryr.conf`: the INI file Kuryr's operators already write, read into a typed [`KuryrConf`].
//!
//! Option names are Kuryr's (`[kubernetes] l7_router_driver`, `[neutron_defaults]
//! external_svc_subnet`, `[ingress] l7_router_uuid`, …) and keystoneauth's for the `[neutron]`
//! and `[octavia]` sections (`auth_type`, `auth_url`, `endpoint_override`, …), so an existing
//! file keeps working. `rust-ini` reads the syntax (with `#` and `;` inline comments after a
//! space); it does not keep line numbers, so [`LineIndex`] scans the text once to find the line
//! of every section and option, for messages like
//! `kuryr.conf:74: [kubernetes] l7_router_driver: unknown driver "nonsense" (expected …)`.
//!
//! Rules: an empty value means unset; the last assignment of an option wins; an unknown section
//! or option is a [`Warning`] (the file may carry options of Kuryr features kuryr-l7 does not
//! have); a value that does not parse is a [`ConfigError`]. `[octavia]` without `auth_type`
//! authenticates as `[neutron]` does (one identity for both services, as Kuryr had).

use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use ini::{Ini, ParseOption};

use super::auth::{Credentials, ProjectScope};
use super::session::Endpoint;

mod lines;
#[cfg(test)]
mod tests;

pub use lines::LineIndex;

/// The L7 router driver (`[kubernetes] l7_router_driver`, the controller's `--driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterDriver {
    /// kuryr-l7's own router.
    Embedded,
    /// HAProxy, configured and reloaded by the controller.
    Haproxy,
    /// An Octavia load balancer with L7 policies (`neutron_l7_policy`, also `octavia`).
    NeutronL7Policy,
}

impl RouterDriver {
    /// The accepted spellings.
    pub const NAMES: &'static str = "embedded, haproxy, neutron_l7_policy or octavia";

    /// The driver named `name`.
    pub fn from_name(name: &str) -> Option<RouterDriver> {
        match name {
            "embedded" => Some(RouterDriver::Embedded),
            "haproxy" => Some(RouterDriver::Haproxy),
            "neutron_l7_policy" | "octavia" => Some(RouterDriver::NeutronL7Policy),
            _ => None,
        }
    }
}

/// keystoneauth's `auth_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    /// No Keystone (`noauth`, also keystoneauth's `none`).
    NoAuth,
    /// `password` (also `v3password`).
    Password,
    /// `v3applicationcredential` (also `application_credential`).
    ApplicationCredential,
}

impl AuthType {
    /// The accepted spellings.
    pub const NAMES: &'static str = "noauth, password or v3applicationcredential";

    /// The auth type named `name` (keystoneauth's spellings).
    pub fn from_name(name: &str) -> Option<AuthType> {
        match name {
            "noauth" | "none" => Some(AuthType::NoAuth),
            "password" | "v3password" => Some(AuthType::Password),
            "v3applicationcredential" | "application_credential" => {
                Some(AuthType::ApplicationCredential)
            }
            _ => None,
        }
    }
}

/// `[kubernetes]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubernetesOptions {
    /// `l7_router_driver`.
    pub l7_router_driver: Option<RouterDriver>,
    /// `enabled_vif_drivers` (comma-separated; `multi_vif_drivers` is its later name).
    pub enabled_vif_drivers: Vec<String>,
}

/// `[neutron_defaults]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeutronDefaults {
    /// `project`: the project objects are created in.
    pub project: Option<String>,
    /// `service_subnet`: where the router load balancer's VIP port is.
    pub service_subnet: Option<String>,
    /// `external_svc_subnet`: the external subnet floating IPs come from.
    pub external_svc_subnet: Option<String>,
    /// `pod_subnet`: the pods' subnet (pool members' `subnet_id`).
    pub pod_subnet: Option<String>,
    /// `floating_ip`: a pre-allocated floating IP address to adopt (never released).
    pub floating_ip: Option<IpAddr>,
}

/// `[ingress]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressOptions {
    /// `l7_router_uuid`: an existing load balancer to adopt; unset creates the Router LB.
    pub l7_router_uuid: Option<String>,
}

/// `[neutron]` or `[octavia]`: where the service is and how to authenticate (keystoneauth's
/// option names).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ServiceOptions {
    /// `auth_type`.
    pub auth_type: Option<AuthType>,
    /// `endpoint_override`: the service URL, instead of Keystone's catalog.
    pub endpoint_override: Option<String>,
    /// `auth_url`: Keystone.
    pub auth_url: Option<String>,
    /// `username`.
    pub username: Option<String>,
    /// `password`.
    pub password: Option<String>,
    /// `user_domain_name`.
    pub user_domain_name: Option<String>,
    /// `project_name`.
    pub project_name: Option<String>,
    /// `project_id`.
    pub project_id: Option<String>,
    /// `project_domain_name`.
    pub project_domain_name: Option<String>,
    /// `application_credential_id`.
    pub application_credential_id: Option<String>,
    /// `application_credential_secret`.
    pub application_credential_secret: Option<String>,
    /// `region_name`.
    pub region_name: Option<String>,
    /// `valid_interfaces`: the catalog interface (`public`, `internal`, `admin`).
    pub valid_interfaces: Option<String>,
}

impl fmt::Debug for ServiceOptions {
    // The password and the application credential's secret stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "<hidden>");
        f.debug_struct("ServiceOptions")
            .field("auth_type", &self.auth_type)
            .field("endpoint_override", &self.endpoint_override)
            .field("auth_url", &self.auth_url)
            .field("username", &self.username)
            .field("password", &hidden(&self.password))
            .field("user_domain_name", &self.user_domain_name)
            .field("project_name", &self.project_name)
            .field("project_id", &self.project_id)
            .field("project_domain_name", &self.project_domain_name)
            .field("application_credential_id", &self.application_credential_id)
            .field(
                "application_credential_secret",
                &hidden(&self.application_credential_secret),
            )
            .field("region_name", &self.region_name)
            .field("valid_interfaces", &self.valid_interfaces)
            .finish()
    }
}

impl ServiceOptions {
    /// The credentials these options describe; `default_project` (`[neutron_defaults]
    /// project`) is the `noauth` project when `project_id` is unset. None when `auth_type` is
    /// unset or an option it needs is missing ([`parse`] has refused such files already).
    pub fn credentials(&self, default_project: Option<&str>) -> Option<Credentials> {
        let project = || {
            self.project_id.clone().map(ProjectScope::Id).or_else(|| {
                Some(ProjectScope::Name {
                    name: self.project_name.clone()?,
                    domain_name: self
                        .project_domain_name
                        .clone()
                        .unwrap_or_else(|| "Default".to_owned()),
                })
            })
        };
        match self.auth_type? {
            AuthType::NoAuth => Some(Credentials::NoAuth {
                project_id: self
                    .project_id
                    .clone()
                    .or_else(|| default_project.map(str::to_owned))?,
            }),
            AuthType::Password => Some(Credentials::Password {
                auth_url: self.auth_url.clone()?,
                username: self.username.clone()?,
                password: self.password.clone()?,
                user_domain_name: self
                    .user_domain_name
                    .clone()
                    .unwrap_or_else(|| "Default".to_owned()),
                project: project()?,
            }),
            AuthType::ApplicationCredential => Some(Credentials::ApplicationCredential {
                auth_url: self.auth_url.clone()?,
                id: self.application_credential_id.clone()?,
                secret: self.application_credential_secret.clone()?,
            }),
        }
    }

    /// Where the service is: `endpoint_override`, else the catalog entry of `service_type`.
    pub fn endpoint(&self, service_type: &str) -> Endpoint {
        match &self.endpoint_override {
            Some(url) => Endpoint::Url(url.clone()),
            None => Endpoint::Catalog {
                service_type: service_type.to_owned(),
                interface: self
                    .valid_interfaces
                    .clone()
                    .unwrap_or_else(|| "public".to_owned()),
                region: self.region_name.clone(),
            },
        }
    }

    fn has_auth_options(&self) -> bool {
        self.auth_type.is_some()
    }
}

/// Everything `kuryr.conf` sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KuryrConf {
    /// `[kubernetes]`.
    pub kubernetes: KubernetesOptions,
    /// `[neutron_defaults]`.
    pub neutron_defaults: NeutronDefaults,
    /// `[ingress]`.
    pub ingress: IngressOptions,
    /// `[neutron]`.
    pub neutron: ServiceOptions,
    /// `[octavia]`.
    pub octavia: ServiceOptions,
}

impl KuryrConf {
    /// Neutron's credentials (`[neutron]`).
    pub fn neutron_credentials(&self) -> Option<Credentials> {
        self.neutron
            .credentials(self.neutron_defaults.project.as_deref())
    }

    /// Octavia's credentials: `[octavia]`'s when it sets `auth_type`, else `[neutron]`'s.
    pub fn octavia_credentials(&self) -> Option<Credentials> {
        if self.octavia.has_auth_options() {
            self.octavia
                .credentials(self.neutron_defaults.project.as_deref())
        } else {
            self.neutron_credentials()
        }
    }

    /// Neutron's endpoint (`network` in the catalog).
    pub fn neutron_endpoint(&self) -> Endpoint {
        self.neutron.endpoint("network")
    }

    /// Octavia's endpoint (`load-balancer` in the catalog).
    pub fn octavia_endpoint(&self) -> Endpoint {
        self.octavia.endpoint("load-balancer")
    }
}

/// A file read: the configuration and what was ignored in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The configuration.
    pub conf: KuryrConf,
    /// Unknown sections and options, in file order.
    pub warnings: Vec<Warning>,
}

/// Something in the file that kuryr-l7 ignores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file as named to [`load`].
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// The section.
    pub section: String,
    /// The option, or None for an unknown section.
    pub option: Option<String>,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.option {
            None => write!(
                f,
                "{}:{}: unknown section [{}] (ignored)",
                self.file, self.line, self.section
            ),
            Some(option) => write!(
                f,
                "{}:{}: [{}] {option}: unknown option (ignored)",
                self.file, self.line, self.section
            ),
        }
    }
}

/// A file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not INI.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An option's value is wrong, or an option another needs is missing.
    #[error("{file}:{line}: [{section}] {option}: {message}")]
    Value {
        /// The file.
        file: String,
        /// The 1-based line of the option.
        line: usize,
        /// The section.
        section: String,
        /// The option.
        option: String,
        /// What is wrong.
        message: String,
    },
}

/// Read `path`; messages name it as given.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: file.clone(),
        source,
    })?;
    parse(&file, &text)
}

/// The sections and options kuryr-l7 knows.
const KNOWN: &[(&str, &[&str])] = &[
    ("DEFAULT", &[]),
    (
        "kubernetes",
        &[
            "l7_router_driver",
            "enabled_vif_drivers",
            "multi_vif_drivers",
        ],
    ),
    (
        "neutron_defaults",
        &[
            "project",
            "service_subnet",
            "external_svc_subnet",
            "pod_subnet",
            "floating_ip",
        ],
    ),
    ("ingress", &["l7_router_uuid"]),
    ("neutron", SERVICE_OPTIONS),
    ("octavia", SERVICE_OPTIONS),
];

const SERVICE_OPTIONS: &[&str] = &[
    "auth_type",
    "endpoint_override",
    "auth_url",
    "username",
    "password",
    "user_domain_name",
    "project_name",
    "project_id",
    "project_domain_name",
    "application_credential_id",
    "application_credential_secret",
    "region_name",
    "valid_interfaces",
];

/// Parse `text`, the contents of `file`.
pub fn parse(file: &str, text: &str) -> Result<Loaded, ConfigError> {
    let options = ParseOption {
        enabled_quote: true,
        // A backslash in a password is a backslash.
        enabled_escape: false,
        enabled_indented_mutiline_value: false,
        enabled_preserve_key_leading_whitespace: false,
    };
    let ini = Ini::load_from_str_opt(text, options).map_err(|e| ConfigError::Syntax {
        file: file.to_owned(),
        line: e.line,
        message: e.msg.into_owned(),
    })?;
    let lines = LineIndex::new(text);
    let mut conf = KuryrConf::default();
    let mut warnings = Vec::new();
    for (section, properties) in &ini {
        let section = section.unwrap_or("DEFAULT");
        let Some((_, known)) = KNOWN.iter().find(|(name, _)| *name == section) else {
            let warning = Warning {
                file: file.to_owned(),
                line: lines.section(section),
                section: section.to_owned(),
                option: None,
            };
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
            continue;
        };
        for (option, value) in properties.iter() {
            let line = lines.option(section, option);
            if !known.contains(&option) {
                warnings.push(Warning {
                    file: file.to_owned(),
                    line,
                    section: section.to_owned(),
                    option: Some(option.to_owned()),
                });
                continue;
            }
            let value = value.trim();
            // rust-ini sees an inline comment only after a value: `key =   # note` is unset.
            let value = (!value.is_empty() && !value.starts_with(['#', ';'])).then_some(value);
            set(&mut conf, section, option, value).map_err(|message| ConfigError::Value {
                file: file.to_owned(),
                line,
                section: section.to_owned(),
                option: option.to_owned(),
                message,
            })?;
        }
    }
    for section in ["neutron", "octavia"] {
        complete(&conf, section).map_err(|(option, message)| ConfigError::Value {
            file: file.to_owned(),
            line: lines.option(section, option),
            section: section.to_owned(),
            option: option.to_owned(),
            message,
        })?;
    }
    Ok(Loaded { conf, warnings })
}

/// Set `[section] option = value` (None: unset) on `conf`, or say why the value is wrong.
fn set(
    conf: &mut KuryrConf,
    section: &str,
    option: &str,
    value: Option<&str>,
) -> Result<(), String> {
    let text = || value.map(str::to_owned);
    match (section, option) {
        ("kubernetes", "l7_router_driver") => {
            conf.kubernetes.l7_router_driver = value
                .map(|v| {
                    RouterDriver::from_name(v).ok_or_else(|| {
                        format!("unknown driver {v:?} (expected {})", RouterDriver::NAMES)
                    })
                })
                .transpose()?;
        }
        ("kubernetes", "enabled_vif_drivers" | "multi_vif_drivers") => {
            conf.kubernetes.enabled_vif_drivers = value
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect();
        }
        ("neutron_defaults", "project") => conf.neutron_defaults.project = project_id(value)?,
        ("neutron_defaults", "service_subnet") => {
            conf.neutron_defaults.service_subnet = uuid(value)?;
        }
        ("neutron_defaults", "external_svc_subnet") => {
            conf.neutron_defaults.external_svc_subnet = uuid(value)?;
        }
        ("neutron_defaults", "pod_subnet") => conf.neutron_defaults.pod_subnet = uuid(value)?,
        ("neutron_defaults", "floating_ip") => {
            conf.neutron_defaults.floating_ip = value
                .map(|v| {
                    v.parse::<IpAddr>()
                        .map_err(|_| format!("not an IP address: {v:?}"))
                })
                .transpose()?;
        }
        ("ingress", "l7_router_uuid") => conf.ingress.l7_router_uuid = uuid(value)?,
        ("neutron" | "octavia", _) => {
            let service = if section == "neutron" {
                &mut conf.neutron
            } else {
                &mut conf.octavia
            };
            match option {
                "auth_type" => {
                    service.auth_type = value
                        .map(|v| {
                            AuthType::from_name(v).ok_or_else(|| {
                                format!("unknown auth_type {v:?} (expected {})", AuthType::NAMES)
                            })
                        })
                        .transpose()?;
                }
                "endpoint_override" => service.endpoint_override = http_url(value)?,
                "auth_url" => service.auth_url = http_url(value)?,
                "username" => service.username = text(),
                "password" => service.password = text(),
                "user_domain_name" => service.user_domain_name = text(),
                "project_name" => service.project_name = text(),
                "project_id" => service.project_id = project_id(value)?,
                "project_domain_name" => service.project_domain_name = text(),
                "application_credential_id" => service.application_credential_id = text(),
                "application_credential_secret" => {
                    service.application_credential_secret = text();
                }
                "region_name" => service.region_name = text(),
                "valid_interfaces" => {
                    // keystoneauth takes a list; the first one is used.
                    let first = value.and_then(|v| v.split(',').map(str::trim).next());
                    service.valid_interfaces = first
                        .map(|v| match v {
                            "public" | "internal" | "admin" => Ok(v.to_owned()),
                            _ => Err(format!(
                                "unknown interface {v:?} (expected public, internal or admin)"
                            )),
                        })
                        .transpose()?;
                }
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether `[section]`'s `auth_type` has the options it needs: Err is (the option to point
/// at, the message).
fn complete(conf: &KuryrConf, section: &str) -> Result<(), (&'static str, String)> {
    let service = if section == "neutron" {
        &conf.neutron
    } else {
        &conf.octavia
    };
    let Some(auth_type) = service.auth_type else {
        return Ok(());
    };
    let missing: Vec<&str> = match auth_type {
        AuthType::NoAuth => {
            let mut missing = Vec::new();
            if service.endpoint_override.is_none() {
                missing.push("endpoint_override (there is no catalog without Keystone)");
            }
            if service.project_id.is_none() && conf.neutron_defaults.project.is_none() {
                missing.push("project_id (or [neutron_defaults] project)");
            }
            missing
        }
        AuthType::Password => [
            ("auth_url", service.auth_url.is_none()),
            ("username", service.username.is_none()),
            ("password", service.password.is_none()),
            (
                "project_id or project_name",
                service.project_id.is_none() && service.project_name.is_none(),
            ),
        ]
        .into_iter()
        .filter_map(|(name, absent)| absent.then_some(name))
        .collect(),
        AuthType::ApplicationCredential => [
            ("auth_url", service.auth_url.is_none()),
            (
                "application_credential_id",
                service.application_credential_id.is_none(),
            ),
            (
                "application_credential_secret",
                service.application_credential_secret.is_none(),
            ),
        ]
        .into_iter()
        .filter_map(|(name, absent)| absent.then_some(name))
        .collect(),
    };
    if missing.is_empty() {
        return Ok(());
    }
    let name = match auth_type {
        AuthType::NoAuth => "noauth",
        AuthType::Password => "password",
        AuthType::ApplicationCredential => "v3applicationcredential",
    };
    Err((
        "auth_type",
        format!("{name} needs {} (not set)", missing.join(", ")),
    ))
}

/// An OpenStack id: a UUID with or without hyphens (`9f6d8c9f-d22d-480e-80f5-867daa050ff8`).
fn uuid(value: Option<&str>) -> Result<Option<String>, String> {
    value
        .map(|v| {
            let hex: String = v.chars().filter(|c| *c != '-').collect();
            let groups: Vec<usize> = v.split('-').map(str::len).collect();
            let shaped = groups == [32] || groups == [8, 4, 4, 4, 12];
            if shaped && hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                Ok(v.to_owned())
            } else {
                Err(format!("not an OpenStack id (a UUID): {v:?}"))
            }
        })
        .transpose()
}

/// A Keystone project id: one word (usually 32 hex digits; other identity backends differ).
fn project_id(value: Option<&str>) -> Result<Option<String>, String> {
    value
        .map(|v| {
            if v.chars().any(char::is_whitespace) || v.len() > 64 {
                Err(format!("not a project id: {v:?}"))
            } else {
                Ok(v.to_owned())
            }
        })
        .transpose()
}

/// An `http://` or `https://` URL with a host.
fn http_url(value: Option<&str>) -> Result<Option<String>, String> {
    value
        .map(|v| match reqwest::Url::parse(v) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                Ok(v.trim_end_matches('/').to_owned())
            }
            _ => Err(format!("not an http(s) URL: {v:?}")),
        })
        .transpose()
}
