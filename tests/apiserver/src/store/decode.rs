//! Request bodies into [`Object`]s, as Kubernetes' decoder reads them: the type comes from the
//! endpoint, metadata is read through `nephrite-krm`'s [`ObjectMeta`](nephrite_krm::ObjectMeta)
//! (a label that is a number, `finalizers` that is a string: 400), and unknown fields are
//! dropped — metadata fields Kubernetes does not define, and, for a custom resource with a
//! schema, every field the schema does not declare ([`schema::prune`]). What happens to them
//! is the request's `fieldValidation`.

use nephrite_krm::{Object, ObjectError};
use serde_json::Value;

use super::meta::{DROPPED, GRACE_PERIOD, into_object, normalize};
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::schema;

/// The request's `fieldValidation`: what to do with unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in a `Warning` header each (the server's default).
    #[default]
    Warn,
    /// Refuse the request with 400 naming them (what kubectl asks for).
    Strict,
}

impl FieldValidation {
    /// Reads the query parameter (absent: [`FieldValidation::Warn`], as Kubernetes defaults).
    pub fn parse(param: Option<&str>) -> Result<Self, ApiError> {
        match param.map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("warn") => Ok(Self::Warn),
            Some("ignore") => Ok(Self::Ignore),
            Some("strict") => Ok(Self::Strict),
            Some(_) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {:?}: supported values: \"Ignore\", \"Strict\", \"Warn\"",
                param.unwrap_or_default()
            ))),
        }
    }
}

/// Metadata fields Kubernetes' ObjectMeta defines that `nephrite-krm` keeps in `extra`.
const KNOWN_EXTRA_METADATA: [&str; 3] = [GRACE_PERIOD, DROPPED[0], DROPPED[1]];

/// Reads a body (already checked against the resource with `check_type`) as an object of `rt`:
/// its apiVersion and kind become the resource's, its metadata is decoded and normalised, and
/// unknown fields are dropped. Returns the `Warning`s to send (under
/// [`FieldValidation::Warn`]); under [`FieldValidation::Strict`] an unknown field is a 400.
pub(super) fn decode(
    rt: &ResourceType,
    body: Value,
    validation: FieldValidation,
) -> Result<(Object, Vec<String>), ApiError> {
    let Value::Object(mut map) = into_object(body)? else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    map.insert("apiVersion".into(), Value::String(rt.api_version()));
    map.insert("kind".into(), Value::String(rt.kind.clone()));
    let mut obj = Object::from_json_map(map).map_err(|e| match e {
        ObjectError::BadMetadata { .. } => cannot_handle(rt, &e.to_string()),
        other => ApiError::bad_request(other.to_string()),
    })?;
    let mut unknown: Vec<String> = obj
        .metadata
        .details()
        .extra
        .keys()
        .filter(|k| !KNOWN_EXTRA_METADATA.contains(&k.as_str()))
        .map(|k| format!("metadata.{k}"))
        .collect();
    if let Some(details) = obj.metadata.details_if_any_mut() {
        details
            .extra
            .retain(|k, _| KNOWN_EXTRA_METADATA.contains(&k.as_str()));
    }
    normalize(&mut obj.metadata);
    if let Some(schema) = &rt.schema {
        let mut fields = Value::Object(std::mem::take(&mut obj.body).into_map());
        unknown.extend(schema::prune(schema, &mut fields));
        if let Value::Object(fields) = fields {
            // The body came out of a Body, so it holds no reserved key.
            obj.body = fields.try_into().unwrap_or_default();
        }
    }
    let warnings = unknown
        .iter()
        .map(|field| format!("unknown field {field:?}"))
        .collect::<Vec<_>>();
    match validation {
        FieldValidation::Strict if !warnings.is_empty() => Err(cannot_handle(
            rt,
            &format!("strict decoding error: {}", warnings.join(", ")),
        )),
        FieldValidation::Warn => Ok((obj, warnings)),
        FieldValidation::Strict | FieldValidation::Ignore => Ok((obj, Vec::new())),
    }
}

/// 400 BadRequest, worded as Kubernetes' decoder words it.
fn cannot_handle(rt: &ResourceType, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version {:?} cannot be handled as a {}: {why}",
        rt.kind, rt.version, rt.kind
    ))
}
