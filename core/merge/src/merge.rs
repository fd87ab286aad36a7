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
//!    rewritten by [`rewrite_mode`](crate::preparation::rewrite_mode) (`Here` → `Never`,
//!    `Postpone` → `Here`) before it combines with the target, so merging the same package twice
//!    gives what merging it once gives.
//!
//! Guard: if any resource of the merge package is still preparable where it comes from, the
//! merge is refused with [`MergeError::NotReady`] and the target is untouched; the caller
//! retries once that resource is prepared. Every check runs before the first change, so an
//! error never leaves a half-merged target.

use std::collections::HashMap;

use std::hash::{BuildHasherDefault, Hasher};

use indexmap::IndexMap;
use nephrite_krm::{Object, ObjectMeta, Package, ReservedKey, keys};
use serde_json::Value;

use crate::preparation::rewrite_annotations;

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
    /// The deep-merged resource is not a valid object any more.
    #[error("override of {resource} produced an invalid object: {source}")]
    Override {
        /// The resource.
        resource: String,
        /// Why it is invalid.
        source: ReservedKey,
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

/// A hash map over identities. Identities are short strings from the packages themselves, so
/// a simple multiplicative hash (FxHash's) serves better than SipHash's flood resistance.
type IdentityMap<'a, V> = HashMap<Identity<'a>, V, BuildHasherDefault<IdentityHasher>>;

/// FxHash's rotate-xor-multiply per word, finished with MurmurHash3's mixer so that the low
/// bits hashbrown indexes by depend on every input bit.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let mut rest = [0u8; 8];
        rest[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(rest) ^ (bytes.len() as u64));
    }

    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

impl IdentityHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// `Override`: `over` deep-merged into a copy of `existing`, as [`deep_merge`] would merge
/// their JSON forms — metadata field by field (labels, annotations and unlisted fields merge
/// key by key, the rest replace when set), the body key by key — without the round trip
/// through JSON. `over` is consumed: its values move into the result, uncopied.
fn override_object(existing: &Object, over: Object) -> Result<Object, MergeError> {
    let resource = || describe(existing);
    let mut merged = existing.clone();
    merged.api_version = over.api_version;
    merged.kind = over.kind;
    override_metadata(&mut merged.metadata, over.metadata);
    for (key, value) in over.body.into_map() {
        match merged.body.get_mut(&key) {
            Some(existing) => deep_merge(existing, value),
            None => {
                merged
                    .body
                    .insert(key, value)
                    .map_err(|source| MergeError::Override {
                        resource: resource(),
                        source,
                    })?;
            }
        }
    }
    Ok(merged)
}

fn override_metadata(base: &mut ObjectMeta, over: ObjectMeta) {
    fn set<T>(base: &mut Option<T>, over: Option<T>) {
        if over.is_some() {
            *base = over;
        }
    }
    fn merge_strings(
        base: &mut Option<IndexMap<String, String>>,
        over: Option<IndexMap<String, String>>,
    ) {
        if let Some(over) = over {
            match base {
                Some(base) => base.extend(over),
                None => *base = Some(over),
            }
        }
    }
    // Destructured so that a field added to ObjectMeta cannot be forgotten here.
    let ObjectMeta {
        name,
        generate_name,
        namespace,
        uid,
        resource_version,
        generation,
        creation_timestamp,
        deletion_timestamp,
        labels,
        annotations,
        owner_references,
        finalizers,
        extra,
    } = over;
    set(&mut base.name, name);
    set(&mut base.generate_name, generate_name);
    set(&mut base.namespace, namespace);
    set(&mut base.uid, uid);
    set(&mut base.resource_version, resource_version);
    set(&mut base.generation, generation);
    set(&mut base.creation_timestamp, creation_timestamp);
    set(&mut base.deletion_timestamp, deletion_timestamp);
    merge_strings(&mut base.labels, labels);
    merge_strings(&mut base.annotations, annotations);
    set(&mut base.owner_references, owner_references);
    set(&mut base.finalizers, finalizers);
    for (key, value) in extra {
        match base.extra.get_mut(&key) {
            Some(existing) => deep_merge(existing, value),
            None => {
                base.extra.insert(key, value);
            }
        }
    }
}

/// Where a source resource's result goes.
#[derive(Clone, Copy)]
enum Slot {
    /// Over the target's resource at this position.
    Target(usize),
    /// Appended, as the n-th new identity.
    Append(usize),
}

/// The identity a source resource merges under: its own, with the name `nephio.org/rename`
/// gives when present — borrowed from the source package.
fn source_identity(original: &Object) -> Identity<'_> {
    let (group, version, kind, name) = identity(original);
    let name = original.annotation(keys::RENAME).unwrap_or(name);
    (group, version, kind, name)
}

/// A source resource as it merges: renamed, `nephio.org/merge` dropped, modes rewritten.
fn merged_form(original: &Object, index: usize) -> Result<Object, MergeError> {
    let mut object = original.clone();
    if let Some(name) = object.remove_annotation(keys::RENAME) {
        object.set_name(name);
    }
    if object.name().is_none_or(str::is_empty) {
        return Err(MergeError::Unnamed {
            index,
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
        });
    }
    object.remove_annotation(keys::MERGE);
    if object
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.is_empty())
    {
        object.metadata.annotations = None;
    }
    rewrite_annotations(&mut object);
    Ok(object)
}

/// Merges `source` into `target` (see the module documentation). `is_preparable` tells whether
/// a source resource is still preparable where it comes from (the guard); pass `|_| false` for
/// a merge package that came from a user.
///
/// Linear in the size of both packages: one hash index over the target (keys borrowed, no
/// allocation), one pass over the source that prepares and places each resource while it is
/// hot in cache, and the target written once at the end — so an error at any point leaves the
/// target untouched.
pub fn merge_package(
    target: &mut Package,
    source: &Package,
    is_preparable: impl Fn(&Object) -> bool,
) -> Result<MergeReport, MergeError> {
    let count = source.len();
    // Each source resource's result — its merged form, or for an override the combined
    // object — with where it goes.
    let mut prepared: Vec<(Object, Slot)> = Vec::with_capacity(count);
    let mut superseded = vec![false; count];
    // Appended identities in first-appearance order: the source position of the last result.
    let mut appends: Vec<usize> = Vec::new();
    let mut report = MergeReport::default();
    {
        let mut index: IdentityMap<'_, usize> =
            IdentityMap::with_capacity_and_hasher(target.len(), Default::default());
        for (at, object) in target.iter().enumerate() {
            index.entry(identity(object)).or_insert(at);
        }
        // Identity → the latest source position with it; a later resource with the same
        // identity combines with that one's result.
        let mut latest: IdentityMap<'_, usize> =
            IdentityMap::with_capacity_and_hasher(count, Default::default());
        for (at, original) in source.iter().enumerate() {
            if is_preparable(original) {
                return Err(MergeError::NotReady {
                    resource: describe(original),
                });
            }
            let mode = MergeMode::of(original)?;
            let object = merged_form(original, at)?;
            let key = source_identity(original);
            let (existing, slot) = match latest.get(&key) {
                Some(&earlier) => {
                    superseded[earlier] = true;
                    let (result, slot) = &prepared[earlier];
                    (Some(result), *slot)
                }
                None => match index.get(&key) {
                    Some(&position) => (Some(&target.objects()[position]), Slot::Target(position)),
                    None => (None, Slot::Append(appends.len())),
                },
            };
            let result = match (existing, mode) {
                (None, _) => {
                    report.appended += 1;
                    appends.push(at);
                    object
                }
                (Some(_), MergeMode::Replace) => {
                    report.replaced += 1;
                    object
                }
                (Some(existing), MergeMode::Override) => {
                    report.overridden += 1;
                    override_object(existing, object)?
                }
            };
            if let Slot::Append(k) = slot {
                appends[k] = at;
            }
            prepared.push((result, slot));
            latest.insert(key, at);
        }
    }

    // Write each identity's last result: in place, or appended in first-appearance order.
    let mut tail: Vec<Option<Object>> = Vec::new();
    tail.resize_with(appends.len(), || None);
    for (at, (object, slot)) in prepared.into_iter().enumerate() {
        if superseded[at] {
            continue;
        }
        match slot {
            Slot::Target(position) => target.objects_mut()[position] = object,
            Slot::Append(k) => tail[k] = Some(object),
        }
    }
    let objects = target.objects_mut();
    objects.reserve(tail.len());
    objects.extend(tail.into_iter().flatten());
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

#[cfg(test)]
mod tests;
