//! The checks a write passes before anything is stored: the body's type and identity must be
//! the URL's, preconditions (uid, resourceVersion) must hold, and a patch may not rename or
//! re-type its object. Each refusal is worded as Kubernetes words it.

use nephrite_krm::Object;
use serde_json::Value;

use super::ObjectKey;
use crate::error::ApiError;
use crate::resources::ResourceType;

/// A body's `kind`/`apiVersion`, when present, must be the resource's (any version of its
/// group).
pub(super) fn check_type(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if let Some(kind) = obj
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the body's kind {kind:?} does not match the resource {} (kind {:?})",
            rt.group_resource(),
            rt.kind
        )));
    }
    if let Some(api_version) = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
    {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        if group != rt.group {
            return Err(ApiError::bad_request(format!(
                "the body's apiVersion {api_version:?} is not in the group {:?} of {}",
                rt.group,
                rt.group_resource()
            )));
        }
    }
    Ok(())
}

/// An apply patch must name the exact apiVersion and kind of the endpoint (Kubernetes'
/// field manager refuses anything else with 400).
pub(super) fn check_apply_type(rt: &ResourceType, patch: &Value) -> Result<(), ApiError> {
    let api_version = patch
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {} (an apply patch must set apiVersion and kind)",
            rt.api_version()
        )));
    }
    let kind = patch.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != rt.kind {
        return Err(ApiError::bad_request(format!(
            "invalid object type: {api_version}, Kind={kind} (an apply patch to {} must set kind {:?})",
            rt.group_resource(),
            rt.kind
        )));
    }
    Ok(())
}

/// The name (required) and namespace (when set) of a written object must be the URL's.
pub(super) fn check_name(rt: &ResourceType, key: &ObjectKey, obj: &Object) -> Result<(), ApiError> {
    let body_name = obj.name().unwrap_or("");
    if body_name != key.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            key.name
        )));
    }
    if rt.namespaced
        && let Some(body_ns) = obj.namespace()
        && body_ns != key.namespace
    {
        return Err(ApiError::bad_request(format!(
            "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({})",
            key.namespace
        )));
    }
    Ok(())
}

/// A custom resource's patched document must still carry its apiVersion and kind (422; a
/// built-in kind gets them back from the URL), and keep its type (400).
pub(super) fn check_patched_type(
    rt: &ResourceType,
    key: &ObjectKey,
    doc: &Value,
) -> Result<(), ApiError> {
    if rt.crd.is_some() {
        for field in ["apiVersion", "kind"] {
            if doc
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::invalid(
                    &rt.qualified_kind(),
                    &key.name,
                    "patch",
                    &format!("Invalid value: Object '{field}' is missing in the patched object"),
                ));
            }
        }
    }
    check_type(rt, doc)
}

/// What Kubernetes checks on the result of a patch before writing it: the name and namespace
/// stay the URL's (400) and the uid cannot change (422).
pub(super) fn check_patched(
    rt: &ResourceType,
    key: &ObjectKey,
    old: &Object,
    doc: &Object,
) -> Result<(), ApiError> {
    check_name(rt, key, doc)?;
    if let Some(uid) = doc.metadata.details().uid.as_deref()
        && Some(uid) != old.metadata.details().uid.as_deref()
    {
        return Err(ApiError::invalid(
            &rt.qualified_kind(),
            &key.name,
            "metadata.uid",
            &format!("Invalid value: {uid:?}: field is immutable"),
        ));
    }
    Ok(())
}

/// A non-empty metadata.resourceVersion in a write must equal the stored one.
pub(super) fn check_rv_precondition(
    rt: &ResourceType,
    old: &Object,
    proposed: &Object,
) -> Result<(), ApiError> {
    if let Some(want) = proposed.metadata.details().resource_version.as_deref()
        && Some(want) != old.metadata.details().resource_version.as_deref()
    {
        return Err(ApiError::conflict(
            &rt.group_resource(),
            old.name().unwrap_or(""),
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    Ok(())
}

/// 409 Conflict unless the stored object's uid is `want` (a PUT body's uid or a DELETE's
/// `preconditions.uid`), worded as Kubernetes words it.
pub(super) fn check_uid_precondition(
    rt: &ResourceType,
    stored: &Object,
    want: &str,
) -> Result<(), ApiError> {
    let have = stored.metadata.details().uid.as_deref().unwrap_or("");
    if want == have {
        return Ok(());
    }
    Err(ApiError::conflict(
        &rt.group_resource(),
        stored.name().unwrap_or(""),
        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {have}"),
    ))
}

/// 409 Conflict unless the stored object's resourceVersion is `want` (a DELETE's
/// `preconditions.resourceVersion`).
pub(super) fn check_rv_delete_precondition(
    rt: &ResourceType,
    stored: &Object,
    want: &str,
) -> Result<(), ApiError> {
    let have = stored
        .metadata
        .details()
        .resource_version
        .as_deref()
        .unwrap_or("");
    if want == have {
        return Ok(());
    }
    Err(ApiError::conflict(
        &rt.group_resource(),
        stored.name().unwrap_or(""),
        &format!(
            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"
        ),
    ))
}

/// Kinds whose PUT creates a missing object, as their Kubernetes strategies allow
/// (`AllowCreateOnUpdate`): Endpoints, Events and Leases.
pub(super) fn creates_on_update(rt: &ResourceType) -> bool {
    rt.crd.is_none()
        && matches!(
            (rt.group.as_str(), rt.plural.as_str()),
            ("", "endpoints" | "events")
                | ("events.k8s.io", "events")
                | ("coordination.k8s.io", "leases")
        )
}

/// A PUT of a custom resource must carry the resourceVersion it was read at: custom
/// resources, unlike most built-in kinds, allow no unconditional update (422, as Kubernetes
/// words it, naming the resource).
pub(super) fn check_rv_given_for_custom_update(
    rt: &ResourceType,
    proposed: &Object,
) -> Result<(), ApiError> {
    if rt.crd.is_none() || proposed.metadata.details().resource_version.is_some() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &rt.group_resource(),
        proposed.name().unwrap_or(""),
        "metadata.resourceVersion",
        "Invalid value: 0: must be specified for an update",
    ))
}

/// An object being deleted may lose finalizers but gain none (422, as Kubernetes words it:
/// `found new finalizers []string{"b"}`).
pub(super) fn check_no_new_finalizers(
    rt: &ResourceType,
    old: &Object,
    new: &Object,
) -> Result<(), ApiError> {
    let had = old
        .metadata
        .details()
        .finalizers
        .clone()
        .unwrap_or_default();
    let added: Vec<String> = new
        .metadata
        .details()
        .finalizers
        .iter()
        .flatten()
        .filter(|f| !had.contains(f))
        .map(|f| format!("{f:?}"))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &rt.qualified_kind(),
        new.name().unwrap_or(""),
        "metadata.finalizers",
        &format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            added.join(", ")
        ),
    ))
}
