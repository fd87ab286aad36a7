//! `kuryr-l7 vif-handler`: Kuryr's VIF handler. It watches pods, asks `nephrite-vif`'s
//! multi-VIF drivers which VIFs each pod needs, allocates them on a backend, records them in
//! the pod's `openstack.org/kuryr-vif` annotation for the CNI side, activates them, and
//! releases them when the pod goes (a pod finalizer holds the pod until then).
//!
//! - [`settings`]: `kuryr.conf` (`enabled_vif_drivers`, `pod_subnet`, `[sriov]`, credentials).
//! - [`handler`]: one pod's VIFs brought up to date or released, whatever the source.
//! - [`neutron`]: the Neutron backend (ports through `/v2.0/ports`).
//! - [`nimbess`]: the Nimbess backend (addresses on named networks through the node agent).
//! - [`kube`]: the Kubernetes source (Controller, finalizer, NetworkAttachmentDefinitions).
//! - [`dir`]: the directory source (records as files, no cluster).

pub mod dir;
pub mod handler;
pub mod kube;
pub mod neutron;
pub mod nimbess;
pub mod settings;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nephrite_runtime::{ClientArgs, LogFormat};
use nephrite_vif::{AttachmentFlavor, Config};

use crate::openstack::Session;
use handler::{Backend, Handler};
use neutron::{NeutronSettings, NeutronVifs};
use nimbess::NimbessVifs;

/// Which backend VIFs are made on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// Extra ports on named Nimbess networks through the node agent.
    Nimbess,
    /// Neutron ports.
    Neutron,
}

/// Where pods come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodSource {
    /// The cluster (in-cluster configuration or `KUBECONFIG`).
    Kube,
    /// Pods and NetworkAttachmentDefinitions in a directory (`dir:PATH`).
    Dir(PathBuf),
}

fn parse_source(text: &str) -> Result<PodSource, String> {
    match text {
        "kube" => Ok(PodSource::Kube),
        _ => match text.strip_prefix("dir:") {
            Some(path) if !path.is_empty() => Ok(PodSource::Dir(PathBuf::from(path))),
            _ => Err(format!("{text:?}: expected kube or dir:PATH")),
        },
    }
}

/// `kuryr-l7 vif-handler`.
#[derive(Debug, Clone, clap::Args)]
pub struct VifHandlerArgs {
    /// Where pods come from: `kube` or `dir:PATH`.
    #[arg(long, env = "KURYR_VIF_SOURCE", default_value = "kube", value_parser = parse_source)]
    pub source: PodSource,
    /// `kuryr.conf`: `[kubernetes] enabled_vif_drivers`, `[neutron_defaults] pod_subnet`,
    /// `[sriov]`, `[neutron]` credentials.
    #[arg(long, env = "KURYR_CONFIG_FILE")]
    pub config_file: PathBuf,
    /// The backend VIFs are made on.
    #[arg(long, env = "KURYR_VIF_BACKEND", value_enum, default_value = "nimbess")]
    pub backend: BackendKind,
    /// The Nimbess agent's socket (the `nimbess` backend).
    #[arg(
        long,
        env = "NIMBESS_AGENT_SOCKET",
        default_value = "/run/nimbess/agent.sock"
    )]
    pub agent_socket: PathBuf,
    /// Credentials presented to the Nimbess agent (the `nimbess` backend), when it requires
    /// them: an identity with its `vif` role.
    #[command(flatten)]
    pub agent_credentials: ClientArgs,
    /// The Nimbess network of every pod's main VIF (`eth0`; the `nimbess` backend): the
    /// network the node's default nimbess-cni configuration names.
    #[arg(long, env = "KURYR_POD_NETWORK")]
    pub pod_network: Option<String>,
    /// Handle only the pods scheduled on this node (`spec.nodeName`; the Pod and Node
    /// watches are narrowed to it). The `nimbess` backend talks to one node's agent, so it
    /// handles that node's pods only and defaults to this host's name (run the handler as a
    /// DaemonSet with `NODE_NAME` from the downward API); the `neutron` backend handles every
    /// pod of the cluster unless this is given.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// How long activation waits for a port to leave DOWN.
    #[arg(long, env = "KURYR_VIF_ACTIVATION_TIMEOUT", value_parser = humantime::parse_duration, default_value = "10s")]
    pub activation_timeout: Duration,
    /// The name Events are reported under.
    #[arg(long, env = "POD_NAME", default_value = "kuryr-vif-handler")]
    pub identity: String,
    /// Log line format.
    #[arg(long, env = "NEPHRITE_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// Why the handler cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `kuryr.conf` is unusable.
    #[error(transparent)]
    Settings(#[from] settings::SettingsError),
    /// The Neutron backend has no credentials.
    #[error("{0}: the neutron backend needs [neutron] auth_type (and its options)")]
    NoCredentials(String),
    /// The Nimbess backend needs the pod network.
    #[error(
        "the nimbess backend needs --pod-network (the Nimbess network of each pod's main VIF, as the node's nimbess-cni configuration names it)"
    )]
    NoPodNetwork,
    /// The Nimbess backend needs the node it serves, and the host name is unreadable.
    #[error(
        "the nimbess backend serves one node's pods and the host name is unreadable: pass --node-name (the node's name in the cluster)"
    )]
    NoNodeName,
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Http(String),
    /// No Kubernetes client.
    #[error("Kubernetes client: {0}")]
    Kube(String),
}

/// The handler `args` describe.
pub fn build(args: &VifHandlerArgs) -> Result<Handler, StartError> {
    let conf = settings::load(&args.config_file)?;
    let file = args.config_file.display().to_string();
    let config = Config {
        drivers: conf.drivers.clone(),
        attachments: match args.backend {
            BackendKind::Neutron => AttachmentFlavor::Neutron,
            BackendKind::Nimbess => AttachmentFlavor::Nimbess,
        },
        sriov_resources: conf.sriov_resources.clone(),
    };
    let backend = match args.backend {
        BackendKind::Nimbess => {
            let network = args
                .pod_network
                .clone()
                .filter(|n| !n.is_empty())
                .ok_or(StartError::NoPodNetwork)?;
            Backend::Nimbess(NimbessVifs::new(
                &args.agent_socket,
                args.agent_credentials.clone(),
                network,
            ))
        }
        BackendKind::Neutron => {
            let credentials = conf
                .conf
                .neutron_credentials()
                .ok_or_else(|| StartError::NoCredentials(file.clone()))?;
            let session = Session::new(credentials, Duration::from_secs(30))
                .map_err(|e| StartError::Http(e.to_string()))?;
            Backend::Neutron(NeutronVifs::new(
                Arc::new(session),
                conf.conf.neutron_endpoint(),
                NeutronSettings {
                    pod_subnet: conf.conf.neutron_defaults.pod_subnet.clone(),
                    physnet_subnets: conf.physnet_subnets.clone(),
                    activation_timeout: args.activation_timeout,
                },
            ))
        }
    };
    Ok(Handler::new(config, backend))
}

/// The node whose pods the handler takes (see [`VifHandlerArgs::node_name`]); `None`: all.
pub fn node_scope(args: &VifHandlerArgs) -> Result<Option<String>, StartError> {
    match (args.node_name.as_deref(), args.backend) {
        (Some(name), _) if !name.is_empty() => Ok(Some(name.to_owned())),
        (_, BackendKind::Nimbess) => nephrite_runtime::host::hostname()
            .map(Some)
            .ok_or(StartError::NoNodeName),
        (_, BackendKind::Neutron) => Ok(None),
    }
}

/// Run the handler until SIGTERM or SIGINT.
pub async fn run(args: VifHandlerArgs) -> Result<(), StartError> {
    let handler = build(&args)?;
    let node = node_scope(&args)?;
    let work = match &args.source {
        PodSource::Kube => {
            let client = ::kube::Client::try_default()
                .await
                .map_err(|e| StartError::Kube(e.to_string()))?;
            futures::future::Either::Left(kube::run(
                handler,
                client,
                args.identity.clone(),
                node.clone(),
            ))
        }
        PodSource::Dir(path) => {
            futures::future::Either::Right(dir::run(handler, path.clone(), node.clone()))
        }
    };
    tracing::info!(
        backend = ?args.backend,
        source = ?args.source,
        node = node.as_deref().unwrap_or("(every node)"),
        "vif-handler started"
    );
    tokio::select! {
        () = work => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted"),
        () = terminated() => tracing::info!("terminated"),
    }
    Ok(())
}

async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        args: VifHandlerArgs,
    }

    fn args(extra: &[&str]) -> VifHandlerArgs {
        let mut all = vec!["vif-handler", "--config-file", "kuryr.conf"];
        all.extend_from_slice(extra);
        Flags::try_parse_from(all).expect("flags").args
    }

    #[test]
    fn the_nimbess_backend_serves_one_node_and_neutron_every_pod_unless_told() {
        let given = ["--node-name", "node-7"];
        assert_eq!(
            node_scope(&args(&given)).unwrap().as_deref(),
            Some("node-7")
        );
        let neutron_given = [&given[..], &["--backend", "neutron"]].concat();
        assert_eq!(
            node_scope(&args(&neutron_given)).unwrap().as_deref(),
            Some("node-7")
        );
        assert_eq!(node_scope(&args(&["--backend", "neutron"])).unwrap(), None);
        // Without --node-name, this host's name: the agent beside the handler is this host's.
        assert_eq!(
            node_scope(&args(&[])).unwrap(),
            Some(nephrite_runtime::host::hostname().expect("host name"))
        );
    }
}
