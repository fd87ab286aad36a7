//! `kuryr-l7 controller`: keeps the L7 rules from a source (a directory, or Kubernetes), serves
//! them on the rules service, and drives a data plane (`embedded`: routers follow the rules
//! service; `haproxy`: a local HAProxy is configured and reloaded as well; `octavia`: the
//! Router LB's L7 policies in OpenStack Octavia, see [`crate::openstack`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use nephrite_l7::Options;
use nephrite_l7::gateway::capabilities::Driver as GatewayDriver;
use nephrite_runtime::{
    DaemonIdentity, GrpcServer, ServeArgs, ServeError, ServeReport, ShutdownHandle,
};
use tokio::sync::watch;

use crate::haproxy::{Haproxy, HaproxyError, HaproxySettings};
use crate::kubernetes::status::StatusSettings;
use crate::kubernetes::{KubeSettings, KubeSource, KubeSourceError};
use crate::machine::{PemError, hostname, read_certificate};
use crate::openstack;
use crate::openstack::config::RouterDriver;
use crate::openstack::neutron::Neutron;
use crate::openstack::octavia::Octavia;
use crate::openstack::settings::{
    OpenStackArgs, OpenStackSettings, SettingsError, file_driver, merged,
};
use crate::openstack::startup::StartError;
use crate::publisher::Publisher;
use crate::rules_auth;
use crate::rules_service::RulesService;
use crate::source::{Snapshot, SourceError, SourceSpec, snapshot_dir, watch_dir};

#[cfg(test)]
mod tests;

/// The data plane the controller drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Driver {
    /// kuryr-l7 routers follow the rules service.
    Embedded,
    /// A local HAProxy 2.6, configured and reloaded hitlessly (routers may follow as well).
    Haproxy,
    /// OpenStack Octavia L7 policies on the Router LB, reached through a Neutron floating IP
    /// (Kuryr's `neutron_l7_policy`).
    #[value(name = "octavia", alias = "neutron_l7_policy")]
    Octavia,
}

impl From<RouterDriver> for Driver {
    fn from(driver: RouterDriver) -> Driver {
        match driver {
            RouterDriver::Embedded => Driver::Embedded,
            RouterDriver::Haproxy => Driver::Haproxy,
            RouterDriver::NeutronL7Policy => Driver::Octavia,
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// `kuryr.conf` or the OpenStack flags do not make a configuration.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// `--driver octavia` without its settings (a bug in building the configuration).
    #[error("--driver octavia needs the OpenStack settings")]
    OpenStackMissing,
    /// The Octavia driver did not start.
    #[error(transparent)]
    OctaviaStart(#[from] StartError),
    /// The source could not be read.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The Kubernetes source could not start.
    #[error(transparent)]
    Kube(#[from] KubeSourceError),
    /// HAProxy could not be started.
    #[error(transparent)]
    Haproxy(#[from] HaproxyError),
    /// `--driver haproxy` without `--haproxy-listen`.
    #[error("--driver haproxy needs --haproxy-listen ADDR")]
    HaproxyListenMissing,
    /// The gRPC server failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// `--default-cert` or `--default-key` could not be read.
    #[error(transparent)]
    Certificate(#[from] PemError),
}

/// `kuryr-l7 controller` flags.
#[derive(Debug, clap::Args)]
// Every daemon has its own default port, so several run on one host (README, "Ports").
#[command(mut_arg("listen", |arg| arg.default_value("tcp://127.0.0.1:50081")))]
pub struct ControllerArgs {
    /// Where the objects come from: dir:PATH or kube.
    #[arg(long, env = "KURYR_L7_SOURCE")]
    pub source: SourceSpec,
    /// The data plane: embedded (routers follow the rules service), haproxy, or octavia
    /// (alias neutron_l7_policy; OpenStack). Default: kuryr.conf's `[kubernetes]
    /// l7_router_driver`, else embedded.
    #[arg(long, env = "KURYR_L7_DRIVER", value_enum)]
    pub driver: Option<Driver>,
    /// Our IngressClass.
    #[arg(long, env = "KURYR_L7_INGRESS_CLASS", default_value = nephrite_l7::translate::DEFAULT_INGRESS_CLASS)]
    pub ingress_class: String,
    /// The `controllerName` of the GatewayClasses we serve (Gateway API).
    #[arg(long, env = "KURYR_L7_GATEWAY_CONTROLLER", default_value = nephrite_l7::gateway::build::DEFAULT_CONTROLLER_NAME)]
    pub gateway_controller: String,
    /// --driver haproxy: HAProxy's plain HTTP address.
    #[arg(long, env = "KURYR_L7_HAPROXY_LISTEN")]
    pub haproxy_listen: Option<SocketAddr>,
    /// --driver haproxy: HAProxy's TLS address (termination by SNI with the Ingress and Route
    /// certificates, passthrough Routes).
    #[arg(long, env = "KURYR_L7_HAPROXY_LISTEN_TLS", requires = "haproxy_listen")]
    pub haproxy_listen_tls: Option<SocketAddr>,
    /// --driver haproxy: PEM certificate HAProxy presents to TLS hosts without their own.
    #[arg(long, env = "KURYR_L7_DEFAULT_CERT", requires = "default_key")]
    pub default_cert: Option<PathBuf>,
    /// PEM key of --default-cert.
    #[arg(long, env = "KURYR_L7_DEFAULT_KEY", requires = "default_cert")]
    pub default_key: Option<PathBuf>,
    /// --driver haproxy: directory for HAProxy's configuration, sockets and certificates.
    #[arg(
        long,
        env = "KURYR_L7_HAPROXY_DIR",
        default_value = "/run/kuryr-l7/haproxy"
    )]
    pub haproxy_dir: PathBuf,
    /// --driver haproxy: the haproxy binary.
    #[arg(long, env = "KURYR_L7_HAPROXY_BIN", default_value = "haproxy")]
    pub haproxy_bin: PathBuf,
    /// --source kube: namespace of the leader-election Lease.
    #[arg(long, env = "KURYR_L7_LEASE_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// --source kube: name of the leader-election Lease.
    #[arg(
        long,
        env = "KURYR_L7_LEASE_NAME",
        default_value = "kuryr-l7-controller"
    )]
    pub lease_name: String,
    /// --source kube: this controller's identity in the Lease (default: HOSTNAME-PID).
    #[arg(long, env = "KURYR_L7_IDENTITY")]
    pub identity: Option<String>,
    /// --source kube: the routers' addresses written to Ingress status.loadBalancer.ingress
    /// (IPs or host names, comma-separated; none leaves Ingress status alone).
    #[arg(long, env = "KURYR_L7_STATUS_ADDRESS", value_delimiter = ',')]
    pub status_address: Vec<String>,
    /// --source kube: routerName in Route status.
    #[arg(long, env = "KURYR_L7_STATUS_ROUTER_NAME", default_value = "kuryr-l7")]
    pub router_name: String,
    /// `kuryr.conf` and the OpenStack flags (`--driver octavia`).
    #[command(flatten)]
    pub openstack: Box<OpenStackArgs>,
    /// The shared serving flags.
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl ControllerArgs {
    /// The configuration these flags give (the default certificate read from its files,
    /// `--config-file` read, a flag winning over the file).
    pub fn into_config(self) -> Result<ControllerConfig, ControllerError> {
        let default_certificate =
            read_certificate(self.default_cert.as_deref(), self.default_key.as_deref())?;
        let (conf, warnings) = merged(&self.openstack)?;
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        let driver = self
            .driver
            .or(file_driver(&conf).map(Driver::from))
            .unwrap_or(Driver::Embedded);
        let openstack = match driver {
            Driver::Octavia => Some(
                OpenStackSettings::from_conf(
                    &conf,
                    &self.openstack.cluster_name,
                    self.openstack.node_name.clone().unwrap_or_else(hostname),
                )?
                .with_barbican(self.openstack.barbican_url.clone()),
            ),
            _ => None,
        };
        Ok(ControllerConfig {
            source: self.source,
            driver,
            openstack,
            options: Options {
                ingress_class: self.ingress_class,
                gateway: nephrite_l7::gateway::Settings {
                    controller_name: self.gateway_controller,
                    driver: match driver {
                        Driver::Embedded => GatewayDriver::Router,
                        Driver::Haproxy => GatewayDriver::Haproxy,
                        Driver::Octavia => GatewayDriver::Octavia,
                    },
                },
            },
            haproxy: self.haproxy_listen.map(|listen| HaproxySettings {
                binary: self.haproxy_bin,
                listen,
                listen_tls: self.haproxy_listen_tls,
                dir: self.haproxy_dir,
                default_certificate,
            }),
            kube: KubeSettings {
                lease_namespace: self.lease_namespace,
                lease_name: self.lease_name,
                identity: self
                    .identity
                    .unwrap_or_else(|| format!("{}-{}", hostname(), std::process::id())),
                status: StatusSettings {
                    addresses: self.status_address,
                    router_name: self.router_name,
                    canonical_hostname: None,
                },
            },
            serve: self.serve,
        })
    }
}

/// Everything `kuryr-l7 controller` is told.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Where the objects come from.
    pub source: SourceSpec,
    /// The data plane.
    pub driver: Driver,
    /// The `octavia` driver's settings (`--driver octavia` only).
    pub openstack: Option<OpenStackSettings>,
    /// Translation settings.
    pub options: Options,
    /// HAProxy settings (`--driver haproxy`); `None` when not given.
    pub haproxy: Option<HaproxySettings>,
    /// Kubernetes settings (`--source kube`).
    pub kube: KubeSettings,
    /// The shared serving flags.
    pub serve: ServeArgs,
}

/// Feeds every snapshot of `snapshots` to `publisher`.
pub async fn publish_all(publisher: Publisher, mut snapshots: watch::Receiver<Arc<Snapshot>>) {
    loop {
        let snapshot = snapshots.borrow_and_update().clone();
        publisher.publish(snapshot);
        if snapshots.changed().await.is_err() {
            return;
        }
    }
}

/// The `octavia` driver: the Router LB found or created (by the leader), its floating IP given
/// to status, then every snapshot synced.
#[allow(clippy::too_many_arguments)]
async fn octavia(
    clients: (Octavia, Neutron),
    settings: OpenStackSettings,
    kube: Option<kube::Client>,
    identity: String,
    publisher: Publisher,
    leadership: Option<watch::Receiver<bool>>,
    status_settings: Option<Arc<watch::Sender<StatusSettings>>>,
    shutdown: ShutdownHandle,
) {
    let snapshots = publisher.subscribe();
    let started = openstack::startup::start(
        clients,
        &settings,
        kube,
        &identity,
        &snapshots,
        leadership.clone(),
        &shutdown,
    )
    .await;
    let Ok((driver, state)) = started else {
        return;
    };
    // Ingress status carries the floating IP (unless --status-address says otherwise), Route
    // status it as routerCanonicalHostname.
    if let Some(status) = status_settings {
        status.send_modify(|status| {
            if status.addresses.is_empty() {
                status.addresses = vec![state.fip.clone()];
            }
            status.canonical_hostname.get_or_insert(state.fip.clone());
        });
    }
    driver.follow(snapshots, leadership, shutdown).await;
}

/// Runs the controller until SIGTERM/SIGINT (or the server's shutdown handle).
pub async fn run(config: ControllerConfig) -> Result<ServeReport, ControllerError> {
    if config.driver == Driver::Haproxy && config.haproxy.is_none() {
        return Err(ControllerError::HaproxyListenMissing);
    }
    let identity = DaemonIdentity::new("kuryr-l7-controller", env!("CARGO_PKG_VERSION"));
    let server = GrpcServer::from_args_with_roles(identity, &config.serve, rules_auth::roles())?;
    let shutdown = server.shutdown_handle();
    let publisher = Publisher::default();

    // The source comes first: the Router LB is created with the translation's tree on it,
    // and (with Kubernetes) only by the leader.
    let mut leadership = None;
    let mut status_settings = None;
    match &config.source {
        SourceSpec::Dir(dir) => {
            let first = Arc::new(snapshot_dir(dir, &config.options)?);
            first.log();
            publisher.publish(first.clone());
            let (sender, receiver) = watch::channel(first);
            tokio::spawn(watch_dir(dir.clone(), config.options.clone(), sender));
            tokio::spawn(publish_all(publisher.clone(), receiver));
        }
        SourceSpec::Kube => {
            let source = KubeSource::start(
                config.kube.clone(),
                config.options.clone(),
                publisher.clone(),
                shutdown.clone(),
            )
            .await?;
            leadership = Some(source.leadership());
            status_settings = Some(source.status_settings());
            tokio::spawn(source.run());
        }
    }

    let haproxy = match (config.driver, &config.haproxy) {
        (Driver::Haproxy, Some(settings)) => {
            let haproxy = Haproxy::start(settings.clone(), &publisher.current()).await?;
            tokio::spawn(haproxy.clone().follow(publisher.subscribe()));
            Some(haproxy)
        }
        (Driver::Haproxy, None) => return Err(ControllerError::HaproxyListenMissing),
        _ => None,
    };

    if config.driver == Driver::Octavia {
        let settings = config
            .openstack
            .clone()
            .ok_or(ControllerError::OpenStackMissing)?;
        let clients = openstack::startup::clients(&settings)?;
        let kube = match config.source {
            SourceSpec::Kube => Some(
                kube::Client::try_default()
                    .await
                    .map_err(KubeSourceError::from)?,
            ),
            SourceSpec::Dir(_) => None,
        };
        tokio::spawn(octavia(
            clients,
            settings,
            kube,
            config.kube.identity.clone(),
            publisher.clone(),
            leadership,
            status_settings,
            shutdown.clone(),
        ));
    }

    let service = RulesService::new(publisher, shutdown.clone());
    let report = server
        .add_service(service.into_server())
        .serve(&config.serve.listen)
        .await;
    if let Some(haproxy) = haproxy {
        haproxy.stop().await;
    }
    Ok(report?)
}
