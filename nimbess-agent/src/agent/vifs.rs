//! The agent's VIF calls ([`crate::vif`]): reserve, release and list addresses held for a
//! pod's VIFs, and the address and MAC an ADD naming a VIF plugs. Under the agent's one lock like
//! every other change; each change is journaled before the answer.

use nephrite_pipeline::{Ipv4Cidr, Mac};

use super::{Agent, AgentState};
use crate::cni::{CniError, ErrorCode};
use crate::state::Record;
use crate::vif::{Plugged, VifClaim, VifEntry, VifFailure, VifRef, VifView, owner, reserve_mac};

fn check_ref(vif: &VifRef) -> Result<(), VifFailure> {
    if vif.pod_uid.is_empty() || vif.key.is_empty() {
        return Err(VifFailure::Invalid(format!(
            "a VIF needs a pod UID and a key (got UID {:?}, key {:?})",
            vif.pod_uid, vif.key
        )));
    }
    Ok(())
}

impl Agent {
    /// Reserve an address on `claim.network` for the VIF, or return the VIF when it exists on
    /// that network already.
    ///
    /// # Errors
    /// An unknown network; an empty UID or key; the VIF exists on another network; no free
    /// address or the state could not be written (nothing is reserved then).
    pub async fn allocate_vif(&self, claim: &VifClaim) -> Result<VifView, VifFailure> {
        check_ref(&claim.vif)?;
        let mut st = self.state.lock().await;
        if !st.model.networks().contains_key(&claim.network) {
            return Err(VifFailure::UnknownNetwork(claim.network.clone()));
        }
        if let Some(entry) = st.vifs.get(&claim.vif).cloned() {
            if entry.network != claim.network {
                return Err(VifFailure::Invalid(format!(
                    "VIF {} is allocated on network {}, not {}",
                    claim.vif, entry.network, claim.network
                )));
            }
            if entry.mac.is_some() {
                return Ok(st.view(&entry));
            }
            // Journaled before MACs were reserved: reserve one now, once. The VIFs hold it
            // before the journal does (a journal append may write the whole state instead).
            let before = entry.clone();
            let entry = VifEntry {
                mac: Some(st.free_mac(&claim.vif)),
                ..entry
            };
            st.vifs.put(entry.clone());
            if let Err(e) = st.journal(&[Record::VifPut { vif: entry.clone() }]) {
                st.vifs.put(before);
                return Err(e);
            }
            return Ok(st.view(&entry));
        }
        let holder = owner(&claim.vif);
        let address = st
            .allocate(&claim.network, &holder)
            .await
            .map_err(|e| VifFailure::Unavailable(format!("{}: {}", e.msg, e.details)))?;
        let entry = VifEntry {
            vif: claim.vif.clone(),
            network: claim.network.clone(),
            address,
            pod_namespace: claim.pod_namespace.clone(),
            pod_name: claim.pod_name.clone(),
            mac: Some(st.free_mac(&claim.vif)),
        };
        st.vifs.put(entry.clone());
        let records = [
            Record::Held {
                network: claim.network.clone(),
                address: address.addr,
                owner: holder.clone(),
            },
            Record::VifPut { vif: entry.clone() },
        ];
        let AgentState {
            store,
            model,
            ipam,
            vifs,
            ..
        } = &mut *st;
        if let Err(e) = store.append(&records, model, ipam, vifs) {
            st.vifs.remove(&claim.vif);
            st.release(&claim.network, &holder).await;
            return Err(VifFailure::Unavailable(format!(
                "the agent could not persist its state: {e}"
            )));
        }
        tracing::info!(vif = %claim.vif, network = %claim.network, %address, mac = ?entry.mac, "VIF allocated");
        Ok(st.view(&entry))
    }

    /// Free the VIF's address, unplugging the interface that uses it first. `false` when the
    /// VIF did not exist.
    ///
    /// # Errors
    /// An empty UID or key; the interface could not be unplugged or the state written.
    pub async fn release_vif(&self, vif: &VifRef) -> Result<bool, VifFailure> {
        check_ref(vif)?;
        let mut st = self.state.lock().await;
        let Some(entry) = st.vifs.get(vif).cloned() else {
            return Ok(false);
        };
        if let Some(plugged) = st.plugged(&entry) {
            st.delete(&plugged.container_id, &plugged.ifname)
                .await
                .map_err(|e| {
                    VifFailure::Unavailable(format!(
                        "VIF {vif}: could not unplug {} of container {}: {}: {}",
                        plugged.ifname, plugged.container_id, e.msg, e.details
                    ))
                })?;
        }
        let holder = owner(vif);
        st.release(&entry.network, &holder).await;
        st.vifs.remove(vif);
        let records = [
            Record::Released { owner: holder },
            Record::VifGone { vif: vif.clone() },
        ];
        let AgentState {
            store,
            model,
            ipam,
            vifs,
            ..
        } = &mut *st;
        store.append(&records, model, ipam, vifs).map_err(|e| {
            VifFailure::Unavailable(format!("the agent could not persist its state: {e}"))
        })?;
        tracing::info!(%vif, network = %entry.network, address = %entry.address, "VIF released");
        Ok(true)
    }

    /// The VIFs of one pod (its UID), or every VIF, in (UID, key) order.
    pub async fn vifs(&self, pod_uid: Option<&str>) -> Vec<VifView> {
        let st = self.state.lock().await;
        st.vifs.of_pod(pod_uid).map(|e| st.view(e)).collect()
    }

    /// One VIF.
    ///
    /// # Errors
    /// It does not exist.
    pub async fn vif(&self, vif: &VifRef) -> Result<VifView, VifFailure> {
        let st = self.state.lock().await;
        st.vifs
            .get(vif)
            .map(|e| st.view(e))
            .ok_or_else(|| VifFailure::NotFound(vif.clone()))
    }
}

impl AgentState {
    /// A MAC for `vif` that no other VIF or port of this agent has.
    fn free_mac(&self, vif: &VifRef) -> Mac {
        reserve_mac(vif, |mac| {
            self.vifs.0.values().any(|e| e.mac == Some(mac))
                || self
                    .model
                    .ports()
                    .values()
                    .any(|p| p.mac() == Some(mac) || p.requested_mac == Some(mac))
        })
    }

    /// Journal `records` (the VIFs as they will be after them).
    fn journal(&mut self, records: &[Record]) -> Result<(), VifFailure> {
        let AgentState {
            store,
            model,
            ipam,
            vifs,
            ..
        } = self;
        store.append(records, model, ipam, vifs).map_err(|e| {
            VifFailure::Unavailable(format!("the agent could not persist its state: {e}"))
        })
    }

    /// The port of this host using a VIF's address, if one does.
    fn plugged(&self, entry: &VifEntry) -> Option<Plugged> {
        self.model
            .ports()
            .values()
            .find(|p| {
                !p.is_remote() && p.network == entry.network && p.address.addr == entry.address.addr
            })
            .map(|p| Plugged {
                port: p.id.clone(),
                container_id: p.container_id.clone(),
                ifname: p.ifname.clone(),
                mac: p.mac(),
            })
    }

    fn view(&self, entry: &VifEntry) -> VifView {
        VifView {
            entry: entry.clone(),
            gateway: self
                .model
                .networks()
                .get(&entry.network)
                .and_then(|n| n.spec.gateway()),
            plugged: self.plugged(entry),
        }
    }

    /// The address and MAC an ADD naming `vif` on `network` plugs: the interface carries the
    /// VIF's reserved MAC (none for a VIF journaled before MACs were reserved and not allocated
    /// since: the data plane picks one then).
    ///
    /// # Errors
    /// Code 7: the VIF is not allocated, is on another network, or is plugged as another
    /// interface already.
    pub(super) fn reserved_vif(
        &self,
        vif: &VifRef,
        network: &str,
    ) -> Result<(Ipv4Cidr, Option<Mac>), CniError> {
        let Some(entry) = self.vifs.get(vif) else {
            return Err(CniError::new(
                ErrorCode::InvalidConfig,
                format!("VIF {vif} is not allocated on this agent"),
            ));
        };
        if entry.network != network {
            return Err(CniError::new(
                ErrorCode::InvalidConfig,
                format!("VIF {vif} is on network {}, not {network}", entry.network),
            ));
        }
        if let Some(plugged) = self.plugged(entry) {
            return Err(CniError::new(
                ErrorCode::InvalidConfig,
                format!(
                    "VIF {vif} is plugged already as {} of container {}",
                    plugged.ifname, plugged.container_id
                ),
            ));
        }
        Ok((entry.address, entry.mac))
    }
}
