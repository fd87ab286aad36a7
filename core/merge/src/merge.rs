//! Merging a merge package into a target package — how a template becomes a child deployment's
//! package, and how `--merge` files and placement merges take effect.
//!
//! For each resource of the merge package, in order:
//!
//! 1. `nephio.org/rename`, when present, becomes the resource's name (the annotation is dropped).
//! 2. Its identity is GVK + name. Absent from the target → appended at the end.
//! 3. Present → `nephio.org/merge: Replace` (the default, as TKO's code and PACKAGES.md do; the
//!    seed's prose says properties merge) replaces the whole resource in place;
//!    `Override` deep-merges it: mappings merge key by key, lists and scalars replace. The
//!    `nephio.org/merge` annotation is dropped from the result.
//! 4. The merged resource's `nephio.org/prepare` and `nephio.org/metadata` annotations are
//!    rewritten by [`rewrite_mode`] (`Here` → `Never`, `Postpone` → `Here`) before it
//!    combines with the target, so merging the same package twice
//!    gives what merging it once gives.
//!
//! Guard: if any resource of the merge package is still preparable where it comes from, the
//! merge is refused with [`MergeError::NotReady`] and the target is untouched; the caller
//! retries once that resource is prepared. Every check runs before the first change, so an
//! error never leaves a half-merged target.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use indexmap::IndexMap;
use nephrite_krm::{MetaDetails, Object, ObjectMeta, Package, keys};
use serde_json::Value;

use crate::preparation::rewrite_mode;

/// How a merged resource combines with an existing one (`nephio.org/merge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MergeMode {
    /// Replace the whole resource (the default).
    Replace,
    /// Deep merge: mappings merge recursively, lists and scalars replace.
    Override,
}

impl MergeMode {
    /// The mode `object` asks for; an unknown value is an error naming the resource.
    pub fn of(object: &Object) -> Result<Self, MergeError> {
        match object.annotation(keys::MERGE) {
            None | Some("") | Some(keys::MERGE_REPLACE) => Ok(MergeMode::Replace),
            Some(keys::MERGE_OVERRIDE) => Ok(MergeMode::Override),
            Some(other) => Err(MergeError::UnknownMergeMode {
                resource: describe(object),
                value: other.to_owned(),
            }),
        }
    }
}

/// What a merge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MergeReport {
    /// Resources appended because the target had none of that GVK + name.
    pub appended: usize,
    /// Resources that replaced an existing one.
    pub replaced: usize,
    /// Resources deep-merged into an existing one.
    pub overridden: usize,
}

/// Why a merge was refused. The target is untouched in every case.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A resource of the merge package is still preparable where it comes from: retry later.
    #[error("not ready: merge source {resource} is not prepared yet")]
    NotReady {
        /// The resource (`apiVersion kind name`).
        resource: String,
    },
    /// `nephio.org/merge` has a value other than `Replace` or `Override`.
    #[error("{resource}: unknown nephio.org/merge value {value:?} (use Replace or Override)")]
    UnknownMergeMode {
        /// The resource.
        resource: String,
        /// The value found.
        value: String,
    },
    /// A resource of the merge package has no name (and no `nephio.org/rename`).
    #[error("merge resource {index} ({api_version} {kind}) has no metadata.name")]
    Unnamed {
        /// 0-based position in the merge package.
        index: usize,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
}

impl MergeError {
    /// Whether the merge should simply be retried later.
    pub fn is_not_ready(&self) -> bool {
        matches!(self, MergeError::NotReady { .. })
    }
}

fn describe(object: &Object) -> String {
    format!(
        "{} {} {}",
        object.api_version,
        object.kind,
        object.name().unwrap_or("<unnamed>")
    )
}

/// Identity of a resource for merging: group, version, kind, name — borrowed from the object,
/// so indexing a package allocates nothing.
type Identity<'a> = (&'a str, &'a str, &'a str, &'a str);

fn identity(object: &Object) -> Identity<'_> {
    // The group is everything before the last `/` of the apiVersion, as `Object::gvk` reads it.
    let (group, version) = object
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", object.api_version.as_str()));
    (
        group,
        version,
        object.kind.as_str(),
        object.name().unwrap_or_default(),
    )
}

/// Identity → slot (0, 1, … in first-appearance order), compact: the table holds only each
/// identity's slot (8 bytes an entry, so 10,000 identities take a few hundred KB of cache, not
/// a megabyte); the identities sit in slot order beside it, borrowed from the source package,
/// and settle hash collisions. Identities are short strings from the packages themselves, so
/// foldhash (seeded per index) serves better than SipHash.
struct SlotIndex<'a, S = foldhash::fast::RandomState> {
    hasher: S,
    table: HashTable<usize>,
    identities: Vec<Identity<'a>>,
}

impl<'a> SlotIndex<'a> {
    fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_hasher(capacity, foldhash::fast::RandomState::default())
    }
}

impl<'a, S: BuildHasher> SlotIndex<'a, S> {
    fn with_capacity_and_hasher(capacity: usize, hasher: S) -> Self {
        SlotIndex {
            hasher,
            table: HashTable::with_capacity(capacity),
            identities: Vec::with_capacity(capacity),
        }
    }

    /// The slot of `key`; a new identity gets the next one.
    fn slot_of(&mut self, key: Identity<'a>) -> usize {
        let next = self.identities.len();
        let (hasher, identities) = (&self.hasher, &self.identities);
        let slot = *self
            .table
            .entry(
                hasher.hash_one(key),
                |&slot| identities[slot] == key,
                |&slot| hasher.hash_one(identities[slot]),
            )
            .or_insert(next)
            .get();
        if slot == next {
            self.identities.push(key);
        }
        slot
    }

    /// The slot of `key`, if it has one.
    fn get(&self, key: &Identity<'_>) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(key), |&slot| {
                self.identities[slot] == *key
            })
            .copied()
    }

    fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }
}

/// The name `nephio.org/rename` gives, else the resource's own (empty when it has none).
fn merged_name(original: &Object) -> &str {
    original
        .annotation(keys::RENAME)
        .unwrap_or_else(|| original.name().unwrap_or_default())
}

/// The identity a source resource merges under: its own, with the name `nephio.org/rename`
/// gives when present — borrowed from the source package.
fn source_identity(original: &Object) -> Identity<'_> {
    let (group, version, kind, _) = identity(original);
    (group, version, kind, merged_name(original))
}

/// The annotations a merged resource carries, in order: the source's without
/// `nephio.org/rename` and `nephio.org/merge`, `nephio.org/prepare` and `nephio.org/metadata`
/// rewritten by [`rewrite_mode`].
fn merged_annotations(original: &Object) -> impl Iterator<Item = (&String, String)> {
    original
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| *key != keys::RENAME && *key != keys::MERGE)
        .map(|(key, value)| {
            let value = if key == keys::PREPARE || key == keys::METADATA {
                rewrite_mode(Some(value)).unwrap_or_default()
            } else {
                value.clone()
            };
            (key, value)
        })
}

/// A source resource as it merges: renamed, `nephio.org/merge` dropped, modes rewritten
/// (annotations left empty are dropped) — built in one copy.
fn merged_form(original: &Object) -> Object {
    let mut metadata = ObjectMeta::default();
    override_metadata(&mut metadata, original);
    Object {
        api_version: original.api_version.clone(),
        kind: original.kind.clone(),
        metadata,
        body: original.body.clone(),
    }
}

/// The metadata of `over`'s merged form deep-merged into `base`, field by field: labels,
/// annotations and unlisted fields merge key by key, the rest replace when set. Into an
/// empty `base` this is the merged form's metadata itself.
fn override_metadata(base: &mut ObjectMeta, over: &Object) {
    fn set<T: Clone>(base: &mut Option<T>, over: &Option<T>) {
        if over.is_some() {
            base.clone_from(over);
        }
    }
    let name = merged_name(over);
    if base.name.as_deref() != Some(name) {
        base.name = Some(name.to_owned());
    }
    set(&mut base.namespace, &over.metadata.namespace);
    if let Some(labels) = &over.metadata.labels {
        match &mut base.labels {
            Some(base) => {
                for (key, value) in labels {
                    base.insert(key.clone(), value.clone());
                }
            }
            None => base.labels = Some(labels.clone()),
        }
    }
    for (key, value) in merged_annotations(over) {
        let annotations = base.annotations.get_or_insert_with(IndexMap::new);
        match annotations.get_mut(key) {
            Some(existing) => *existing = value,
            None => {
                annotations.insert(key.clone(), value);
            }
        }
    }
    if let Some(details) = over.metadata.details_if_any() {
        override_details(base.details_mut(), details);
    }
}

/// The rarely carried metadata fields of `over` merged into `base`: unlisted fields key by
/// key, the rest replace when set.
fn override_details(base: &mut MetaDetails, over: &MetaDetails) {
    fn set<T: Clone>(base: &mut Option<T>, over: &Option<T>) {
        if over.is_some() {
            base.clone_from(over);
        }
    }
    // Destructured so that a field added to MetaDetails cannot be forgotten here.
    let MetaDetails {
        generate_name,
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        owner_references,
        finalizers,
        extra,
    } = over;
    set(&mut base.generate_name, generate_name);
    set(&mut base.uid, uid);
    set(&mut base.resource_version, resource_version);
    set(&mut base.generation, generation);
    set(&mut base.creation_timestamp, creation_timestamp);
    set(&mut base.deletion_timestamp, deletion_timestamp);
    set(&mut base.owner_references, owner_references);
    set(&mut base.finalizers, finalizers);
    for (key, value) in extra {
        match base.extra.get_mut(key) {
            Some(existing) => deep_merge_from(existing, value),
            None => {
                base.extra.insert(key.clone(), value.clone());
            }
        }
    }
}

/// `Override`: the merged form of `over` deep-merged into `existing` in place, as
/// [`deep_merge`] would merge their JSON forms — metadata by [`override_metadata`], the body
/// key by key — copying only the values that land in the result. `over`'s body holds no
/// reserved key ([`nephrite_krm::RESERVED_KEYS`]): [`nephrite_krm::Body`] refuses them.
fn override_in_place(existing: &mut Object, over: &Object) {
    existing.api_version.clone_from(&over.api_version);
    existing.kind.clone_from(&over.kind);
    override_metadata(&mut existing.metadata, over);
    for (key, value) in over.body.iter() {
        match existing.body.get_mut(key) {
            Some(existing) => deep_merge_from(existing, value),
            None => {
                let inserted = existing.body.insert(key.clone(), value.clone());
                debug_assert!(inserted.is_ok(), "a body never holds a reserved key");
            }
        }
    }
}

/// How one source resource merges: its mode and the identity slot it writes.
struct Step {
    mode: MergeMode,
    slot: usize,
}

/// No position yet: the identity is new to the target.
const ABSENT: usize = usize::MAX;

/// Merges `source` into `target` (see the module documentation). `is_preparable` tells whether
/// a source resource is still preparable where it comes from (the guard); pass `|_| false` for
/// a merge package that came from a user.
///
/// Linear in the size of both packages, in three passes: every source resource is checked and
/// given the slot of its identity (a compact index over identities borrowed from the source —
/// no allocation per key); one scan of the target finds each slot's resource; then each source
/// resource is written straight into the target: replaced by one copy, deep-merged in place
/// (only the merged values copied), or appended. Every check runs before the first write, so
/// an error leaves the target untouched.
pub fn merge_package(
    target: &mut Package,
    source: &Package,
    is_preparable: impl Fn(&Object) -> bool,
) -> Result<MergeReport, MergeError> {
    let mut steps: Vec<Step> = Vec::with_capacity(source.len());
    let mut position: Vec<usize> = Vec::with_capacity(source.len());
    {
        let mut slots = SlotIndex::with_capacity(source.len());
        for (at, original) in source.iter().enumerate() {
            if is_preparable(original) {
                return Err(MergeError::NotReady {
                    resource: describe(original),
                });
            }
            let mode = MergeMode::of(original)?;
            let key = source_identity(original);
            if key.3.is_empty() {
                return Err(MergeError::Unnamed {
                    index: at,
                    api_version: original.api_version.clone(),
                    kind: original.kind.clone(),
                });
            }
            let slot = slots.slot_of(key);
            if slot == position.len() {
                position.push(ABSENT);
            }
            steps.push(Step { mode, slot });
        }
        if !slots.is_empty() {
            for (at, object) in target.iter().enumerate() {
                if let Some(slot) = slots.get(&identity(object))
                    && position[slot] == ABSENT
                {
                    position[slot] = at;
                }
            }
        }
    }

    let mut report = MergeReport::default();
    let objects = target.objects_mut();
    objects.reserve(position.iter().filter(|&&at| at == ABSENT).count());
    for (step, original) in steps.into_iter().zip(source.iter()) {
        let at = position[step.slot];
        if at == ABSENT {
            position[step.slot] = objects.len();
            objects.push(merged_form(original));
            report.appended += 1;
            continue;
        }
        match step.mode {
            MergeMode::Replace => {
                objects[at] = merged_form(original);
                report.replaced += 1;
            }
            MergeMode::Override => {
                override_in_place(&mut objects[at], original);
                report.overridden += 1;
            }
        }
    }
    Ok(report)
}

/// Deep merge `over` into `base`: mappings merge key by key (new keys appended, existing keys
/// keep their position), anything else replaces.
pub fn deep_merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(existing) => deep_merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, over) => *base = over,
    }
}

/// [`deep_merge`] from a borrowed `over`: only the values that land in `base` are copied.
fn deep_merge_from(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) => deep_merge_from(existing, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => base.clone_from(over),
    }
}

#[cfg(test)]
mod tests;
