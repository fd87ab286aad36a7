//! The `octavia` driver's settings from `kuryr.conf` (`--config-file`) and flags together: every
//! flag is optional and, when given, wins over the file's option of the same meaning. The result,
//! [`OpenStackSettings`], is what the driver runs with, whichever way it was said.

use std::net::IpAddr;
use std::path::PathBuf;

use super::auth::Credentials;
use super::config::{self, AuthType, ConfigError, KuryrConf, RouterDriver};
use super::session::Endpoint;

/// The OpenStack flags of `kuryr-l7 controller` (each the twin of a `kuryr.conf` option).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OpenStackArgs {
    /// kuryr.conf to read (`[kubernetes] l7_router_driver`, `[neutron_defaults]`, `[ingress]`,
    /// `[neutron]`, `[octavia]`); a flag wins over the file.
    #[arg(long, env = "KURYR_L7_CONFIG_FILE", value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// The Node that carries the router state annotation (default: the host name).
    #[arg(long, env = "KURYR_NODE_NAME")]
    pub node_name: Option<String>,
    /// The cluster's name in the tags of every Octavia object this controller owns.
    #[arg(long, env = "KURYR_L7_CLUSTER_NAME", default_value = "kubernetes")]
    pub cluster_name: String,
    /// Octavia's URL (`[octavia] endpoint_override`).
    #[arg(long, env = "KURYR_L7_OCTAVIA_URL")]
    pub octavia_url: Option<String>,
    /// Neutron's URL (`[neutron] endpoint_override`).
    #[arg(long, env = "KURYR_L7_NEUTRON_URL")]
    pub neutron_url: Option<String>,
    /// `[neutron] auth_type`: noauth, password or v3applicationcredential.
    #[arg(long, env = "OS_AUTH_TYPE")]
    pub os_auth_type: Option<String>,
    /// `[neutron] auth_url` (Keystone).
    #[arg(long, env = "OS_AUTH_URL")]
    pub os_auth_url: Option<String>,
    /// `[neutron] username`.
    #[arg(long, env = "OS_USERNAME")]
    pub os_username: Option<String>,
    /// `[neutron] password`.
    #[arg(long, env = "OS_PASSWORD", hide_env_values = true)]
    pub os_password: Option<String>,
    /// `[neutron] project_name`.
    #[arg(long, env = "OS_PROJECT_NAME")]
    pub os_project_name: Option<String>,
    /// `[neutron] application_credential_id`.
    #[arg(long, env = "OS_APPLICATION_CREDENTIAL_ID")]
    pub os_application_credential_id: Option<String>,
    /// `[neutron] application_credential_secret`.
    #[arg(long, env = "OS_APPLICATION_CREDENTIAL_SECRET", hide_env_values = true)]
    pub os_application_credential_secret: Option<String>,
    /// `[neutron_defaults] project` (the noauth project).
    #[arg(long, env = "KURYR_L7_PROJECT")]
    pub project: Option<String>,
    /// `[neutron_defaults] service_subnet`: the Router LB's VIP subnet.
    #[arg(long, env = "KURYR_L7_SERVICE_SUBNET")]
    pub service_subnet: Option<String>,
    /// `[neutron_defaults] external_svc_subnet`: the floating IP's subnet.
    #[arg(long, env = "KURYR_L7_EXTERNAL_SVC_SUBNET")]
    pub external_svc_subnet: Option<String>,
    /// `[neutron_defaults] floating_ip`: a pre-allocated floating IP to adopt.
    #[arg(long, env = "KURYR_L7_FLOATING_IP")]
    pub floating_ip: Option<IpAddr>,
    /// `[ingress] l7_router_uuid`: an existing load balancer to adopt.
    #[arg(long, env = "KURYR_L7_ROUTER_UUID")]
    pub l7_router_uuid: Option<String>,
    /// Barbican's URL, where the certificates of TLS listeners are stored (default: the
    /// catalog's `key-manager` with Keystone credentials; with noauth and no URL, Octavia gets
    /// no TLS listener).
    #[arg(long, env = "KURYR_L7_BARBICAN_URL")]
    pub barbican_url: Option<String>,
}

/// Where a service is and who the controller is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccess {
    /// The credentials.
    pub credentials: Credentials,
    /// The endpoint.
    pub endpoint: Endpoint,
}

/// Everything the `octavia` driver needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenStackSettings {
    /// Octavia.
    pub octavia: ServiceAccess,
    /// Neutron.
    pub neutron: ServiceAccess,
    /// `service_subnet`.
    pub service_subnet: Option<String>,
    /// `external_svc_subnet`.
    pub external_svc_subnet: Option<String>,
    /// `floating_ip`.
    pub floating_ip: Option<IpAddr>,
    /// `l7_router_uuid`.
    pub l7_router_uuid: Option<String>,
    /// The cluster's name in the ownership tags.
    pub cluster: String,
    /// The Node with the router state.
    pub node_name: String,
    /// Barbican (with Octavia's credentials), for TLS listeners; None: no TLS listener.
    pub barbican: Option<ServiceAccess>,
}

/// Why the flags and file do not make a configuration.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file is wrong.
    #[error(transparent)]
    File(#[from] ConfigError),
    /// A flag's value is wrong.
    #[error("--{flag}: {message}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Something the driver needs was given neither way.
    #[error("the octavia driver needs {0} (a flag or kuryr.conf)")]
    Missing(&'static str),
}

/// The file (when given) with the flags laid over it, and the file's warnings.
pub fn merged(args: &OpenStackArgs) -> Result<(KuryrConf, Vec<config::Warning>), SettingsError> {
    let (mut conf, warnings) = match &args.config_file {
        Some(path) => {
            let loaded = config::load(path)?;
            (loaded.conf, loaded.warnings)
        }
        None => (KuryrConf::default(), Vec::new()),
    };
    let over = |flag: &Option<String>, field: &mut Option<String>| {
        if let Some(value) = flag {
            *field = Some(value.clone());
        }
    };
    over(&args.octavia_url, &mut conf.octavia.endpoint_override);
    over(&args.neutron_url, &mut conf.neutron.endpoint_override);
    if let Some(name) = &args.os_auth_type {
        let auth_type = AuthType::from_name(name).ok_or_else(|| SettingsError::Flag {
            flag: "os-auth-type",
            message: format!("unknown auth_type {name:?} (expected {})", AuthType::NAMES),
        })?;
        conf.neutron.auth_type = Some(auth_type);
    }
    over(&args.os_auth_url, &mut conf.neutron.auth_url);
    over(&args.os_username, &mut conf.neutron.username);
    over(&args.os_password, &mut conf.neutron.password);
    over(&args.os_project_name, &mut conf.neutron.project_name);
    over(
        &args.os_application_credential_id,
        &mut conf.neutron.application_credential_id,
    );
    over(
        &args.os_application_credential_secret,
        &mut conf.neutron.application_credential_secret,
    );
    over(&args.project, &mut conf.neutron_defaults.project);
    over(
        &args.service_subnet,
        &mut conf.neutron_defaults.service_subnet,
    );
    over(
        &args.external_svc_subnet,
        &mut conf.neutron_defaults.external_svc_subnet,
    );
    if args.floating_ip.is_some() {
        conf.neutron_defaults.floating_ip = args.floating_ip;
    }
    over(&args.l7_router_uuid, &mut conf.ingress.l7_router_uuid);
    Ok((conf, warnings))
}

/// The file's driver, as the controller's.
pub fn file_driver(conf: &KuryrConf) -> Option<RouterDriver> {
    conf.kubernetes.l7_router_driver
}

impl OpenStackSettings {
    /// The settings `conf` (file and flags merged) gives, the Node named `node_name`.
    pub fn from_conf(
        conf: &KuryrConf,
        cluster: &str,
        node_name: String,
    ) -> Result<OpenStackSettings, SettingsError> {
        let neutron = conf.neutron_credentials().ok_or(SettingsError::Missing(
            "credentials: [neutron] auth_type (noauth with a project, password, \
             v3applicationcredential) or --os-auth-type",
        ))?;
        let octavia = conf.octavia_credentials().ok_or(SettingsError::Missing(
            "Octavia credentials ([octavia] auth_type, or [neutron]'s)",
        ))?;
        Ok(OpenStackSettings {
            octavia: ServiceAccess {
                credentials: octavia,
                endpoint: conf.octavia_endpoint(),
            },
            neutron: ServiceAccess {
                credentials: neutron,
                endpoint: conf.neutron_endpoint(),
            },
            service_subnet: conf.neutron_defaults.service_subnet.clone(),
            external_svc_subnet: conf.neutron_defaults.external_svc_subnet.clone(),
            floating_ip: conf.neutron_defaults.floating_ip,
            l7_router_uuid: conf.ingress.l7_router_uuid.clone(),
            cluster: cluster.to_owned(),
            node_name,
            barbican: None,
        }
        .with_barbican(None))
    }

    /// Barbican at `url` with Octavia's credentials; without a URL, the catalog's
    /// `key-manager` when the credentials are Keystone's, else none.
    pub fn with_barbican(mut self, url: Option<String>) -> OpenStackSettings {
        let credentials = self.octavia.credentials.clone();
        self.barbican = match url {
            Some(url) => Some(ServiceAccess {
                credentials,
                endpoint: Endpoint::Url(url.trim_end_matches('/').to_owned()),
            }),
            None if matches!(credentials, Credentials::NoAuth { .. }) => None,
            None => Some(ServiceAccess {
                credentials,
                endpoint: Endpoint::public("key-manager"),
            }),
        };
        self
    }
}
