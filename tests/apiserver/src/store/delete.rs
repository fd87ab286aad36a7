//! Deletes: one object or a collection, with preconditions and a propagation policy. An object
//! with finalizers (or deleted in Foreground) gets a deletionTimestamp and stays; a Namespace
//! takes its contents with it.

use nephrite_krm::Object;
use serde_json::{Value, json};

use super::checks::{check_rv_delete_precondition, check_uid_precondition};
use super::gc::FOREGROUND_FINALIZER;
use super::meta::{GRACE_PERIOD, now};
use super::write::set_body;
use super::{Filter, ObjectKey, StorageKey, Store};
use crate::error::ApiError;
use crate::resources::ResourceType;

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) enum Propagation {
    /// Dependents are deleted after the owner is gone.
    #[default]
    Background,
    /// The owner waits (with the `foregroundDeletion` finalizer) until its dependents are gone.
    Foreground,
    /// Dependents lose their owner reference and stay.
    Orphan,
}

/// The parts of DeleteOptions the server honours.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

impl Store {
    /// DELETE one object.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Object, ApiError> {
        let storage = rt.storage();
        let key = Self::key(rt, ns, name);
        let old = self
            .stored(&storage, &key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group_resource(), name))?;
        if let Some(want) = &opts.precondition_uid {
            check_uid_precondition(rt, &old, want)?;
        }
        if let Some(want) = &opts.precondition_rv {
            check_rv_delete_precondition(rt, &old, want)?;
        }
        let result = self
            .delete_internal(&storage, &key, opts.propagation)
            .unwrap_or(old);
        self.collect_garbage();
        Ok(Self::present(rt, &result))
    }

    /// DELETE on a collection: deletes every selected object; returns them as a list.
    pub fn delete_collection(
        &mut self,
        rt: &ResourceType,
        filter: &Filter,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let storage = rt.storage();
        let keys: Vec<ObjectKey> = self
            .objects
            .get(&storage)
            .map(|m| {
                m.iter()
                    .filter(|(_, o)| filter.matches(o))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut items = Vec::new();
        for key in keys {
            if let Some(obj) = self.delete_internal(&storage, &key, opts.propagation) {
                items.push(Self::present(rt, &obj));
            }
        }
        self.collect_garbage();
        Ok(json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": {"resourceVersion": self.rv.to_string()},
            "items": items,
        }))
    }

    /// Starts or finishes a deletion: with finalizers (or Foreground) the object gets a
    /// deletionTimestamp and stays; otherwise it is removed. Returns the object's new state.
    pub(super) fn delete_internal(
        &mut self,
        storage: &StorageKey,
        key: &ObjectKey,
        propagation: Propagation,
    ) -> Option<Object> {
        let old = self.stored(storage, key)?.clone();
        if old.is_being_deleted() {
            return Some(old);
        }
        if propagation == Propagation::Orphan
            && let Some(uid) = &old.metadata.details().uid
        {
            self.orphan_dependents(uid);
        }
        let mut new = old;
        if propagation == Propagation::Foreground {
            new.add_finalizer(FOREGROUND_FINALIZER);
        }
        if new.metadata.details().finalizers.is_none() {
            return self.commit_remove(storage, key, None);
        }
        new.metadata.details_mut().deletion_timestamp = Some(now());
        new.metadata
            .details_mut()
            .extra
            .insert(GRACE_PERIOD.into(), json!(0));
        let namespace = *storage == StorageKey::namespaces();
        if namespace {
            set_body(&mut new, "status", json!({"phase": "Terminating"}));
        }
        let stored = self.commit_put(storage, key.clone(), new);
        if namespace {
            // A terminating namespace loses its contents at once, as the namespace controller
            // would do; the namespace itself waits for its finalizers.
            self.drop_namespace_contents(&key.name);
        }
        Some(stored)
    }

    /// Deletes (Background) every object in namespace `ns`.
    pub(super) fn drop_namespace_contents(&mut self, ns: &str) {
        let mut doomed = Vec::new();
        for (storage, objects) in &self.objects {
            for key in objects.keys().filter(|k| k.namespace == ns) {
                doomed.push((storage.clone(), key.clone()));
            }
        }
        for (storage, key) in doomed {
            self.delete_internal(&storage, &key, Propagation::Background);
        }
    }
}
