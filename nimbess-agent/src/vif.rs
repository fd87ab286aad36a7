//! VIFs: addresses reserved on named networks for a pod before its sandbox exists.
//!
//! kuryr-l7's VIF handler asks the agent for a pod's VIFs when the pod is created
//! (`AllocateVif`), records them in the pod's `openstack.org/kuryr-vif` annotation, and
//! `nimbess-cni` plugs each one with an ADD naming the VIF ([`VifRef`]): the port takes the
//! reserved address instead of a new one. A VIF is identified by the pod's UID and the
//! handler's key for the request, so asking twice (a handler restarted mid-creation) gets the
//! same VIF back. The address is held in the network's pool by the VIF's own [`owner`]
//! (`vif:<uid>` / key), not by the port: a CNI DEL unplugs the interface and leaves the
//! reservation; `ReleaseVif` frees it (unplugging the interface first if one still uses it).
//!
//! Each VIF also gets a MAC at allocation ([`reserve_mac`]): locally administered, derived from
//! the VIF's identity, unique among this agent's VIFs and ports, and kept with the VIF, so the
//! handler can record it before the pod is plugged and it does not change across restarts. The
//! ADD that plugs the VIF asks the data plane for that MAC
//! ([`nephrite_pipeline::PortRequest::mac`]), so the pod's interface carries exactly the MAC
//! the record names, from its creation on (and again when the port is rendered anew).
//!
//! VIFs are persisted with the rest of the agent's state (journal records
//! [`crate::state::Record::VifPut`] and [`crate::state::Record::VifGone`]).
//!
//! The types the API speaks ([`VifRef`], [`VifClaim`], [`VifEntry`], [`VifView`],
//! [`Plugged`]) are the client crate's (`nimbess_client::vif`), shared with the VIF handler
//! and the plugin and re-exported here; this module adds how the agent holds them.

use std::collections::BTreeMap;

use nephrite_pipeline::{Mac, Owner};
use serde::{Deserialize, Serialize};

pub use nimbess_client::vif::{Plugged, VifClaim, VifEntry, VifRef, VifView};

/// The container id prefix of a VIF's address holder in the pools.
pub const VIF_OWNER_PREFIX: &str = "vif:";

/// The holder of a VIF's address in the network's pool.
pub fn owner(vif: &VifRef) -> Owner {
    Owner {
        container_id: format!("{VIF_OWNER_PREFIX}{}", vif.pod_uid),
        ifname: vif.key.clone(),
    }
}

/// Whether a pool holder is a VIF (not a container's interface).
pub fn is_vif_owner(owner: &Owner) -> bool {
    owner.container_id.starts_with(VIF_OWNER_PREFIX)
}

/// The first octet of a reserved MAC: locally administered (bit 1), unicast (bit 0 clear).
pub const VIF_MAC_PREFIX: u8 = 0x0e;

/// The MAC to reserve for `vif`: [`VIF_MAC_PREFIX`] and 40 bits of a hash of the VIF's
/// identity, rehashed with a counter while `taken` says another VIF or port has it.
pub fn reserve_mac(vif: &VifRef, taken: impl Fn(Mac) -> bool) -> Mac {
    let mut attempt: u64 = 0;
    loop {
        let h = crate::naming::fnv1a(&format!("{vif}#{attempt}")).to_be_bytes();
        let mac = Mac([VIF_MAC_PREFIX, h[3], h[4], h[5], h[6], h[7]]);
        if !taken(mac) {
            return mac;
        }
        attempt += 1;
    }
}

/// Why a VIF call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VifFailure {
    /// The network is not one of the agent's.
    #[error("network {0:?} is not served by this agent")]
    UnknownNetwork(String),
    /// The request is malformed or conflicts with the VIF that exists.
    #[error("{0}")]
    Invalid(String),
    /// The VIF does not exist.
    #[error("VIF {0} is not allocated on this agent")]
    NotFound(VifRef),
    /// No address now (pool exhausted, fabric store unreachable) or the state could not be
    /// written; nothing was reserved.
    #[error("{0}")]
    Unavailable(String),
}

/// Every VIF of the agent, by identity. Serialized as a list (JSON keys must be strings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<VifEntry>", into = "Vec<VifEntry>")]
pub struct Vifs(pub BTreeMap<VifRef, VifEntry>);

impl From<Vec<VifEntry>> for Vifs {
    fn from(list: Vec<VifEntry>) -> Self {
        Vifs(list.into_iter().map(|e| (e.vif.clone(), e)).collect())
    }
}

impl From<Vifs> for Vec<VifEntry> {
    fn from(vifs: Vifs) -> Self {
        vifs.0.into_values().collect()
    }
}

impl Vifs {
    /// One VIF.
    pub fn get(&self, vif: &VifRef) -> Option<&VifEntry> {
        self.0.get(vif)
    }

    /// Put (replace) a VIF.
    pub fn put(&mut self, entry: VifEntry) {
        self.0.insert(entry.vif.clone(), entry);
    }

    /// Remove a VIF; returns it.
    pub fn remove(&mut self, vif: &VifRef) -> Option<VifEntry> {
        self.0.remove(vif)
    }

    /// The VIFs of a pod, or all, in (UID, key) order.
    pub fn of_pod<'a>(&'a self, pod_uid: Option<&'a str>) -> impl Iterator<Item = &'a VifEntry> {
        self.0
            .values()
            .filter(move |e| pod_uid.is_none_or(|uid| e.vif.pod_uid == uid))
    }

    /// Whether `owner` is the holder of one of these VIFs' addresses.
    pub fn holds(&self, owner: &Owner) -> bool {
        is_vif_owner(owner)
            && self.0.keys().any(|v| {
                owner.ifname == v.key && owner.container_id[VIF_OWNER_PREFIX.len()..] == *v.pod_uid
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vifs_round_trip_as_a_list_and_know_their_owners() {
        let vif = VifRef {
            pod_uid: "u1".into(),
            key: "network/ns/a/0".into(),
        };
        let mut vifs = Vifs::default();
        vifs.put(VifEntry {
            vif: vif.clone(),
            network: "a".into(),
            address: "10.1.0.2/24".parse().expect("cidr"),
            pod_namespace: "ns".into(),
            pod_name: "p".into(),
            mac: Some(reserve_mac(&vif, |_| false)),
        });
        let json = serde_json::to_string(&vifs).expect("json");
        assert!(json.starts_with('['), "{json}");
        let back: Vifs = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, vifs);
        assert!(vifs.holds(&owner(&vif)));
        let other = VifRef {
            pod_uid: "u2".into(),
            key: vif.key.clone(),
        };
        assert!(!vifs.holds(&owner(&other)));
        assert!(!vifs.holds(&Owner {
            container_id: "abc".into(),
            ifname: vif.key.clone()
        }));
        assert_eq!(vifs.of_pod(Some("u1")).count(), 1);
        assert_eq!(vifs.of_pod(Some("u2")).count(), 0);
        // A VIF journaled before MACs were reserved still reads.
        let old = r#"[{"vif": {"pod_uid": "u1", "key": "main"}, "network": "a", "address": "10.1.0.3/24"}]"#;
        let read: Vifs = serde_json::from_str(old).expect("old entry");
        assert_eq!(read.0.values().next().and_then(|e| e.mac), None);
    }

    #[test]
    fn reserved_macs_are_local_unicast_stable_and_skip_taken_ones() {
        let vif = VifRef {
            pod_uid: "u1".into(),
            key: "main".into(),
        };
        let first = reserve_mac(&vif, |_| false);
        assert_eq!(first.0[0], VIF_MAC_PREFIX);
        assert_eq!(first.0[0] & 0x01, 0, "unicast");
        assert_eq!(first.0[0] & 0x02, 0x02, "locally administered");
        assert_eq!(
            reserve_mac(&vif, |_| false),
            first,
            "the same VIF, the same MAC"
        );
        let other = VifRef {
            pod_uid: "u2".into(),
            key: "main".into(),
        };
        assert_ne!(reserve_mac(&other, |_| false), first);
        let next = reserve_mac(&vif, |m| m == first);
        assert_ne!(next, first);
        assert_eq!(next.0[0], VIF_MAC_PREFIX);
    }
}
