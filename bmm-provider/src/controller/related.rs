//! The objects the reconciles depend on — the Cluster API `Machine` and `Cluster`, and (for
//! machines) the `NvidiaBMMCluster` — as their watches last delivered them.
//!
//! The controllers already watch these kinds to be triggered by them; the mapper of each watch
//! also keeps the object here, so a reconcile reads it without a GET, and triggers only when
//! the part that matters to the reconcile changed (its [`fingerprint`]). Because the copy and
//! the trigger come from the same event, a reconcile never runs on an older copy than the
//! event that triggered it. Objects not seen yet (a reconcile that runs before the watch
//! delivered them) are fetched with a GET and kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::api::{DynamicObject, ObjectMeta};
use nephrite_bmm::crd::NvidiaBMMCluster;
use serde_json::{Value, json};

use super::pacing::fingerprint;
use crate::observe::network_ready;

/// The latest copy of each object of one kind, with the fingerprint of what matters about it.
pub(super) struct Latest<K>(Mutex<HashMap<String, (u64, Arc<K>)>>);

impl<K> Default for Latest<K> {
    fn default() -> Self {
        Latest(Mutex::new(HashMap::new()))
    }
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl<K: kube::Resource> Latest<K> {
    /// Keeps `object` (whose relevant part has fingerprint `relevant`); whether that part
    /// changed (or the object is new).
    pub(super) fn keep(&self, object: K, relevant: u64) -> bool {
        let Ok(mut latest) = self.0.lock() else {
            return true;
        };
        let k = key(&object.namespace().unwrap_or_default(), &object.name_any());
        let changed = latest.get(&k).is_none_or(|(f, _)| *f != relevant);
        latest.insert(k, (relevant, Arc::new(object)));
        changed
    }

    /// Keeps `object` unless a copy is already there (a GET must not replace what a newer
    /// watch event delivered).
    pub(super) fn keep_if_absent(&self, object: K, relevant: u64) {
        if let Ok(mut latest) = self.0.lock() {
            let k = key(&object.namespace().unwrap_or_default(), &object.name_any());
            latest
                .entry(k)
                .or_insert_with(|| (relevant, Arc::new(object)));
        }
    }

    /// The latest copy, if any.
    pub(super) fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.0
            .lock()
            .ok()?
            .get(&key(namespace, name))
            .map(|(_, o)| o.clone())
    }
}

/// What a controller's own writes answered, per object: the watch may deliver its copy of an
/// object after the controller has written to it and reconciles again, and that reconcile must
/// see what was written (an instance id recorded, a finalizer added), not act on the older
/// copy. A write's answer is used while it is newer than the watch's copy (by
/// resourceVersion, same uid) and dropped once the watch has caught up; so nothing is
/// remembered beyond what the API server holds, and a restarted controller, which starts
/// from a fresh list, behaves the same.
pub(super) struct OwnWrites<K>(Mutex<HashMap<String, Arc<K>>>);

impl<K> Default for OwnWrites<K> {
    fn default() -> Self {
        OwnWrites(Mutex::new(HashMap::new()))
    }
}

/// The resourceVersion as a number (what etcd and the in-memory server use); `None` when it
/// is absent or not a number, in which case the watch's copy is trusted.
fn revision<K: kube::Resource>(object: &K) -> Option<u64> {
    object.meta().resource_version.as_deref()?.parse().ok()
}

/// Whether `a` is a later version of the same object than `b`.
fn later<K: kube::Resource>(a: &K, b: &K) -> bool {
    a.meta().uid == b.meta().uid
        && matches!((revision(a), revision(b)), (Some(x), Some(y)) if x > y)
}

impl<K: kube::Resource> OwnWrites<K> {
    /// Keeps what a write answered (unless a later write's answer is already kept).
    pub(super) fn wrote(&self, object: K) {
        let Ok(mut written) = self.0.lock() else {
            return;
        };
        let k = key(&object.namespace().unwrap_or_default(), &object.name_any());
        if written.get(&k).is_none_or(|w| !later(w.as_ref(), &object)) {
            written.insert(k, Arc::new(object));
        }
    }

    /// The later of `watched` and the last write's answer for it; forgets the answer once
    /// the watch has caught up with it.
    pub(super) fn newest(&self, watched: Arc<K>) -> Arc<K> {
        let Ok(mut written) = self.0.lock() else {
            return watched;
        };
        let k = key(
            &watched.namespace().unwrap_or_default(),
            &watched.name_any(),
        );
        match written.get(&k) {
            Some(w) if later(w.as_ref(), watched.as_ref()) => w.clone(),
            Some(_) => {
                written.remove(&k);
                watched
            }
            None => watched,
        }
    }

    /// Forgets the object `namespace/name` (it is gone).
    pub(super) fn forget(&self, namespace: &str, name: &str) {
        if let Ok(mut written) = self.0.lock() {
            written.remove(&key(namespace, name));
        }
    }
}

/// What a controller depends on.
#[derive(Default)]
pub(super) struct Related {
    /// Cluster API `Machine`s.
    pub machines: Latest<DynamicObject>,
    /// Cluster API `Cluster`s.
    pub clusters: Latest<DynamicObject>,
    /// `NvidiaBMMCluster`s.
    pub infra: Latest<NvidiaBMMCluster>,
}

/// What a reconcile reads of its own object: the metadata it acts on and the spec (not the
/// status, which it writes itself).
pub(super) fn own_inputs(meta: &ObjectMeta, spec: &impl serde::Serialize) -> Value {
    json!([
        meta.labels,
        meta.annotations,
        meta.finalizers,
        meta.deletion_timestamp,
        meta.owner_references,
        spec,
    ])
}

/// What a reconcile reads of a Cluster API `Machine`: the bootstrap data's Secret, the
/// failure domain and the infrastructure reference.
pub(super) fn machine_inputs(machine: &DynamicObject) -> Value {
    json!([
        machine.data.pointer("/spec/bootstrap/dataSecretName"),
        machine.data.pointer("/spec/failureDomain"),
        machine.data.pointer("/spec/infrastructureRef/name"),
    ])
}

/// What a reconcile reads of a Cluster API `Cluster`: pause and the infrastructure reference.
pub(super) fn cluster_inputs(cluster: &DynamicObject) -> Value {
    json!([
        cluster.data.pointer("/spec/paused"),
        cluster.data.pointer("/spec/infrastructureRef"),
    ])
}

/// What a machine reconcile reads of its `NvidiaBMMCluster`: the network and its ids, the
/// credentials Secret, whether it is being deleted.
pub(super) fn infra_inputs(cluster: &NvidiaBMMCluster) -> Value {
    let status = cluster.status.clone().unwrap_or_default();
    json!([
        network_ready(&status),
        status.site_id,
        status.tenant_id,
        status.vpc_id,
        status.network_status,
        cluster.spec.authentication,
        cluster.metadata.deletion_timestamp,
    ])
}

/// Fingerprint of [`machine_inputs`].
pub(super) fn machine_fingerprint(machine: &DynamicObject) -> u64 {
    fingerprint(&machine_inputs(machine))
}

/// Fingerprint of [`cluster_inputs`].
pub(super) fn cluster_fingerprint(cluster: &DynamicObject) -> u64 {
    fingerprint(&cluster_inputs(cluster))
}

/// Fingerprint of [`infra_inputs`].
pub(super) fn infra_fingerprint(cluster: &NvidiaBMMCluster) -> u64 {
    fingerprint(&infra_inputs(cluster))
}
