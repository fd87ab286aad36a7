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
//!
//! A request that cannot be met (wrong, or short of VFs) is recorded too: the record keeps the
//! VIFs the pod still holds and carries the [`Failure`], so the CNI side fails the pod's ADD
//! with the handler's words (code 7, or 11 when waiting can help) instead of waiting.
//!
//! SR-IOV VFs are counted before anything is allocated ([`nephrite_vif::vfs::check`]): the
//! source says which node the pod is on, what it advertises and what its other pods hold
//! ([`NodeLookup`], asked only when the update allocates VFs). Decisions that allocate VFs
//! take turns, and the handler remembers what it last recorded for each pod (its ledger), so
//! two pods never both take the last VF while the source has not seen the first's record yet.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use nephrite_vif::vfs::{self, Node, VfShortage};
use nephrite_vif::{
    Config, Failure, FailureKind, NetworkAttachment, PlanError, Pod, Target, Vif, VifError,
    VifRecord, desired, update,
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
    /// The pod's node has not the VFs it wants free, or the pod has no node yet.
    #[error(transparent)]
    Vfs(#[from] VfShortage),
    /// The backend refused or failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The record could not be written.
    #[error("writing annotation openstack.org/kuryr-vif: {0}")]
    Persist(String),
    /// The source could not say what the pod's node holds.
    #[error("reading the pod's node: {0}")]
    Node(String),
}

impl HandlerError {
    /// Whether retrying soon can help (the backend or API server unreachable or busy).
    pub fn is_retryable(&self) -> bool {
        match self {
            HandlerError::Backend(e) => e.is_retryable(),
            HandlerError::Persist(_) | HandlerError::Node(_) => true,
            HandlerError::Plan(_) | HandlerError::Update(_) | HandlerError::Vfs(_) => false,
        }
    }

    /// What the record says of this error, if the pod's record carries it: not a transient
    /// failure (tried again soon) nor a pod waiting to be scheduled.
    pub fn failure_kind(&self) -> Option<FailureKind> {
        match self {
            HandlerError::Vfs(VfShortage::Unscheduled { .. }) => None,
            HandlerError::Vfs(_) => Some(FailureKind::Unavailable),
            e if e.is_retryable() => None,
            _ => Some(FailureKind::Invalid),
        }
    }
}

/// Writes a pod's record where the CNI side reads it (the pod annotation).
pub type Persist = dyn Fn(VifRecord) -> BoxFuture<'static, Result<(), String>> + Send + Sync;

/// What the source knows of a pod's node, for counting its VFs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeVfs {
    /// The pod's node (`None`: the pod is not scheduled). A node the source has no object for
    /// advertises nothing.
    pub node: Option<Node>,
    /// The other pods on that node: UID and recorded VIFs.
    pub pods: Vec<(String, Vec<Vif>)>,
}

/// Asks the source for the pod's [`NodeVfs`] (only when the pod's update allocates VFs).
pub type NodeLookup = dyn Fn() -> BoxFuture<'static, Result<NodeVfs, String>> + Send + Sync;

/// What one [`Handler::apply`] left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The pod's VIFs now.
    pub record: VifRecord,
    /// Ports still `DOWN` after the activation timeout.
    pub still_down: Vec<Activation>,
}

/// The VFs the handler last recorded for each pod: UID → (node, VIFs on physnets). A pod
/// released is kept with no VIF until the source no longer lists it.
#[derive(Debug, Default)]
struct Ledger(BTreeMap<String, (String, Vec<Vif>)>);

fn on_physnets(vifs: &[Vif]) -> Vec<Vif> {
    vifs.iter()
        .filter(|v| matches!(v.target, Target::Physnet { .. }))
        .cloned()
        .collect()
}

impl Ledger {
    fn note(&mut self, pod: &PodIdentity, vifs: &[Vif]) {
        let held = on_physnets(vifs);
        let node = match (&pod.node, self.0.get(&pod.uid)) {
            (Some(node), _) => node.clone(),
            (None, Some((node, _))) => node.clone(),
            (None, None) => return,
        };
        self.0.insert(pod.uid.clone(), (node, held));
    }

    /// The VFs held on `node` by pods other than `asking`: what the ledger says of a pod it
    /// knows, else what the source read.
    fn held_on(&mut self, node: &str, asking: &str, seen: &NodeVfs) -> Vec<Vif> {
        let mut out = Vec::new();
        let mut listed = BTreeSet::new();
        for (uid, vifs) in &seen.pods {
            if uid == asking {
                continue;
            }
            listed.insert(uid.as_str());
            match self.0.get(uid) {
                Some((at, held)) if at == node => out.extend(held.iter().cloned()),
                Some(_) => {}
                None => out.extend(on_physnets(vifs)),
            }
        }
        // Released pods the source no longer lists are forgotten; a pod the source has not
        // seen yet still counts.
        self.0.retain(|uid, (at, held)| {
            at != node || !held.is_empty() || listed.contains(uid.as_str())
        });
        for (uid, (at, held)) in &self.0 {
            if at == node && uid != asking && !listed.contains(uid.as_str()) {
                out.extend(held.iter().cloned());
            }
        }
        out
    }
}

/// The VIF handler: configuration and backend.
#[derive(Debug, Clone)]
pub struct Handler {
    /// The drivers' configuration.
    pub config: Config,
    /// The backend.
    pub backend: Backend,
    /// One VF decision at a time (held from the count until the record is written).
    vf_turn: Arc<tokio::sync::Mutex<()>>,
    ledger: Arc<Mutex<Ledger>>,
}

impl Handler {
    /// A handler of `config` on `backend`.
    pub fn new(config: Config, backend: Backend) -> Self {
        Handler {
            config,
            backend,
            vf_turn: Arc::default(),
            ledger: Arc::default(),
        }
    }

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

    fn note(&self, pod: &PodIdentity, vifs: &[Vif]) {
        if let Ok(mut ledger) = self.ledger.lock() {
            ledger.note(pod, vifs);
        }
    }

    async fn persist(
        &self,
        pod: &PodIdentity,
        record: VifRecord,
        persist: &Persist,
    ) -> Result<(), HandlerError> {
        let vifs = record.vifs.clone();
        persist(record).await.map_err(HandlerError::Persist)?;
        self.note(pod, &vifs);
        Ok(())
    }

    /// Bring `pod`'s VIFs from `current` to what `view` asks for, writing each new record with
    /// `persist`; `node` is asked what the pod's node holds when the update allocates VFs.
    ///
    /// A request that cannot be met is recorded with the VIFs the pod keeps (when that changes
    /// the record) and returned as the error.
    pub async fn apply(
        &self,
        pod: &PodIdentity,
        view: &Pod,
        attachments: &[NetworkAttachment],
        current: &VifRecord,
        node: &NodeLookup,
        persist: &Persist,
    ) -> Result<Applied, HandlerError> {
        let (error, holds) = match self
            .bring_up(pod, view, attachments, current, node, persist)
            .await
        {
            Ok(applied) => return Ok(applied),
            Err(failed) => failed,
        };
        if let Some(kind) = error.failure_kind() {
            let record = VifRecord::failed(
                holds,
                Failure {
                    kind,
                    message: error.to_string(),
                },
            );
            if record != *current
                && let Err(e) = self.persist(pod, record, persist).await
            {
                tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), "recording the failure: {e}");
            }
        }
        Err(error)
    }

    /// [`Self::apply`] without recording a failure; an error comes with the VIFs the pod
    /// holds then.
    async fn bring_up(
        &self,
        pod: &PodIdentity,
        view: &Pod,
        attachments: &[NetworkAttachment],
        current: &VifRecord,
        node: &NodeLookup,
        persist: &Persist,
    ) -> Result<Applied, (HandlerError, Vec<Vif>)> {
        let unchanged = |e: HandlerError| (e, current.vifs.clone());
        let requests = desired(view, &self.config, attachments).map_err(|e| unchanged(e.into()))?;
        let plan = update(&current.vifs, &requests).map_err(|e| unchanged(e.into()))?;
        // Held from the VF count until the record is written.
        let turn = if vfs::wanted(&plan.allocate).is_empty() {
            None
        } else {
            let turn = self.vf_turn.lock().await;
            let seen = node().await.map_err(|e| unchanged(HandlerError::Node(e)))?;
            let mut held = match self.ledger.lock() {
                Ok(mut ledger) => match &seen.node {
                    Some(n) => ledger.held_on(&n.name, &pod.uid, &seen),
                    None => Vec::new(),
                },
                Err(_) => Vec::new(),
            };
            held.extend(on_physnets(&plan.keep));
            vfs::check(seen.node.as_ref(), &self.config, &held, &plan.allocate)
                .map_err(|e| unchanged(e.into()))?;
            Some(turn)
        };
        let mut vifs = plan.keep.clone();
        // A recorded failure is cleared only once the whole pass has succeeded (a failure that
        // comes back in activation would otherwise be cleared and written again on every pass).
        let mut cleared = current.failure.is_none();
        if !plan.is_empty() {
            for (n, vif) in plan.release.iter().enumerate() {
                if let Err(e) = self.release(pod, vif).await {
                    // What was released is gone; the rest is still held.
                    let mut holds = plan.keep.clone();
                    holds.extend(plan.release[n..].iter().cloned());
                    return Err((HandlerError::from(e), holds));
                }
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
                        return Err((HandlerError::from(e), plan.keep.clone()));
                    }
                }
            }
            vifs.extend(added);
            let order = |v: &Vif| requests.iter().position(|r| r.key == v.key);
            vifs.sort_by_key(order);
            self.persist(pod, VifRecord::new(vifs.clone()), persist)
                .await
                .map_err(|e| (e, vifs.clone()))?;
            cleared = true;
        }
        drop(turn);
        if let Backend::Nimbess(n) = &self.backend {
            let keep: BTreeSet<String> = vifs.iter().map(|v| v.key.clone()).collect();
            let swept = n
                .sweep(pod, &keep)
                .await
                .map_err(|e| (HandlerError::from(e), vifs.clone()))?;
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
            match outcome.map_err(|e| (HandlerError::from(e), vifs.clone()))? {
                Activation::Active => {
                    vifs[i].active = true;
                    changed = true;
                }
                down => still_down.push(down),
            }
        }
        let record = VifRecord::new(vifs);
        if changed || !cleared {
            self.persist(pod, record.clone(), persist)
                .await
                .map_err(|e| (e, record.vifs.clone()))?;
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
        self.note(pod, &[]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nephrite_vif::{Driver, VnicType};

    use super::*;

    fn vf(n: usize) -> Vif {
        Vif {
            key: format!("sriov/physnet2/{n}"),
            ifname: format!("eth{}", n + 1),
            driver: Driver::Sriov,
            target: Target::Physnet {
                physnet: "physnet2".into(),
            },
            vnic_type: VnicType::Direct,
            network: "net".into(),
            addresses: Vec::new(),
            gateway: None,
            mac: String::new(),
            backend_id: format!("port-{n}"),
            active: true,
        }
    }

    fn pod(uid: &str, node: Option<&str>) -> PodIdentity {
        PodIdentity {
            namespace: "shop".into(),
            name: uid.into(),
            uid: uid.into(),
            node: node.map(str::to_owned),
        }
    }

    fn seen(pods: &[(&str, Vec<Vif>)]) -> NodeVfs {
        NodeVfs {
            node: Some(Node {
                name: "n1".into(),
                allocatable: BTreeMap::new(),
            }),
            pods: pods
                .iter()
                .map(|(uid, vifs)| ((*uid).to_owned(), vifs.clone()))
                .collect(),
        }
    }

    #[test]
    fn the_ledger_counts_what_the_handler_recorded_over_what_the_source_read() {
        let mut ledger = Ledger::default();
        let source = seen(&[("p1", vec![vf(0)]), ("p2", Vec::new()), ("me", vec![vf(0)])]);
        // What the source read; the asking pod's own VIFs are not among the others'.
        assert_eq!(ledger.held_on("n1", "me", &source).len(), 1);
        // p2's record with two VFs is written, the source has not seen it yet.
        ledger.note(&pod("p2", Some("n1")), &[vf(0), vf(1)]);
        assert_eq!(ledger.held_on("n1", "me", &source).len(), 3);
        // p3, not listed by the source at all yet, counts too; a pod on another node does not.
        ledger.note(&pod("p3", Some("n1")), &[vf(0)]);
        ledger.note(&pod("p4", Some("n2")), &[vf(0)]);
        assert_eq!(ledger.held_on("n1", "me", &source).len(), 4);
        // p1 is released: its VF no longer counts though the source still lists it.
        ledger.note(&pod("p1", Some("n1")), &[]);
        assert_eq!(ledger.held_on("n1", "me", &source).len(), 3);
        assert!(ledger.0.contains_key("p1"));
        // Once the source no longer lists it, the released pod is forgotten.
        let later = seen(&[("p2", Vec::new())]);
        assert_eq!(ledger.held_on("n1", "me", &later).len(), 3);
        assert!(!ledger.0.contains_key("p1"));
        // A release without a node keeps the node the ledger knew.
        ledger.note(&pod("p3", None), &[]);
        assert_eq!(ledger.held_on("n1", "me", &later).len(), 2);
    }
}
