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

use nephrite_krm::{Object, ObjectError, Package, keys};
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
        source: ObjectError,
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

/// Identity of a resource for merging: group, version, kind, name.
type Identity = (String, String, String, String);

fn identity(object: &Object) -> Identity {
    let gvk = object.gvk();
    (
        gvk.group,
        gvk.version,
        gvk.kind,
        object.name().unwrap_or_default().to_owned(),
    )
}

/// Merges `source` into `target` (see the module documentation). `is_preparable` tells whether
/// a source resource is still preparable where it comes from (the guard); pass `|_| false` for
/// a merge package that came from a user.
pub fn merge_package(
    target: &mut Package,
    source: &Package,
    is_preparable: impl Fn(&Object) -> bool,
) -> Result<MergeReport, MergeError> {
    // Check and prepare every source resource before touching the target.
    let mut prepared = Vec::with_capacity(source.len());
    for (index, original) in source.iter().enumerate() {
        if is_preparable(original) {
            return Err(MergeError::NotReady {
                resource: describe(original),
            });
        }
        let mode = MergeMode::of(original)?;
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
        prepared.push((mode, object));
    }

    // Compute every result before writing any, so an invalid override leaves `target` as it was.
    let mut index: HashMap<Identity, usize> = HashMap::with_capacity(target.len());
    for (at, object) in target.iter().enumerate() {
        index.entry(identity(object)).or_insert(at);
    }
    let mut writes: Vec<(Option<usize>, Object)> = Vec::with_capacity(prepared.len());
    // Pending results by target slot (or by position in `writes` for appended ones), so that a
    // later source resource with the same identity combines with the earlier result.
    let mut pending: HashMap<Identity, usize> = HashMap::new();
    let mut report = MergeReport::default();
    for (mode, object) in prepared {
        let key = identity(&object);
        let existing = match pending.get(&key) {
            Some(&write) => Some(&writes[write].1),
            None => index.get(&key).map(|&at| &target.objects()[at]),
        };
        let merged = match (existing, mode) {
            (None, _) => {
                report.appended += 1;
                object
            }
            (Some(_), MergeMode::Replace) => {
                report.replaced += 1;
                object
            }
            (Some(existing), MergeMode::Override) => {
                report.overridden += 1;
                let mut base = existing.to_json();
                deep_merge(&mut base, object.to_json());
                Object::from_json(base).map_err(|source| MergeError::Override {
                    resource: describe(&object),
                    source,
                })?
            }
        };
        match pending.get(&key) {
            Some(&write) => writes[write].1 = merged,
            None => {
                pending.insert(key.clone(), writes.len());
                writes.push((index.get(&key).copied(), merged));
            }
        }
    }
    for (slot, object) in writes {
        match slot {
            Some(at) => target.objects_mut()[at] = object,
            None => target.push(object),
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

#[cfg(test)]
mod tests;
