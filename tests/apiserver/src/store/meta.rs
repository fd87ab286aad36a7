//! The metadata rules every write shares: what Go's `omitempty` drops, which system fields a
//! client cannot write, and what counts as a change of the spec (a new `generation`).

use std::collections::BTreeMap;

use nephrite_krm::{Object, ObjectMeta};
use serde_json::Value;

use crate::error::ApiError;

/// Metadata fields the server keeps in [`MetaDetails::extra`](nephrite_krm::MetaDetails::extra) and writes itself.
pub(super) const GRACE_PERIOD: &str = "deletionGracePeriodSeconds";

/// Metadata fields the server never stores.
pub(super) const DROPPED: [&str; 2] = ["managedFields", "selfLink"];

/// Checks that a request body is a JSON object.
pub(crate) fn into_object(body: Value) -> Result<Value, ApiError> {
    if body.is_object() {
        Ok(body)
    } else {
        Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ))
    }
}

/// Drops what Go's `omitempty` drops (empty strings, lists and maps) and the fields the server
/// never stores (`managedFields`, `selfLink`).
pub(super) fn normalize(meta: &mut ObjectMeta) {
    for field in [&mut meta.name, &mut meta.namespace] {
        if field.as_deref() == Some("") {
            *field = None;
        }
    }
    if meta.labels.as_ref().is_some_and(|l| l.is_empty()) {
        meta.labels = None;
    }
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
    let Some(details) = meta.details_if_any_mut() else {
        return;
    };
    for field in [
        &mut details.generate_name,
        &mut details.uid,
        &mut details.resource_version,
        &mut details.creation_timestamp,
        &mut details.deletion_timestamp,
    ] {
        if field.as_deref() == Some("") {
            *field = None;
        }
    }
    if details.finalizers.as_ref().is_some_and(Vec::is_empty) {
        details.finalizers = None;
    }
    if details.owner_references.as_ref().is_some_and(Vec::is_empty) {
        details.owner_references = None;
    }
    for field in DROPPED {
        details.extra.shift_remove(field);
    }
    details.extra.retain(|_, v| !v.is_null());
}

/// Copies the fields only the server writes (identity, timestamps, generation,
/// resourceVersion) from the stored metadata onto a proposed one.
pub(super) fn keep_system_fields(stored: &ObjectMeta, proposed: &mut ObjectMeta) {
    proposed.name.clone_from(&stored.name);
    proposed.namespace.clone_from(&stored.namespace);
    proposed.details_mut().uid.clone_from(&stored.details().uid);
    proposed
        .details_mut()
        .creation_timestamp
        .clone_from(&stored.details().creation_timestamp);
    proposed
        .details_mut()
        .deletion_timestamp
        .clone_from(&stored.details().deletion_timestamp);
    proposed.details_mut().generation = stored.details().generation;
    proposed
        .details_mut()
        .resource_version
        .clone_from(&stored.details().resource_version);
    match stored.details().extra.get(GRACE_PERIOD) {
        Some(v) => {
            proposed
                .details_mut()
                .extra
                .insert(GRACE_PERIOD.into(), v.clone());
        }
        None => {
            proposed.details_mut().extra.shift_remove(GRACE_PERIOD);
        }
    }
}

/// The uids of an object's owners.
pub(super) fn owner_uids(obj: &Object) -> impl Iterator<Item = &str> {
    obj.metadata
        .details()
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.uid.as_str())
}

/// Whether a write from `old` to `new` changes what `generation` counts: everything but
/// metadata and type information, and but `status` unless `with_status` (custom resources
/// without the status subresource, as in Kubernetes).
pub(super) fn spec_changed(old: &Object, new: &Object, with_status: bool) -> bool {
    let part = |obj: &Object| -> BTreeMap<String, Value> {
        obj.body
            .iter()
            .filter(|(k, _)| with_status || k.as_str() != "status")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    part(old) != part(new)
}

/// Whether two states of an object differ in more than their resourceVersion (and the version
/// they were read under): a write that changes nothing else is a no-op.
pub(super) fn same_content(a: &Object, b: &Object) -> bool {
    let strip = |o: &Object| {
        let mut o = o.clone();
        o.metadata.details_mut().resource_version = None;
        o.api_version.clear();
        o
    };
    strip(a) == strip(b)
}

/// The current time as Kubernetes writes it (RFC 3339, seconds, UTC).
pub(super) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Five characters Kubernetes' name generator could pick.
pub(super) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}
