//! The CNI side of kuryr-l7's VIFs: what `nimbess-cni` plugs into a pod's namespace.
//!
//! When the runtime says which pod the sandbox is for (`CNI_ARGS` `K8S_POD_NAMESPACE`,
//! `K8S_POD_NAME`, `K8S_POD_UID`) and a cluster is reachable (the network configuration's
//! `kubeconfig` key, Multus's convention, or `KUBECONFIG`), ADD reads the Pod:
//!
//! - its `openstack.org/kuryr-vif` record (written by `kuryr-l7 vif-handler`) gives the main
//!   VIF, plugged as `CNI_IFNAME` with the address the handler reserved, and the additional
//!   VIFs, plugged as the record's `eth1`, `eth2`, … on their networks;
//! - when the pod asks for more networks (`k8s.v1.cni.cncf.io/networks`) than the record
//!   holds yet, ADD waits for the handler, up to the configuration's `vifTimeout` seconds
//!   ([`DEFAULT_VIF_TIMEOUT`]), then answers 11 (try again later).
//!
//! A record or a networks annotation that does not parse, a VIF not on a Nimbess network, or a
//! main VIF on another network than the configuration's is refused with code 7 naming the
//! annotation, before anything is plugged. A record carrying the handler's failure (its
//! request is wrong, or no VF is free on the node) fails ADD at once with the handler's
//! message: code 7, or 11 (try again later) when waiting can help ([`refused`]). [`plan`]
//! decides, pure; [`read_pod`] and [`wait_for_record`] read the cluster.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use nephrite_vif::annotations::{NETWORKS, parse_networks};
use nephrite_vif::{FailureKind, Target, VIF_ANNOTATION, VifRecord};
use nimbess_client::cni::{CniError, CniResult, ErrorCode};
use nimbess_client::vif::VifRef;

/// How long ADD waits for the handler's record unless the configuration says `vifTimeout`.
pub const DEFAULT_VIF_TIMEOUT: Duration = Duration::from_secs(30);
/// Between two reads of the pod while waiting.
const POLL: Duration = Duration::from_millis(200);

/// Which pod the sandbox is for, from `CNI_ARGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// `K8S_POD_NAMESPACE`.
    pub namespace: String,
    /// `K8S_POD_NAME`.
    pub name: String,
    /// `K8S_POD_UID`, when given.
    pub uid: Option<String>,
}

impl PodRef {
    /// The pod `CNI_ARGS` names, if it names one.
    pub fn from_args(args: &BTreeMap<String, String>) -> Option<PodRef> {
        let get = |k: &str| args.get(k).filter(|v| !v.is_empty()).cloned();
        Some(PodRef {
            namespace: get("K8S_POD_NAMESPACE")?,
            name: get("K8S_POD_NAME")?,
            uid: get("K8S_POD_UID"),
        })
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What ADD reads of the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// Its UID.
    pub uid: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
}

/// One interface to plug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plug {
    /// Its name in the pod.
    pub ifname: String,
    /// The network.
    pub network: String,
    /// The VIF it plugs, `None` for an address the agent allocates now.
    pub vif: Option<VifRef>,
}

/// What to do with an ADD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Plug these, the main interface first.
    Plug(Vec<Plug>),
    /// The pod asks for `asked` networks, the record holds `recorded`: wait for the handler.
    Wait {
        /// Networks the pod asks for.
        asked: usize,
        /// VIFs on networks the record holds.
        recorded: usize,
    },
}

fn invalid(annotation: &str, pod: &PodRef, error: impl std::fmt::Display) -> CniError {
    CniError::new(
        ErrorCode::InvalidConfig,
        format!("pod {pod}: annotation {annotation}: {error}"),
    )
}

/// What to plug for `pod` whose main interface is `ifname` on `network`.
///
/// # Errors
/// Code 7 naming the annotation: a record or networks annotation that does not parse, a
/// recorded VIF not on a Nimbess network, a main VIF on another network than `network`, or an
/// additional VIF on the main interface's name.
pub fn plan(
    pod: &PodRef,
    facts: &PodFacts,
    ifname: &str,
    network: &str,
) -> Result<Decision, CniError> {
    let asked = match facts.annotations.get(NETWORKS) {
        Some(value) => parse_networks(&pod.namespace, value)
            .map_err(|e| CniError::new(ErrorCode::InvalidConfig, format!("pod {pod}: {e}")))?
            .len(),
        None => 0,
    };
    let record = match facts.annotations.get(VIF_ANNOTATION) {
        Some(value) => VifRecord::parse(value)
            .map_err(|e| CniError::new(ErrorCode::InvalidConfig, format!("pod {pod}: {e}")))?,
        None => VifRecord::default(),
    };
    let vif_ref = |key: &str| VifRef {
        pod_uid: facts.uid.clone(),
        key: key.to_owned(),
    };
    let mut main = Plug {
        ifname: ifname.to_owned(),
        network: network.to_owned(),
        vif: None,
    };
    let mut extra = Vec::new();
    for vif in &record.vifs {
        match &vif.target {
            Target::PodNetwork => {
                if vif.network != network {
                    return Err(invalid(
                        VIF_ANNOTATION,
                        pod,
                        format!(
                            "the main VIF is on network {}, the network configuration is {network}",
                            vif.network
                        ),
                    ));
                }
                main.vif = Some(vif_ref(&vif.key));
            }
            Target::Network { .. } => {
                if vif.ifname == ifname {
                    return Err(invalid(
                        VIF_ANNOTATION,
                        pod,
                        format!("VIF {} asks for the main interface {ifname}", vif.key),
                    ));
                }
                extra.push(Plug {
                    ifname: vif.ifname.clone(),
                    network: vif.network.clone(),
                    vif: Some(vif_ref(&vif.key)),
                });
            }
            other => {
                return Err(invalid(
                    VIF_ANNOTATION,
                    pod,
                    format!(
                        "VIF {} is {other:?}, not on a Nimbess network (is the handler's backend neutron?)",
                        vif.key
                    ),
                ));
            }
        }
    }
    if extra.len() < asked {
        return Ok(Decision::Wait {
            asked,
            recorded: extra.len(),
        });
    }
    let mut plugs = vec![main];
    plugs.extend(extra);
    Ok(Decision::Plug(plugs))
}

/// The failure the handler recorded for `pod`, as ADD's error: code 7 when the pod's request
/// must change (an annotation, an unknown network), 11 when waiting can help (no free VF). A
/// record that does not parse is left to [`plan`], which names it.
///
/// # Errors
/// The recorded failure.
pub fn refused(pod: &PodRef, facts: &PodFacts) -> Result<(), CniError> {
    let Some(failure) = facts
        .annotations
        .get(VIF_ANNOTATION)
        .and_then(|value| VifRecord::parse(value).ok())
        .and_then(|record| record.failure)
    else {
        return Ok(());
    };
    let code = match failure.kind {
        FailureKind::Invalid => ErrorCode::InvalidConfig,
        FailureKind::Unavailable => ErrorCode::TryAgainLater,
    };
    Err(CniError::new(
        code,
        format!(
            "pod {pod}: kuryr-l7 vif-handler: {} ({VIF_ANNOTATION})",
            failure.message
        ),
    ))
}

/// The kubeconfig to read pods with: the network configuration's `kubeconfig` (Multus's
/// convention), else `KUBECONFIG` of the plugin's environment.
pub fn kubeconfig_path(
    conf: &serde_json::Value,
    env: &BTreeMap<String, String>,
) -> Option<PathBuf> {
    conf.get("kubeconfig")
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env.get("KUBECONFIG")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
}

/// The configuration's `vifTimeout` (seconds), else [`DEFAULT_VIF_TIMEOUT`].
///
/// # Errors
/// Code 7 when it is not a non-negative number.
pub fn vif_timeout(conf: &serde_json::Value) -> Result<Duration, CniError> {
    match conf.get("vifTimeout") {
        None => Ok(DEFAULT_VIF_TIMEOUT),
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 3600.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                CniError::new(
                    ErrorCode::InvalidConfig,
                    format!("network configuration field \"vifTimeout\" must be seconds (0–3600), not {v}"),
                )
            }),
    }
}

/// A client of the cluster in `kubeconfig`.
///
/// # Errors
/// Code 7 when the file cannot be read or used.
pub async fn client(kubeconfig: &Path) -> Result<kube::Client, CniError> {
    let refused = |e: String| {
        CniError::new(
            ErrorCode::InvalidConfig,
            format!("kubeconfig {}: {e}", kubeconfig.display()),
        )
    };
    let file =
        kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| refused(e.to_string()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| refused(e.to_string()))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(10));
    kube::Client::try_from(config).map_err(|e| refused(e.to_string()))
}

/// Read the pod.
///
/// # Errors
/// Code 11 when the API server does not answer or the pod is not (or no longer) the one the
/// runtime names by UID; code 7 when it does not exist.
pub async fn read_pod(client: &kube::Client, pod: &PodRef) -> Result<PodFacts, CniError> {
    let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), &pod.namespace);
    let object = api
        .get_opt(&pod.name)
        .await
        .map_err(|e| {
            CniError::new(ErrorCode::TryAgainLater, format!("reading pod {pod}")).with_details(e)
        })?
        .ok_or_else(|| {
            CniError::new(
                ErrorCode::InvalidConfig,
                format!("pod {pod} does not exist"),
            )
        })?;
    let uid = object.metadata.uid.clone().unwrap_or_default();
    if let Some(want) = &pod.uid
        && *want != uid
    {
        return Err(CniError::new(
            ErrorCode::TryAgainLater,
            format!("pod {pod} is UID {uid}, the sandbox is for UID {want}"),
        ));
    }
    Ok(PodFacts {
        uid,
        annotations: object.metadata.annotations.unwrap_or_default(),
    })
}

/// Read the pod until [`plan`] has interfaces to plug, at most `timeout`.
///
/// # Errors
/// [`read_pod`]'s, [`refused`]'s and [`plan`]'s; code 11 when the handler has not recorded the
/// VIFs the pod asks for in time.
pub async fn wait_for_record(
    client: &kube::Client,
    pod: &PodRef,
    ifname: &str,
    network: &str,
    timeout: Duration,
) -> Result<Vec<Plug>, CniError> {
    let deadline = Instant::now() + timeout;
    loop {
        let facts = read_pod(client, pod).await?;
        refused(pod, &facts)?;
        match plan(pod, &facts, ifname, network)? {
            Decision::Plug(plugs) => return Ok(plugs),
            Decision::Wait { asked, recorded } if Instant::now() >= deadline => {
                return Err(CniError::new(
                    ErrorCode::TryAgainLater,
                    format!(
                        "pod {pod} asks for {asked} networks ({NETWORKS}); after {}s its {VIF_ANNOTATION} records {recorded}: is kuryr-l7 vif-handler running?",
                        timeout.as_secs()
                    ),
                ));
            }
            Decision::Wait { .. } => tokio::time::sleep(POLL).await,
        }
    }
}

/// The results of the plugged interfaces, the main one first, as one result: every interface
/// with its sandbox, every address pointing at its interface, the main interface's routes and
/// the others' connected routes (the pod's default route is the main interface's).
pub fn merge(results: Vec<CniResult>) -> CniResult {
    let mut merged = CniResult {
        interfaces: Vec::new(),
        ips: Vec::new(),
        routes: Vec::new(),
        dns: nimbess_client::cni::Dns::default(),
    };
    for (n, result) in results.into_iter().enumerate() {
        let offset = u32::try_from(merged.interfaces.len()).unwrap_or(u32::MAX);
        merged.ips.extend(result.ips.into_iter().map(|mut ip| {
            ip.interface = ip.interface.map(|i| i + offset);
            ip
        }));
        merged.interfaces.extend(result.interfaces);
        if n == 0 {
            merged.routes.extend(result.routes);
            merged.dns = result.dns;
        } else {
            merged
                .routes
                .extend(result.routes.into_iter().filter(|r| r.dst.prefix() != 0));
        }
    }
    merged
}

#[cfg(test)]
mod tests;
