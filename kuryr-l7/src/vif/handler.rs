//! One pod's VIFs brought to what it asks for, whatever the source of pods.
//!
//! [`Handler::apply`] plans with `nephrite-vif` (desired, then update against the pod's
//! record), releases what is no longer asked for, allocates what is new and records the
//! result through `persist` *before* activating, so the CNI side and a restarted handler see
//! every port that exists. A failed allocation releases what the same pass allocated: a pod
//! whose request cannot be met holds nothing new. [`Handler::cleanup`] releases the recorded
//! VIFs and then sweeps the backend for anything the pod still holds (a port made by a
//! handler that died before recording it). With the Nimbess backend, every apply also
//! releases what the agent holds for the pod beyond the record's keys (a VIF allocated by a
//! handler that died before recording it, for a request the pod no longer makes).

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use nephrite_vif::{
    Config, NetworkAttachment, PlanError, Pod, Vif, VifError, VifRecord, desired, update,
};

use super::neutron::{Activation, BackendError, NeutronVifs, PodIdentity};
use super::nimbess::NimbessVifs;

/// Where VIFs come from.
#[derive(Debug, Clone)]
pub enum Backend {
    /// Neutron ports.
    Neutron(NeutronVifs),
    /// Addresses on Nimbess networks, reserved by the node's agent.
    Nimbess(NimbessVifs),
}

/// Why a pod's VIFs could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The pod's annotations (or the attachments they name) are wrong.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The update conflicts with the pod's VIFs (an interface name taken).
    #[error(transparent)]
    Update(#[from] VifError),
    /// The backend refused or failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The record could not be written.
    #[error("writing annotation openstack.org/kuryr-vif: {0}")]
    Persist(String),
}

impl HandlerError {
    /// Whether retrying soon can help (the backend or API server unreachable or busy).
    pub fn is_retryable(&self) -> bool {
        match self {
            HandlerError::Backend(e) => e.is_retryable(),
            HandlerError::Persist(_) => true,
            HandlerError::Plan(_) | HandlerError::Update(_) => false,
        }
    }
}

/// Writes a pod's record where the CNI side reads it (the pod annotation).
pub type Persist = dyn Fn(VifRecord) -> BoxFuture<'static, Result<(), String>> + Send + Sync;

/// What one [`Handler::apply`] left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The pod's VIFs now.
    pub record: VifRecord,
    /// Ports still `DOWN` after the activation timeout.
    pub still_down: Vec<Activation>,
}

/// The VIF handler: configuration and backend.
#[derive(Debug, Clone)]
pub struct Handler {
    /// The drivers' configuration.
    pub config: Config,
    /// The backend.
    pub backend: Backend,
}

impl Handler {
    async fn allocate(
        &self,
        pod: &PodIdentity,
        allocation: &nephrite_vif::Allocation,
    ) -> Result<Vif, BackendError> {
        match &self.backend {
            Backend::Neutron(n) => n.allocate(pod, allocation).await,
            Backend::Nimbess(n) => n.allocate(pod, allocation).await,
        }
    }

    async fn release(&self, pod: &PodIdentity, vif: &Vif) -> Result<(), BackendError> {
        match &self.backend {
            Backend::Neutron(n) => n.release(pod, vif).await,
            Backend::Nimbess(n) => n.release(pod, vif).await,
        }
    }

    async fn activate(&self, pod: &PodIdentity, vif: &Vif) -> Result<Activation, BackendError> {
        match &self.backend {
            Backend::Neutron(n) => n.activate(pod, vif).await,
            Backend::Nimbess(n) => n.activate(pod, vif).await,
        }
    }

    /// Bring `pod`'s VIFs from `current` to what `view` asks for, writing each new record with
    /// `persist`.
    pub async fn apply(
        &self,
        pod: &PodIdentity,
        view: &Pod,
        attachments: &[NetworkAttachment],
        current: &VifRecord,
        persist: &Persist,
    ) -> Result<Applied, HandlerError> {
        let requests = desired(view, &self.config, attachments)?;
        let plan = update(&current.vifs, &requests)?;
        let mut vifs = plan.keep.clone();
        if !plan.is_empty() {
            for vif in &plan.release {
                self.release(pod, vif).await?;
            }
            let mut added = Vec::new();
            for allocation in &plan.allocate {
                match self.allocate(pod, allocation).await {
                    Ok(vif) => added.push(vif),
                    Err(e) => {
                        for vif in &added {
                            if let Err(undo) = self.release(pod, vif).await {
                                tracing::warn!(port = %vif.backend_id, "releasing after a failed allocation: {undo}");
                            }
                        }
                        return Err(e.into());
                    }
                }
            }
            vifs.extend(added);
            let order = |v: &Vif| requests.iter().position(|r| r.key == v.key);
            vifs.sort_by_key(order);
            persist(VifRecord::new(vifs.clone()))
                .await
                .map_err(HandlerError::Persist)?;
        }
        if let Backend::Nimbess(n) = &self.backend {
            let keep: BTreeSet<String> = vifs.iter().map(|v| v.key.clone()).collect();
            let swept = n.sweep(pod, &keep).await?;
            if swept > 0 {
                tracing::info!(pod = %format!("{}/{}", pod.namespace, pod.name), swept, "released VIFs the record does not list");
            }
        }
        // Every port waits out its activation timeout at once, not one after another.
        let inactive: Vec<usize> = (0..vifs.len()).filter(|&i| !vifs[i].active).collect();
        let outcomes =
            futures::future::join_all(inactive.iter().map(|&i| self.activate(pod, &vifs[i]))).await;
        let mut still_down = Vec::new();
        let mut changed = false;
        for (i, outcome) in inactive.into_iter().zip(outcomes) {
            match outcome? {
                Activation::Active => {
                    vifs[i].active = true;
                    changed = true;
                }
                down => still_down.push(down),
            }
        }
        let record = VifRecord::new(vifs);
        if changed {
            persist(record.clone())
                .await
                .map_err(HandlerError::Persist)?;
        }
        Ok(Applied { record, still_down })
    }

    /// Release everything `pod` holds: its recorded VIFs, then whatever the backend still
    /// finds for it.
    pub async fn cleanup(
        &self,
        pod: &PodIdentity,
        current: &VifRecord,
    ) -> Result<(), HandlerError> {
        for vif in &current.vifs {
            self.release(pod, vif).await?;
        }
        match &self.backend {
            Backend::Neutron(n) => {
                let swept = n.sweep(pod).await?;
                if swept > 0 {
                    tracing::info!(pod = %format!("{}/{}", pod.namespace, pod.name), swept, "released ports the record did not list");
                }
            }
            Backend::Nimbess(n) => {
                let swept = n.sweep(pod, &BTreeSet::new()).await?;
                if swept > 0 {
                    tracing::info!(pod = %format!("{}/{}", pod.namespace, pod.name), swept, "released VIFs the record did not list");
                }
            }
        }
        Ok(())
    }
}
