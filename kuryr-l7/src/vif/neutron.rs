//! The Neutron backend: a pod's VIFs as Neutron ports.
//!
//! The `openstack` module's client knows ports as the L7 driver needs them (no MAC, no
//! binding); the port calls a VIF needs (`binding:vnic_type`, `binding:host_id`, `mac_address`,
//! updates) are made here on the shared [`Session`].
//!
//! A port this backend creates is named `kuryr-vif:<namespace>/<pod>:<key>`, has the pod's UID
//! as `device_id` and [`DEVICE_OWNER`], and is tagged [`pod_tag`] afterwards (Neutron 29 drops
//! tags in a create body). Creating looks for that name and `device_id` first, so a handler
//! killed between creating a port and recording it finds the port again instead of making a
//! second one; [`NeutronVifs::sweep`] finds what a pod left by `device_id` alone.
//!
//! A specific port (`spec-ports`) is the user's: allocating claims it (`device_id`,
//! `device_owner`, the pod's tag) only when no other device holds it, activating binds it to
//! the pod's node (`binding:host_id`), and releasing clears all three and removes the tag. It is
//! never deleted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nephrite_vif::{Allocation, Driver, Target, Vif, VifError, VnicType};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::openstack::{Answer, ApiError, Endpoint, Session};

/// `device_owner` of every port the handler creates or claims (Kuryr's).
pub const DEVICE_OWNER: &str = "compute:kuryr";
/// The name prefix of the ports the handler creates (specific ports keep their own names).
pub const PORT_NAME_PREFIX: &str = "kuryr-vif:";

/// The tag naming the pod on its ports: `kuryr-pod:<uid>` (Neutron tags are at most 60
/// characters: a namespace and name can be longer, a UID cannot).
pub fn pod_tag(uid: &str) -> String {
    format!("kuryr-pod:{uid}")
}

/// The pod a VIF is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodIdentity {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID: the ports' `device_id`.
    pub uid: String,
    /// The node it runs on (`binding:host_id` on activation), when scheduled.
    pub node: Option<String>,
}

/// Why a VIF could not be allocated, activated or released.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// Neutron refused or did not answer.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The pod's request is wrong (a port's vnic type).
    #[error(transparent)]
    Request(#[from] VifError),
    /// A subnet the pod asks for does not exist.
    #[error("{origin}: subnet {subnet} does not exist")]
    UnknownSubnet {
        /// What asks for it ([`nephrite_vif::VifRequest::origin`]).
        origin: String,
        /// The subnet.
        subnet: String,
    },
    /// A specific port does not exist.
    #[error("annotation spec-ports: port {0} does not exist")]
    UnknownPort(String),
    /// A specific port is held by another device; it was left untouched.
    #[error(
        "annotation spec-ports: port {port} is bound to device {device_id:?}, not this pod (left untouched)"
    )]
    PortTaken {
        /// The port.
        port: String,
        /// Its current `device_id`.
        device_id: String,
    },
    /// An SR-IOV physnet with no subnet configured (`[sriov] default_physnet_subnets`).
    #[error("physical network {0} has no subnet in [sriov] default_physnet_subnets")]
    NoPhysnetSubnet(String),
    /// The target is not a Neutron one.
    #[error("{0:?} is a Nimbess network; the Neutron backend has subnets and ports")]
    Unsupported(Target),
    /// The main VIF needs `[neutron_defaults] pod_subnet`.
    #[error("[neutron_defaults] pod_subnet is not set")]
    NoPodSubnet,
    /// The Nimbess agent refused or did not answer (its message names the network or VIF).
    #[error(transparent)]
    Nimbess(#[from] nimbess_client::VifCallError),
    /// The target is not a Nimbess network.
    #[error(
        "{0:?} is a Neutron target (subnet, port or SR-IOV VF); the Nimbess backend has networks"
    )]
    NotNimbess(Target),
    /// A network a request names is not one the Nimbess agent serves (a
    /// NetworkAttachmentDefinition naming a network the node does not have).
    #[error("{origin}: network {network:?} is not served by the nimbess agent")]
    UnknownNetwork {
        /// What asks for it ([`nephrite_vif::VifRequest::origin`]).
        origin: String,
        /// The network.
        network: String,
    },
    /// A recorded VIF the Nimbess agent no longer holds.
    #[error("the nimbess agent no longer holds VIF {0}")]
    VifGone(String),
}

impl BackendError {
    /// Whether trying again later can help (Neutron unreachable or busy), as opposed to a
    /// request that stays wrong until the pod or Neutron's objects change.
    pub fn is_retryable(&self) -> bool {
        match self {
            BackendError::Api(e) => e.is_retryable(),
            BackendError::Nimbess(e) => e.is_retryable(),
            _ => false,
        }
    }
}

/// A port as a VIF needs it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VifPort {
    /// Id.
    pub id: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Network.
    pub network_id: String,
    /// MAC.
    #[serde(default)]
    pub mac_address: String,
    /// Addresses.
    #[serde(default)]
    pub fixed_ips: Vec<PortAddress>,
    /// `device_id`.
    #[serde(default)]
    pub device_id: String,
    /// `device_owner`.
    #[serde(default)]
    pub device_owner: String,
    /// `binding:vnic_type`.
    #[serde(rename = "binding:vnic_type", default)]
    pub vnic_type: String,
    /// `binding:host_id`.
    #[serde(rename = "binding:host_id", default)]
    pub host_id: String,
    /// `ACTIVE`, `DOWN`, `BUILD`, …
    #[serde(default)]
    pub status: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A fixed IP of a [`VifPort`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PortAddress {
    /// Subnet.
    pub subnet_id: String,
    /// Address.
    pub ip_address: String,
}

#[derive(Debug, Clone, Deserialize)]
struct SubnetInfo {
    network_id: String,
    cidr: String,
    #[serde(default)]
    gateway_ip: Option<String>,
}

/// How activation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activation {
    /// The port left `DOWN`.
    Active,
    /// Still `DOWN` after the timeout: no agent bound it.
    StillDown {
        /// The port.
        port: String,
        /// Its last status.
        status: String,
        /// Its `binding:vif_type` (`binding_failed` when no agent could bind it).
        vif_type: String,
    },
}

/// Neutron settings of the handler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeutronSettings {
    /// `[neutron_defaults] pod_subnet`: the main VIF's subnet.
    pub pod_subnet: Option<String>,
    /// `[sriov] default_physnet_subnets`: physnet → subnet of its VFs' ports.
    pub physnet_subnets: BTreeMap<String, String>,
    /// How long activation waits for a port to leave `DOWN`.
    pub activation_timeout: Duration,
}

/// Pod VIFs on Neutron ports.
#[derive(Debug, Clone)]
pub struct NeutronVifs {
    session: Arc<Session>,
    endpoint: Endpoint,
    settings: NeutronSettings,
}

/// `text` percent-encoded for a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `<address>/<prefix length of cidr>`.
fn with_prefix(address: &str, cidr: &str) -> String {
    match cidr.split_once('/') {
        Some((_, len)) => format!("{address}/{len}"),
        None => address.to_owned(),
    }
}

impl NeutronVifs {
    /// A backend on the Neutron at `endpoint`.
    pub fn new(session: Arc<Session>, endpoint: Endpoint, settings: NeutronSettings) -> Self {
        NeutronVifs {
            session,
            endpoint,
            settings,
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, ApiError> {
        let base = self.session.url_of(&self.endpoint).await?;
        self.session
            .send(method, format!("{base}/v2.0/{path}"), body)
            .await
    }

    /// A port; None when it does not exist.
    pub async fn port(&self, id: &str) -> Result<Option<VifPort>, ApiError> {
        let answer = self
            .call(Method::GET, &format!("ports/{}", encode(id)), None)
            .await?;
        if answer.status == 404 {
            return Ok(None);
        }
        answer.success()?.field("port").map(Some)
    }

    /// Ports matching `filters`.
    pub async fn ports(&self, filters: &[(&str, &str)]) -> Result<Vec<VifPort>, ApiError> {
        let query: Vec<String> = filters
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        self.call(Method::GET, &format!("ports?{}", query.join("&")), None)
            .await?
            .success()?
            .field("ports")
    }

    /// Every port tagged as the pod's (`kuryr-pod:<uid>`).
    pub async fn tagged_ports(&self, uid: &str) -> Result<Vec<VifPort>, ApiError> {
        self.ports(&[("tags", &pod_tag(uid))]).await
    }

    async fn update_port(&self, id: &str, body: Value) -> Result<VifPort, ApiError> {
        self.call(
            Method::PUT,
            &format!("ports/{}", encode(id)),
            Some(&json!({ "port": body })),
        )
        .await?
        .success()?
        .field("port")
    }

    async fn set_tags(&self, id: &str, tags: &[String]) -> Result<(), ApiError> {
        self.call(
            Method::PUT,
            &format!("ports/{}/tags", encode(id)),
            Some(&json!({ "tags": tags })),
        )
        .await?
        .success()
        .map(drop)
    }

    /// Subnet `id`, which `origin` asks for.
    async fn subnet(&self, id: &str, origin: &str) -> Result<SubnetInfo, BackendError> {
        let answer = self
            .call(Method::GET, &format!("subnets/{}", encode(id)), None)
            .await?;
        if answer.status == 404 {
            return Err(BackendError::UnknownSubnet {
                origin: origin.to_owned(),
                subnet: id.to_owned(),
            });
        }
        Ok(answer.success()?.field("subnet")?)
    }

    /// The VIF a port is, for `allocation`.
    async fn vif_of(
        &self,
        port: &VifPort,
        allocation: &Allocation,
        driver: Driver,
        vnic_type: VnicType,
    ) -> Result<Vif, BackendError> {
        let mut addresses = Vec::new();
        let mut gateway = None;
        for fixed in &port.fixed_ips {
            let subnet = self
                .subnet(&fixed.subnet_id, &format!("port {}", port.id))
                .await?;
            addresses.push(with_prefix(&fixed.ip_address, &subnet.cidr));
            if gateway.is_none() {
                gateway = subnet.gateway_ip.filter(|g| !g.is_empty());
            }
        }
        Ok(Vif {
            key: allocation.request.key.clone(),
            ifname: allocation.ifname.clone(),
            driver,
            target: allocation.request.target.clone(),
            vnic_type,
            network: port.network_id.clone(),
            addresses,
            gateway,
            mac: port.mac_address.clone(),
            backend_id: port.id.clone(),
            active: port.status == "ACTIVE",
        })
    }

    /// The port name of `key` for `pod`.
    pub fn port_name(pod: &PodIdentity, key: &str) -> String {
        format!("{PORT_NAME_PREFIX}{}/{}:{key}", pod.namespace, pod.name)
    }

    /// Allocate one VIF: create (or find again) a port, or claim a specific port.
    pub async fn allocate(
        &self,
        pod: &PodIdentity,
        allocation: &Allocation,
    ) -> Result<Vif, BackendError> {
        let request = &allocation.request;
        let (subnet_id, vnic_type) = match &request.target {
            Target::Port { id } => return self.claim(pod, allocation, id).await,
            Target::PodNetwork => (
                self.settings
                    .pod_subnet
                    .clone()
                    .ok_or(BackendError::NoPodSubnet)?,
                VnicType::Normal,
            ),
            Target::Subnet { id } => (id.clone(), request.vnic_type.unwrap_or(VnicType::Normal)),
            Target::Physnet { physnet } => (
                self.settings
                    .physnet_subnets
                    .get(physnet)
                    .cloned()
                    .ok_or_else(|| BackendError::NoPhysnetSubnet(physnet.clone()))?,
                VnicType::Direct,
            ),
            Target::Network { .. } => {
                return Err(BackendError::Unsupported(request.target.clone()));
            }
        };
        let subnet = self.subnet(&subnet_id, &request.origin()).await?;
        let name = Self::port_name(pod, &request.key);
        let existing = self
            .ports(&[("device_id", &pod.uid), ("name", &name)])
            .await?;
        let port = match existing.into_iter().next() {
            Some(port) => port,
            None => {
                let body = json!({"port": {
                    "name": name,
                    "network_id": subnet.network_id,
                    "fixed_ips": [{"subnet_id": subnet_id}],
                    "device_id": pod.uid,
                    "device_owner": DEVICE_OWNER,
                    "binding:vnic_type": vnic_type.name(),
                    "description": format!("kuryr-l7 vif-handler: pod {}/{} {}", pod.namespace, pod.name, allocation.ifname),
                    "project_id": self.session.project_id().await?,
                }});
                self.call(Method::POST, "ports", Some(&body))
                    .await?
                    .success()?
                    .field("port")?
            }
        };
        let tag = pod_tag(&pod.uid);
        if !port.tags.contains(&tag) {
            self.set_tags(&port.id, &[tag]).await?;
        }
        self.vif_of(&port, allocation, request.driver, vnic_type)
            .await
    }

    /// Claim specific port `id` for the pod, unless another device holds it.
    async fn claim(
        &self,
        pod: &PodIdentity,
        allocation: &Allocation,
        id: &str,
    ) -> Result<Vif, BackendError> {
        let port = self
            .port(id)
            .await?
            .ok_or_else(|| BackendError::UnknownPort(id.to_owned()))?;
        if !port.device_id.is_empty() && port.device_id != pod.uid {
            return Err(BackendError::PortTaken {
                port: id.to_owned(),
                device_id: port.device_id,
            });
        }
        let (driver, vnic_type) = VnicType::driver_of_port(id, &port.vnic_type)?;
        let port = if port.device_id == pod.uid && port.device_owner == DEVICE_OWNER {
            port
        } else {
            self.update_port(
                id,
                json!({"device_id": pod.uid, "device_owner": DEVICE_OWNER}),
            )
            .await?
        };
        let tag = pod_tag(&pod.uid);
        if !port.tags.contains(&tag) {
            let mut tags = port.tags.clone();
            tags.push(tag);
            self.set_tags(id, &tags).await?;
        }
        self.vif_of(&port, allocation, driver, vnic_type).await
    }

    /// Bind the VIF's port to the pod's node and wait (up to the configured timeout) for it to
    /// leave `DOWN`.
    pub async fn activate(&self, pod: &PodIdentity, vif: &Vif) -> Result<Activation, BackendError> {
        let port = match self.port(&vif.backend_id).await? {
            Some(port) => port,
            None => return Err(BackendError::UnknownPort(vif.backend_id.clone())),
        };
        if port.device_id != pod.uid {
            return Err(BackendError::PortTaken {
                port: port.id,
                device_id: port.device_id,
            });
        }
        if let Some(node) = &pod.node
            && port.host_id != *node
        {
            self.update_port(&port.id, json!({"binding:host_id": node}))
                .await?;
        }
        let deadline = tokio::time::Instant::now() + self.settings.activation_timeout;
        loop {
            let answer = self
                .call(Method::GET, &format!("ports/{}", encode(&port.id)), None)
                .await?
                .success()?;
            let raw: Value = answer.field("port")?;
            let status = raw["status"].as_str().unwrap_or_default().to_owned();
            if status != "DOWN" && !status.is_empty() {
                return Ok(Activation::Active);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Activation::StillDown {
                    port: port.id,
                    status,
                    vif_type: raw["binding:vif_type"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Release a VIF: delete the port the handler made, unbind a specific port (only if the
    /// pod still holds it).
    pub async fn release(&self, pod: &PodIdentity, vif: &Vif) -> Result<(), BackendError> {
        match &vif.target {
            Target::Port { id } => self.unbind(pod, id).await,
            _ => self.delete(&vif.backend_id).await,
        }
    }

    async fn delete(&self, id: &str) -> Result<(), BackendError> {
        let answer = self
            .call(Method::DELETE, &format!("ports/{}", encode(id)), None)
            .await?;
        if answer.status != 404 {
            answer.success()?;
        }
        Ok(())
    }

    async fn unbind(&self, pod: &PodIdentity, id: &str) -> Result<(), BackendError> {
        let Some(port) = self.port(id).await? else {
            return Ok(());
        };
        let tag = pod_tag(&pod.uid);
        if port.device_id == pod.uid {
            self.update_port(
                id,
                json!({"device_id": "", "device_owner": "", "binding:host_id": ""}),
            )
            .await?;
        }
        if port.tags.contains(&tag) {
            let tags: Vec<String> = port.tags.into_iter().filter(|t| *t != tag).collect();
            self.set_tags(id, &tags).await?;
        }
        Ok(())
    }

    /// Release whatever the pod still holds on Neutron, recorded or not: ports it made are
    /// deleted, specific ports unbound. Returns how many ports were touched.
    pub async fn sweep(&self, pod: &PodIdentity) -> Result<usize, BackendError> {
        let mut seen: Vec<VifPort> = self.ports(&[("device_id", &pod.uid)]).await?;
        for port in self.tagged_ports(&pod.uid).await? {
            if !seen.iter().any(|p| p.id == port.id) {
                seen.push(port);
            }
        }
        for port in &seen {
            if port.name.starts_with(PORT_NAME_PREFIX) && port.device_id == pod.uid {
                self.delete(&port.id).await?;
            } else {
                self.unbind(pod, &port.id).await?;
            }
        }
        Ok(seen.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_take_their_subnets_prefix_length() {
        assert_eq!(with_prefix("10.1.0.5", "10.1.0.0/24"), "10.1.0.5/24");
        assert_eq!(with_prefix("fd00::5", "fd00::/64"), "fd00::5/64");
    }

    #[test]
    fn names_and_tags_are_encoded_for_queries() {
        assert_eq!(
            encode("kuryr-vif:ns/p:subnet/a/0"),
            "kuryr-vif%3Ans%2Fp%3Asubnet%2Fa%2F0"
        );
        assert!(pod_tag("0f8fad5b-d9cb-469f-a165-70867728950e").len() <= 60);
    }
}
