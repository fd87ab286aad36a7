//! Server-side apply's field management: which field manager owns which fields of an object,
//! so that an apply removes the fields its manager set before and no longer sets — unless
//! another manager owns them too — and refuses, unless forced, to change a field another
//! manager owns (409 Conflict, worded as Kubernetes words it).
//!
//! | write | what it does to ownership |
//! |---|---|
//! | apply (`application/apply-patch+yaml`) | its manager owns exactly the fields of its config; fields it owned before and dropped are removed from the object when no other manager owns them |
//! | create, update, merge/JSON/strategic patch | its manager takes every field whose value the write changed; no one else owns those any more |
//!
//! A field is a path of object member names; lists are atomic (one field), which Kubernetes
//! does for custom resources without `x-kubernetes-list-type` but not for built-in lists with
//! merge keys (containers, ports, finalizers). Of `metadata`, only labels, annotations,
//! finalizers and owner references are fields; `apiVersion` and `kind` are none. Writes to the
//! main resource of a type with the status subresource own no `status` field, and writes to
//! `/status` own only `status` fields. The ownership is kept beside the object, not written
//! to `metadata.managedFields`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::error::ApiError;

/// A field: object member names from the root of the object.
pub(crate) type FieldPath = Vec<String>;

/// How a manager last wrote its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Operation {
    /// A server-side apply.
    Apply,
    /// Any other write (create, update, patch).
    Update,
}

/// One managedFields entry's identity: a manager's name, how it writes and where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Manager {
    /// The `fieldManager` (or the User-Agent's product name).
    pub name: String,
    /// Apply or update.
    pub operation: Operation,
    /// Whether the writes went to `/status`.
    pub status: bool,
}

/// Which part of an object a write's fields are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Everything but `status` (a main-resource write of a type with the status subresource).
    NoStatus,
    /// Only `status` (a `/status` write).
    StatusOnly,
    /// Every field (a type without the status subresource).
    All,
}

/// The metadata members that are fields.
const METADATA_FIELDS: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

/// One other manager's field that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    manager: Manager,
    api_version: String,
    field: FieldPath,
}

/// Who owns which fields of one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ManagedFields {
    entries: BTreeMap<Manager, Entry>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Entry {
    api_version: String,
    fields: BTreeSet<FieldPath>,
}

impl ManagedFields {
    /// Records a create, update or non-apply patch from `old` (`Value::Null` for a create) to
    /// `new`: `manager` takes every field in `scope` whose value changed.
    pub fn record_update(
        &mut self,
        manager: Manager,
        api_version: &str,
        old: &Value,
        new: &Value,
        scope: Scope,
    ) {
        let changed: BTreeSet<FieldPath> = fields(new, scope)
            .into_iter()
            .filter(|p| value_at(old, p) != value_at(new, p))
            .collect();
        for entry in self.entries.values_mut() {
            entry.fields.retain(|p| !changed.contains(p));
        }
        if !changed.is_empty() {
            let entry = self.entries.entry(manager).or_default();
            entry.api_version = api_version.to_string();
            entry.fields.extend(changed);
        }
        self.keep_existing(new);
    }

    /// Applies `config` for `manager` to the object `live` and returns the object to write:
    /// `config` merged in (objects member by member, anything else replaced), and the fields
    /// `manager` applied before but not now removed unless another manager owns them. Without
    /// `force`, a field of the config whose live value differs and that another manager owns is
    /// a conflict; with it, the field changes hands.
    pub fn apply(
        &mut self,
        manager: Manager,
        api_version: &str,
        live: &Value,
        config: &Value,
        scope: Scope,
        force: bool,
    ) -> Result<Value, Vec<Conflict>> {
        self.keep_existing(live);
        let applied = fields(config, scope);
        let mut conflicts = Vec::new();
        for path in &applied {
            if value_at(live, path).is_none_or(|v| Some(v) == value_at(config, path)) {
                continue;
            }
            for (other, entry) in &self.entries {
                if other.name == manager.name {
                    continue;
                }
                for owned in entry.fields.iter().filter(|o| related(o, path)) {
                    conflicts.push(Conflict {
                        manager: other.clone(),
                        api_version: entry.api_version.clone(),
                        field: owned.clone(),
                    });
                }
            }
        }
        if !conflicts.is_empty() && !force {
            conflicts.sort_by(|a, b| (&a.manager.name, &a.field).cmp(&(&b.manager.name, &b.field)));
            conflicts.dedup();
            return Err(conflicts);
        }
        for conflict in &conflicts {
            if let Some(entry) = self.entries.get_mut(&conflict.manager) {
                entry.fields.remove(&conflict.field);
            }
        }
        let mut doc = live.clone();
        merge_config(&mut doc, &restrict(config, scope));
        let dropped: Vec<FieldPath> = self
            .entries
            .get(&manager)
            .map(|e| e.fields.difference(&applied).cloned().collect())
            .unwrap_or_default();
        let others = |p: &FieldPath| {
            self.entries
                .iter()
                .filter(|(m, _)| **m != manager)
                .any(|(_, e)| e.fields.iter().any(|o| related(o, p)))
        };
        let orphaned: Vec<FieldPath> = dropped.into_iter().filter(|p| !others(p)).collect();
        for path in &orphaned {
            remove_at(&mut doc, path, &|p: &[String]| {
                self.entries
                    .values()
                    .any(|e| e.fields.iter().any(|o| o == p))
            });
        }
        let entry = self.entries.entry(manager).or_default();
        entry.api_version = api_version.to_string();
        entry.fields = applied;
        Ok(doc)
    }

    /// Drops the fields `obj` no longer has, and the managers left with none.
    pub fn keep_existing(&mut self, obj: &Value) {
        let present = fields(obj, Scope::All);
        for entry in self.entries.values_mut() {
            entry.fields.retain(|p| present.contains(p));
        }
        self.entries.retain(|_, e| !e.fields.is_empty());
    }

    /// The fields `name` owns, in any of its entries (for tests).
    #[cfg(test)]
    pub fn owned_by(&self, name: &str) -> BTreeSet<FieldPath> {
        self.entries
            .iter()
            .filter(|(m, _)| m.name == name)
            .flat_map(|(_, e)| e.fields.iter().cloned())
            .collect()
    }
}

/// 409 Conflict for an apply that would change other managers' fields, as Kubernetes words it:
/// `Apply failed with 1 conflict: conflict with "ctl" using v1: .data.d`.
pub(crate) fn conflict_error(conflicts: &[Conflict]) -> ApiError {
    let with = |c: &Conflict| match c.manager.operation {
        Operation::Apply => format!("{:?}", c.manager.name),
        Operation::Update => format!("{:?} using {}", c.manager.name, c.api_version),
    };
    let dotted = |c: &Conflict| format!(".{}", c.field.join("."));
    let message = match conflicts {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            with(one),
            dotted(one)
        ),
        many => {
            let mut text = format!("Apply failed with {} conflicts: ", many.len());
            let mut last: Option<String> = None;
            let mut groups = Vec::new();
            for c in many {
                let who = with(c);
                if last.as_ref() != Some(&who) {
                    groups.push(format!("conflicts with {who}:"));
                    last = Some(who);
                }
                groups.push(format!("- {}", dotted(c)));
            }
            text.push_str(&groups.join("\n"));
            text
        }
    };
    let causes = conflicts
        .iter()
        .map(|c| (format!("conflict with {}", with(c)), dotted(c)))
        .collect();
    ApiError::conflict_with_causes(message, "FieldManagerConflict", causes)
}

/// Whether one field is the other or inside it.
fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Whether a top-level member is in `scope`'s fields.
fn in_scope(key: &str, scope: Scope) -> bool {
    match (key, scope) {
        ("apiVersion" | "kind", _) => false,
        ("status", Scope::NoStatus) => false,
        ("status", _) => true,
        (_, Scope::StatusOnly) => false,
        _ => true,
    }
}

/// The fields of `obj` in `scope`: every member whose value is not a non-empty object.
pub(crate) fn fields(obj: &Value, scope: Scope) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for (key, value) in map.iter().filter(|(k, _)| in_scope(k, scope)) {
        if key == "metadata" {
            let Some(meta) = value.as_object() else {
                continue;
            };
            for name in METADATA_FIELDS {
                if let Some(v) = meta.get(name) {
                    walk(v, vec![key.clone(), name.to_string()], &mut out);
                }
            }
        } else {
            walk(value, vec![key.clone()], &mut out);
        }
    }
    out
}

fn walk(value: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
    match value.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, v) in map {
                let mut p = path.clone();
                p.push(k.clone());
                walk(v, p, out);
            }
        }
        _ => {
            out.insert(path);
        }
    }
}

/// The value of a field, when the object has it.
pub(crate) fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.as_object()?.get(k))
}

/// The config without what is out of `scope` (a main-resource apply cannot set the status of
/// a type with the status subresource, nor a status apply anything else).
fn restrict(config: &Value, scope: Scope) -> Value {
    let Some(map) = config.as_object() else {
        return config.clone();
    };
    let kept: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| {
            matches!(k.as_str(), "apiVersion" | "kind" | "metadata") || in_scope(k, scope)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept)
}

/// Merges an applied config into an object: objects member by member, anything else (lists,
/// scalars, `null`) replaced.
fn merge_config(doc: &mut Value, config: &Value) {
    match (doc.as_object_mut(), config.as_object()) {
        (Some(target), Some(source)) => {
            for (k, v) in source {
                match target.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        merge_config(existing, v);
                    }
                    _ => {
                        target.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        _ => *doc = config.clone(),
    }
}

/// Removes a field, then each parent object it leaves empty that no manager owns as a field.
fn remove_at(doc: &mut Value, path: &[String], owned: &dyn Fn(&[String]) -> bool) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let Some(map) = value_at_mut(doc, parent).and_then(Value::as_object_mut) else {
        return;
    };
    if map.remove(last).is_none() {
        return;
    }
    let mut end = parent.len();
    while end > 0 {
        let here = &path[..end];
        let empty = value_at(doc, here)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty);
        if !empty || owned(here) {
            return;
        }
        if let Some(up) = value_at_mut(doc, &path[..end - 1]).and_then(Value::as_object_mut) {
            up.remove(&path[end - 1]);
        }
        end -= 1;
    }
}

fn value_at_mut<'a>(obj: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(obj, |v, k| v.as_object_mut()?.get_mut(k))
}

#[cfg(test)]
mod tests;
