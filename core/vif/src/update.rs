//! Update: the VIFs a pod has against the VIFs it needs, by key.
//!
//! A VIF whose key is still requested, with the same target (a NetworkAttachmentDefinition
//! may have been changed to another subnet), a compatible vnic type and the asked interface
//! name, is kept as it is: same interface, same port. Everything else the pod has is
//! released; everything else it needs is allocated. New VIFs take the interface they ask for
//! or the lowest `ethN` (N ≥ 1) that neither a kept VIF nor another new one holds, so names
//! never move under a running pod.

use std::collections::BTreeSet;

use crate::{Vif, VifError, VifRequest};

/// A request to allocate, with the interface name it gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// What to allocate.
    pub request: VifRequest,
    /// Its interface name.
    pub ifname: String,
}

/// What to do to a pod's VIFs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Update {
    /// VIFs that stay, in the pod's order.
    pub keep: Vec<Vif>,
    /// VIFs to release, in the pod's order.
    pub release: Vec<Vif>,
    /// VIFs to allocate, in the requests' order.
    pub allocate: Vec<Allocation>,
}

impl Update {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.release.is_empty() && self.allocate.is_empty()
    }
}

fn satisfies(vif: &Vif, request: &VifRequest) -> bool {
    vif.key == request.key
        && vif.target == request.target
        && request.vnic_type.is_none_or(|v| v == vif.vnic_type)
        && request.interface.as_ref().is_none_or(|i| *i == vif.ifname)
}

/// Compare `current` (the pod's annotation) with `desired` ([`crate::desired`]).
///
/// An interface asked for by name that a kept VIF holds is [`VifError::InterfaceTaken`].
pub fn update(current: &[Vif], desired: &[VifRequest]) -> Result<Update, VifError> {
    let mut out = Update::default();
    let mut satisfied: BTreeSet<&str> = BTreeSet::new();
    for vif in current {
        let wanted = desired.iter().any(|r| satisfies(vif, r));
        if wanted && satisfied.insert(vif.key.as_str()) {
            out.keep.push(vif.clone());
        } else {
            out.release.push(vif.clone());
        }
    }
    let mut used: BTreeSet<String> = out.keep.iter().map(|v| v.ifname.clone()).collect();
    let pending: Vec<&VifRequest> = desired
        .iter()
        .filter(|r| !satisfied.contains(r.key.as_str()))
        .collect();
    for request in &pending {
        if let Some(ifname) = &request.interface {
            if let Some(holder) = out.keep.iter().find(|v| &v.ifname == ifname) {
                return Err(VifError::InterfaceTaken {
                    ifname: ifname.clone(),
                    key: request.key.clone(),
                    holder: holder.key.clone(),
                });
            }
            used.insert(ifname.clone());
        }
    }
    let mut next = 1usize;
    for request in pending {
        let ifname = match &request.interface {
            Some(ifname) => ifname.clone(),
            None => loop {
                let candidate = format!("eth{next}");
                next += 1;
                if used.insert(candidate.clone()) {
                    break candidate;
                }
            },
        };
        out.allocate.push(Allocation {
            request: request.clone(),
            ifname,
        });
    }
    Ok(out)
}
