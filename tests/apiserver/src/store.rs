//! The in-memory object store: one global resourceVersion counter, objects by storage and key,
//! the event history and live watchers. Each concern is an `impl Store` block of its own:
//!
//! | module | what |
//! |---|---|
//! | `read` | get and list (selectors, paging, continue tokens) |
//! | `watch` | watch registration, history replay, bookmarks, expiry, event fan-out |
//! | `write` | create, update (PUT) and patch, and the update path they share |
//! | `delete` | delete, deletecollection, finalizers, namespace contents |
//! | `gc` | owner-reference garbage collection (background, foreground, orphan) |
//! | `crd` | CustomResourceDefinitions: validation, status, serving and unserving |
//! | `checks` | the preconditions and identity rules a write passes |
//! | `decode` | request bodies into [`Object`]s, unknown fields and `fieldValidation` |
//! | `validation` | names, labels and annotations, as Kubernetes validates them |
//! | `qualified` | qualified names and label values, with Kubernetes' wording |
//! | `builtin` | the spec rules of NetworkPolicy and Ingress (selectors, CIDRs, paths) |
//! | `meta` | metadata normalisation and system fields |
//! | `patch` | patch bodies, decoded before the lock is taken |
//! | `managed` | server-side apply's field ownership, removals and conflicts |
//!
//! Objects are kept as `nephrite-krm` [`Object`]s; their metadata is read through its
//! `ObjectMeta`.

mod builtin;
mod checks;
mod crd;
mod decode;
mod delete;
mod gc;
mod key;
mod managed;
mod meta;
mod patch;
mod qualified;
mod read;
mod validation;
mod watch;
mod write;

use std::collections::{BTreeMap, HashMap, VecDeque};

use nephrite_krm::Object;
use serde_json::json;

pub(crate) use decode::FieldValidation;
pub(crate) use delete::{DeleteOptions, Propagation};
pub(crate) use key::{ObjectKey, StorageKey};
pub(crate) use patch::{Patch, PatchKind};
pub(crate) use watch::{Filter, WatchItem, WatchStart};
pub(crate) use write::{Subresource, WriteOptions, Written};

use crate::resources::{self, ResourceType};
use watch::{EventType, HistoryEvent, Watcher};

/// Namespaces created at start-up.
const INITIAL_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The in-memory API state.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    types: Vec<ResourceType>,
    objects: HashMap<StorageKey, BTreeMap<ObjectKey, Object>>,
    /// Where the object with each uid lives (garbage collection looks owners up here).
    uids: HashMap<String, (StorageKey, ObjectKey)>,
    history: VecDeque<HistoryEvent>,
    history_limit: usize,
    /// Every event with a resourceVersion above this is still in `history`.
    compacted: u64,
    watchers: Vec<Watcher>,
    /// Field ownership (server-side apply) of each object, by uid.
    managed: HashMap<String, managed::ManagedFields>,
}

impl Store {
    /// A store with the built-in kinds and the initial namespaces.
    pub fn new(history_limit: usize) -> Self {
        let mut store = Self {
            rv: 0,
            types: resources::builtins(),
            objects: HashMap::new(),
            uids: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            watchers: Vec::new(),
            managed: HashMap::new(),
        };
        if let Some(ns_type) = store.resolve("", "v1", "namespaces") {
            for ns in INITIAL_NAMESPACES {
                let body = json!({"metadata": {"name": ns}});
                // Cannot fail: the namespaces do not exist yet and the body is valid.
                let _ = store.create(&ns_type, None, body);
            }
        }
        store
    }

    /// Every served resource type.
    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    /// The served type for a group/version/plural.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// Where `name` in `ns` lives for `rt` (cluster-scoped types ignore the namespace).
    fn key(rt: &ResourceType, ns: Option<&str>, name: &str) -> ObjectKey {
        let ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        ObjectKey::new(ns, name)
    }

    fn stored(&self, storage: &StorageKey, key: &ObjectKey) -> Option<&Object> {
        self.objects.get(storage).and_then(|m| m.get(key))
    }

    /// The object as the client asked for it: under the requested version's apiVersion.
    pub fn present(rt: &ResourceType, obj: &Object) -> Object {
        let mut out = obj.clone();
        out.api_version = rt.api_version();
        out.kind.clone_from(&rt.kind);
        out
    }

    /// Stores `new` under the next resourceVersion and emits ADDED or MODIFIED.
    fn commit_put(&mut self, storage: &StorageKey, key: ObjectKey, mut new: Object) -> Object {
        self.rv += 1;
        new.metadata.details_mut().resource_version = Some(self.rv.to_string());
        if let Some(uid) = &new.metadata.details().uid {
            self.uids
                .insert(uid.clone(), (storage.clone(), key.clone()));
        }
        let old = self
            .objects
            .entry(storage.clone())
            .or_default()
            .insert(key, new.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(storage, kind, old, new.clone());
        if *storage == StorageKey::crds() {
            self.serve_crd(&new);
        }
        new
    }

    /// Removes an object under the next resourceVersion and emits DELETED with `last` (or the
    /// stored object) as its final state. Runs the namespace and CRD clean-ups.
    fn commit_remove(
        &mut self,
        storage: &StorageKey,
        key: &ObjectKey,
        last: Option<Object>,
    ) -> Option<Object> {
        let old = self.objects.get_mut(storage)?.remove(key)?;
        if let Some(uid) = &old.metadata.details().uid {
            self.uids.remove(uid);
            self.managed.remove(uid);
        }
        self.rv += 1;
        let mut last = last.unwrap_or_else(|| old.clone());
        last.metadata.details_mut().resource_version = Some(self.rv.to_string());
        self.record(storage, EventType::Deleted, Some(old), last.clone());
        if *storage == StorageKey::namespaces() {
            self.drop_namespace_contents(&key.name);
        }
        if *storage == StorageKey::crds() {
            self.unserve_crd(&last);
        }
        Some(last)
    }
}

#[cfg(test)]
mod tests;
