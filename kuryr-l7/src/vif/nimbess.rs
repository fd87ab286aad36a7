//! The Nimbess backend: a pod's VIFs as addresses reserved on named Nimbess networks by the
//! node's agent (`nimbess.cni.v1.Vifs` on its socket, through the agent's client crate's
//! [`VifClient`]).
//!
//! A VIF is the agent's per (pod UID, request key): allocating asks for it on the request's
//! network (the main VIF on `--pod-network`, an NPWG attachment on the network its
//! NetworkAttachmentDefinition's `spec.config` names) and gets the same address back when it
//! exists, so a handler killed between allocating and recording makes no second one.
//! [`NimbessVifs::sweep`] releases what the agent holds for a pod beyond the keys the pod's
//! record keeps (a VIF allocated for a request that changed while the handler was down).
//! The agent reserves each VIF's MAC with its address, so the record carries both before the
//! pod is plugged; `nimbess-cni` plugs each recorded VIF into the pod's namespace at ADD.

use std::collections::BTreeSet;
use std::path::Path;

use nephrite_runtime::ClientArgs;
use nephrite_vif::{Allocation, Target, Vif, VnicType};
use nimbess_client::vif::{VifClaim, VifRef, VifView};
use nimbess_client::{VifCallError, VifClient};

use super::neutron::{Activation, BackendError, PodIdentity};

/// Pod VIFs on Nimbess networks.
#[derive(Debug, Clone)]
pub struct NimbessVifs {
    client: VifClient,
    pod_network: String,
}

fn vif_ref(pod: &PodIdentity, key: &str) -> VifRef {
    VifRef {
        pod_uid: pod.uid.clone(),
        key: key.to_owned(),
    }
}

/// The record's backend id of a VIF: `<pod UID>/<key>`, what the agent knows it by.
pub fn backend_id(vif: &VifRef) -> String {
    vif.to_string()
}

impl NimbessVifs {
    /// A backend on the agent at `socket`, presenting `credentials`; main VIFs go on
    /// `pod_network`.
    pub fn new(socket: &Path, credentials: ClientArgs, pod_network: String) -> Self {
        NimbessVifs {
            client: VifClient::with_credentials(socket, credentials),
            pod_network,
        }
    }

    /// The agent's VIFs of a pod.
    pub async fn vifs(&self, pod: &PodIdentity) -> Result<Vec<VifView>, BackendError> {
        Ok(self.client.list(Some(&pod.uid)).await?)
    }

    /// Allocate one VIF (or find it again).
    pub async fn allocate(
        &self,
        pod: &PodIdentity,
        allocation: &Allocation,
    ) -> Result<Vif, BackendError> {
        let request = &allocation.request;
        let network = match &request.target {
            Target::PodNetwork => self.pod_network.clone(),
            Target::Network { name } => name.clone(),
            other => return Err(BackendError::NotNimbess(other.clone())),
        };
        if request.vnic_type == Some(VnicType::Direct) {
            return Err(BackendError::NotNimbess(request.target.clone()));
        }
        let view = self
            .client
            .allocate(&VifClaim {
                vif: vif_ref(pod, &request.key),
                network: network.clone(),
                pod_namespace: pod.namespace.clone(),
                pod_name: pod.name.clone(),
            })
            .await
            .map_err(|e| match e {
                // The agent's only NOT_FOUND for an allocation: it has no such network.
                VifCallError::NotFound(_) => BackendError::UnknownNetwork {
                    origin: request.origin(),
                    network: network.clone(),
                },
                e => e.into(),
            })?;
        Ok(Vif {
            key: request.key.clone(),
            ifname: allocation.ifname.clone(),
            driver: request.driver,
            target: request.target.clone(),
            vnic_type: VnicType::Normal,
            network,
            addresses: vec![view.entry.address.to_string()],
            gateway: view.gateway.map(|g| g.to_string()),
            mac: view.entry.mac.map(|m| m.to_string()).unwrap_or_default(),
            backend_id: backend_id(&view.entry.vif),
            active: false,
        })
    }

    /// Active once the agent holds the VIF (there is no binding step: the agent plugs it at
    /// the pod's ADD).
    pub async fn activate(&self, pod: &PodIdentity, vif: &Vif) -> Result<Activation, BackendError> {
        match self.client.get(&vif_ref(pod, &vif.key)).await? {
            Some(_) => Ok(Activation::Active),
            None => Err(BackendError::VifGone(backend_id(&vif_ref(pod, &vif.key)))),
        }
    }

    /// Release one VIF (nothing when the agent no longer has it).
    pub async fn release(&self, pod: &PodIdentity, vif: &Vif) -> Result<(), BackendError> {
        self.client.release(&vif_ref(pod, &vif.key)).await?;
        Ok(())
    }

    /// Release every VIF the agent holds for `pod` whose key is not in `keep`; returns how
    /// many.
    pub async fn sweep(
        &self,
        pod: &PodIdentity,
        keep: &BTreeSet<String>,
    ) -> Result<usize, BackendError> {
        let mut released = 0;
        for view in self.vifs(pod).await? {
            if !keep.contains(&view.entry.vif.key) && self.client.release(&view.entry.vif).await? {
                released += 1;
            }
        }
        Ok(released)
    }
}
