//! Owner-reference garbage collection, run synchronously inside the write that triggers it:
//! dependents whose owners are all gone are deleted (Background), owners held by the
//! `foregroundDeletion` finalizer are released once their dependents are gone, and an Orphan
//! delete strips the owner reference from each dependent.

use super::meta::{normalize, owner_uids};
use super::{ObjectKey, Propagation, StorageKey, Store};

/// The finalizer that holds an owner until its dependents are gone.
pub(super) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

impl Store {
    /// Removes the owner reference to `owner_uid` from every dependent.
    pub(super) fn orphan_dependents(&mut self, owner_uid: &str) {
        for (storage, key) in self.dependents(owner_uid) {
            let Some(mut obj) = self.stored(&storage, &key).cloned() else {
                continue;
            };
            if let Some(refs) = obj
                .metadata
                .details_if_any_mut()
                .and_then(|details| details.owner_references.as_mut())
            {
                refs.retain(|r| r.uid != owner_uid);
            }
            normalize(&mut obj.metadata);
            self.commit_put(&storage, key, obj);
        }
    }

    /// Every object with an owner reference to `owner_uid`.
    fn dependents(&self, owner_uid: &str) -> Vec<(StorageKey, ObjectKey)> {
        let mut out = Vec::new();
        for (storage, objects) in &self.objects {
            for (key, obj) in objects {
                if owner_uids(obj).any(|u| u == owner_uid) {
                    out.push((storage.clone(), key.clone()));
                }
            }
        }
        out
    }

    /// The garbage collector, run after writes that can affect it.
    pub(super) fn collect_garbage(&mut self) {
        // Each round deletes or releases at least one object, so this terminates; the bound
        // is a guard only.
        for _ in 0..100_000 {
            let mut changed = false;
            let mut waiting = Vec::new();
            let mut orphans = Vec::new();
            for (storage, objects) in &self.objects {
                for (key, obj) in objects {
                    let terminating = obj.is_being_deleted();
                    if terminating
                        && obj.has_finalizer(FOREGROUND_FINALIZER)
                        && let Some(uid) = &obj.metadata.details().uid
                    {
                        waiting.push((storage.clone(), key.clone(), uid.clone()));
                    }
                    let mut owners = owner_uids(obj).peekable();
                    if !terminating
                        && owners.peek().is_some()
                        && owners.all(|u| !self.uids.contains_key(u))
                    {
                        orphans.push((storage.clone(), key.clone()));
                    }
                }
            }
            for (storage, key) in orphans {
                self.delete_internal(&storage, &key, Propagation::Background);
                changed = true;
            }
            for (storage, key, uid) in waiting {
                let mut live = false;
                for (dep_storage, dep_key) in self.dependents(&uid) {
                    live = true;
                    let terminating = self
                        .stored(&dep_storage, &dep_key)
                        .is_some_and(|o| o.is_being_deleted());
                    if !terminating {
                        self.delete_internal(&dep_storage, &dep_key, Propagation::Background);
                        changed = true;
                    }
                }
                if !live && let Some(mut owner) = self.stored(&storage, &key).cloned() {
                    owner.remove_finalizer(FOREGROUND_FINALIZER);
                    normalize(&mut owner.metadata);
                    if owner.metadata.details().finalizers.is_none() {
                        self.commit_remove(&storage, &key, Some(owner));
                    } else {
                        self.commit_put(&storage, key, owner);
                    }
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }
}
