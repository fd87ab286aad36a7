//! Patch bodies, decoded from the request before the store lock is taken, and applied to a
//! stored object's JSON under it.

use serde_json::Value;

use super::meta::into_object;
use crate::error::ApiError;

/// The patch flavours, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PatchKind {
    /// application/merge-patch+json (RFC 7386).
    Merge,
    /// application/strategic-merge-patch+json, handled as a merge patch.
    StrategicAsMerge,
    /// application/json-patch+json (RFC 6902).
    Json,
    /// application/apply-patch+yaml: a server-side apply, which creates the object when absent.
    Apply,
}

/// A decoded patch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Patch {
    /// A JSON merge patch (RFC 7386); strategic merge patches are read as one.
    Merge(Value),
    /// JSON patch operations (RFC 6902), in order.
    Json(Vec<JsonPatchOp>),
    /// A server-side apply configuration (JSON or YAML); the store applies it with its field
    /// ownership (`managed`), creating the object when it is absent.
    Apply(Value),
}

/// One RFC 6902 operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsonPatchOp {
    /// `{"op": "test", "value": null}`: passes when the path is missing or null, as Kubernetes'
    /// JSON patch library does (kube-runtime's finalizer helper relies on it).
    TestNull {
        /// The operation's index in the patch.
        index: usize,
        /// The JSON pointer tested.
        path: String,
    },
    /// Any other operation.
    Op {
        /// The operation's index in the patch.
        index: usize,
        /// The operation.
        op: json_patch::PatchOperation,
    },
}

impl Patch {
    /// Decodes a patch body of the given kind.
    pub fn decode(kind: PatchKind, body: &[u8]) -> Result<Self, ApiError> {
        match kind {
            PatchKind::Merge | PatchKind::StrategicAsMerge => {
                let patch: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid merge patch: {e}")))?;
                if !patch.is_object() {
                    return Err(ApiError::bad_request("a merge patch must be a JSON object"));
                }
                Ok(Self::Merge(patch))
            }
            PatchKind::Json => decode_json_patch(body).map(Self::Json),
            PatchKind::Apply => {
                let parsed = match serde_json::from_slice::<Value>(body) {
                    Ok(v) => v,
                    Err(_) => serde_norway::from_slice::<Value>(body).map_err(|e| {
                        ApiError::bad_request(format!(
                            "invalid apply patch (neither JSON nor YAML): {e}"
                        ))
                    })?,
                };
                into_object(parsed).map(Self::Apply)
            }
        }
    }

    /// Applies the patch to `doc`; on failure `doc` is left as it was. An apply configuration
    /// is merged in here without field ownership (the store's writes go through `managed`).
    pub fn apply_to(&self, doc: &mut Value) -> Result<(), ApiError> {
        match self {
            Self::Merge(patch) | Self::Apply(patch) => {
                json_patch::merge(doc, patch);
                Ok(())
            }
            Self::Json(ops) => apply_json_patch(doc, ops),
        }
    }
}

fn decode_json_patch(body: &[u8]) -> Result<Vec<JsonPatchOp>, ApiError> {
    let ops: Vec<Value> = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    ops.into_iter()
        .enumerate()
        .map(|(index, op)| {
            let is_null_test = op.get("op").and_then(Value::as_str) == Some("test")
                && op.get("value").is_some_and(Value::is_null);
            if is_null_test {
                return match op.get("path").and_then(Value::as_str) {
                    Some(p) if p.is_empty() || p.starts_with('/') => Ok(JsonPatchOp::TestNull {
                        index,
                        path: p.to_string(),
                    }),
                    other => Err(ApiError::bad_request(format!(
                        "invalid JSON patch operation at index {index}: path {other:?} is not a JSON pointer"
                    ))),
                };
            }
            let op = serde_json::from_value(op).map_err(|e| {
                ApiError::bad_request(format!(
                    "invalid JSON patch operation at index {index}: {e}"
                ))
            })?;
            Ok(JsonPatchOp::Op { index, op })
        })
        .collect()
}

fn apply_json_patch(doc: &mut Value, ops: &[JsonPatchOp]) -> Result<(), ApiError> {
    let mut work = doc.clone();
    for op in ops {
        match op {
            JsonPatchOp::TestNull { index, path } => {
                let found = work.pointer(path).cloned().unwrap_or(Value::Null);
                if !found.is_null() {
                    return Err(ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the JSON patch test operation at index {index} failed: the value at {path:?} is {found}, not null"
                        ),
                    ));
                }
            }
            JsonPatchOp::Op { index, op } => {
                json_patch::patch(&mut work, std::slice::from_ref(op)).map_err(|e| {
                    let what = match e.kind {
                        json_patch::PatchErrorKind::TestFailed => "test operation failed",
                        _ => "operation could not be applied",
                    };
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the JSON patch {what} at index {index} (path {}): {}",
                            e.path, e.kind
                        ),
                    )
                })?;
            }
        }
    }
    *doc = work;
    Ok(())
}
