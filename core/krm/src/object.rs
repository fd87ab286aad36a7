//! The dynamic KRM [`Object`] and its [`ObjectMeta`].

use std::any::type_name;
use std::sync::LazyLock;

use indexmap::IndexMap;
use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

mod body;
mod meta;

pub use body::{Body, RESERVED_KEYS, ReservedKey};
pub use meta::{MetaDetails, ObjectMeta};

use crate::condition::{self, Condition};

use crate::gvk::Gvk;
use crate::label::LabelLookup;
use crate::reference::{ObjectRef, OwnerReference};

/// A KRM object of any kind: `apiVersion`, `kind`, [`metadata`](ObjectMeta) and the rest of the
/// body (`spec`, `status`, `data`, …) kept as an ordered JSON map.
///
/// Nothing is dropped: unknown metadata fields go to [`MetaDetails::extra`], body fields keep
/// their order, and timestamps stay the strings they were. When written, `apiVersion`, `kind`
/// and `metadata` come first (metadata is left out when it is empty), then the body in order.
///
/// ```
/// use nephrite_krm::{Gvk, Object};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// #[serde(rename_all = "camelCase")]
/// struct Site { api_version: String, kind: String, metadata: serde_json::Value, spec: SiteSpec }
/// #[derive(Serialize, Deserialize)]
/// #[serde(rename_all = "camelCase")]
/// struct SiteSpec { site_id: String }
///
/// let mut site = Object::new(&Gvk::new("topology.nephio.org", "v1alpha1", "Site"), "hq")
///     .with_label("region", "eu");
/// site.spec_mut()?.insert("siteId".into(), "dc/hq-1".into());
/// assert_eq!(site.label("region"), Some("eu"));
///
/// let typed: Site = site.to_typed()?;
/// assert_eq!(typed.spec.site_id, "dc/hq-1");
/// assert_eq!(Object::from_typed(&typed)?, site);
/// # Ok::<(), nephrite_krm::ObjectError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Object {
    /// `apiVersion`, as given.
    pub api_version: String,
    /// `kind`, as given.
    pub kind: String,
    /// `metadata`.
    pub metadata: ObjectMeta,
    /// Every other top-level field, in order. The type refuses `apiVersion`, `kind` and
    /// `metadata`: the fields above are the only place they live.
    pub body: Body,
}

/// Why a value is not an [`Object`], or why an object's contents could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The value is not a mapping.
    #[error("expected a mapping with apiVersion and kind, found {found}")]
    NotAMapping {
        /// What was found instead (`a list`, `a string`, …).
        found: &'static str,
    },
    /// There is no `apiVersion` field.
    #[error("missing apiVersion{}", kind.as_ref().map(|k| format!(" (kind {k:?})")).unwrap_or_default())]
    MissingApiVersion {
        /// The kind, if there is one.
        kind: Option<String>,
    },
    /// There is no `kind` field.
    #[error("missing kind (apiVersion {api_version:?})")]
    MissingKind {
        /// The apiVersion.
        api_version: String,
    },
    /// `apiVersion` is not a non-empty string.
    #[error("apiVersion must be a non-empty string, found {found}")]
    BadApiVersion {
        /// The value found, as JSON.
        found: String,
    },
    /// `kind` is not a non-empty string.
    #[error("kind must be a non-empty string, found {found}")]
    BadKind {
        /// The value found, as JSON.
        found: String,
    },
    /// `metadata` does not have the shape of Kubernetes' ObjectMeta.
    #[error("bad metadata{} in {api_version} {kind}: {source}", field.as_ref().map(|f| format!(".{f}")).unwrap_or_default())]
    BadMetadata {
        /// The metadata field at fault (`labels`, `name`, …) when it could be told.
        field: Option<String>,
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// What serde found wrong.
        source: serde_json::Error,
    },
    /// `status` (or `spec`) exists but is not a mapping.
    #[error("{field} of {object} is not a mapping")]
    FieldNotAMapping {
        /// The object.
        object: Box<ObjectRef>,
        /// `spec` or `status`.
        field: &'static str,
    },
    /// `status.conditions` is not a list of conditions.
    #[error("bad status.conditions in {object}: {source}")]
    BadConditions {
        /// The object.
        object: Box<ObjectRef>,
        /// What serde found wrong.
        source: serde_json::Error,
    },
    /// The object could not be converted to a typed value.
    #[error("cannot convert {object} to {type_name}: {source}")]
    ToTyped {
        /// The object.
        object: Box<ObjectRef>,
        /// The target Rust type.
        type_name: &'static str,
        /// What serde found wrong.
        source: serde_json::Error,
    },
    /// A typed value could not be serialized.
    #[error("cannot serialize {type_name}: {source}")]
    FromTyped {
        /// The source Rust type.
        type_name: &'static str,
        /// What serde found wrong.
        source: serde_json::Error,
    },
}

pub(crate) fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The first metadata field that does not deserialize on its own (error path only), down to the
/// entry at fault in `labels` / `annotations` (`labels.app`, `annotations["example.com/x"]`) and
/// the item in `finalizers` / `ownerReferences` (`ownerReferences[1]`).
fn faulty_metadata_field(metadata: &Value) -> Option<String> {
    let Value::Object(fields) = metadata else {
        return None;
    };
    let (key, value) = fields.iter().find(|(key, value)| {
        let alone = Value::Object(Map::from_iter([((*key).clone(), (*value).clone())]));
        ObjectMeta::deserialize(&alone).is_err()
    })?;
    let inner = match (key.as_str(), value) {
        ("labels" | "annotations", Value::Object(entries)) => entries
            .iter()
            .find(|(_, value)| !value.is_string())
            .map(|(entry, _)| {
                if !entry.is_empty()
                    && entry
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
                {
                    format!(".{entry}")
                } else {
                    format!("[{entry:?}]")
                }
            }),
        ("finalizers", Value::Array(items)) => items
            .iter()
            .position(|item| !item.is_string())
            .map(|at| format!("[{at}]")),
        ("ownerReferences", Value::Array(items)) => items
            .iter()
            .position(|item| OwnerReference::deserialize(item).is_err())
            .map(|at| format!("[{at}]")),
        _ => None,
    };
    Some(format!("{key}{}", inner.unwrap_or_default()))
}

static NO_STRINGS: LazyLock<IndexMap<String, String>> = LazyLock::new(IndexMap::new);

fn take_string(
    map: &mut Map<String, Value>,
    key: &str,
    bad: impl Fn(String) -> ObjectError,
) -> Result<Option<String>, ObjectError> {
    match map.shift_remove(key) {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(other) => Err(bad(other.to_string())),
    }
}

impl Object {
    /// A new object of type `gvk` named `name`, with empty body.
    pub fn new(gvk: &Gvk, name: impl Into<String>) -> Self {
        Object {
            api_version: gvk.api_version(),
            kind: gvk.kind.clone(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            body: Body::default(),
        }
    }

    /// Reads an object from a JSON value (a mapping with `apiVersion` and `kind`).
    pub fn from_json(value: Value) -> Result<Self, ObjectError> {
        match value {
            Value::Object(map) => Object::from_json_map(map),
            other => Err(ObjectError::NotAMapping {
                found: describe(&other),
            }),
        }
    }

    /// Reads an object from a JSON mapping, keeping every other field in order.
    pub fn from_json_map(mut map: Map<String, Value>) -> Result<Self, ObjectError> {
        let api_version = take_string(&mut map, "apiVersion", |found| {
            ObjectError::BadApiVersion { found }
        })?;
        let kind = take_string(&mut map, "kind", |found| ObjectError::BadKind { found })?;
        let (api_version, kind) = match (api_version, kind) {
            (Some(api_version), Some(kind)) => (api_version, kind),
            (None, kind) => return Err(ObjectError::MissingApiVersion { kind }),
            (Some(api_version), None) => return Err(ObjectError::MissingKind { api_version }),
        };
        let metadata = match map.shift_remove("metadata") {
            None | Some(Value::Null) => ObjectMeta::default(),
            Some(value) => match ObjectMeta::deserialize(&value) {
                Ok(metadata) => metadata,
                Err(source) => {
                    return Err(ObjectError::BadMetadata {
                        field: faulty_metadata_field(&value),
                        api_version,
                        kind,
                        source,
                    });
                }
            },
        };
        Ok(Object {
            api_version,
            kind,
            metadata,
            // The three reserved keys were taken out above.
            body: Body::without_reserved_keys(map),
        })
    }

    /// The object as one JSON value, fields in writing order.
    pub fn to_json(&self) -> Value {
        let mut map = Map::with_capacity(self.body.len() + 3);
        map.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        map.insert("kind".into(), Value::String(self.kind.clone()));
        if !self.metadata.is_empty() {
            // Serializing ObjectMeta to a JSON value cannot fail: every field is a string,
            // integer, bool, list or string-keyed map.
            let metadata = serde_json::to_value(&self.metadata).unwrap_or_default();
            map.insert("metadata".into(), metadata);
        }
        for (key, value) in &self.body {
            map.insert(key.clone(), value.clone());
        }
        Value::Object(map)
    }

    /// Converts to any deserializable type (a typed resource), through JSON.
    pub fn to_typed<T: DeserializeOwned>(&self) -> Result<T, ObjectError> {
        serde_json::from_value(self.to_json()).map_err(|source| ObjectError::ToTyped {
            object: Box::new(self.object_ref()),
            type_name: type_name::<T>(),
            source,
        })
    }

    /// Converts from any serializable type that serializes to a mapping with apiVersion and kind.
    pub fn from_typed<T: Serialize>(value: &T) -> Result<Self, ObjectError> {
        let value = serde_json::to_value(value).map_err(|source| ObjectError::FromTyped {
            type_name: type_name::<T>(),
            source,
        })?;
        Object::from_json(value)
    }

    /// Writes the object as one YAML document (no `---`).
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        crate::yaml::write_object(&mut out, self);
        out
    }

    /// The object's GVK, read leniently from `apiVersion` (everything before the last `/` is
    /// the group) so that it never fails.
    pub fn gvk(&self) -> Gvk {
        Gvk::from_api_version_kind_lenient(&self.api_version, &self.kind)
    }

    /// A reference to this object (GVK, namespace, name, uid).
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            gvk: self.gvk(),
            namespace: self.metadata.namespace.clone(),
            name: self.name().unwrap_or_default().to_owned(),
            uid: self.metadata.details().uid.clone(),
        }
    }

    /// An owner reference pointing at this object, for the objects it owns.
    pub fn owner_reference(&self, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name().unwrap_or_default().to_owned(),
            uid: self.metadata.details().uid.clone().unwrap_or_default(),
            controller: controller.then_some(true),
            block_owner_deletion: controller.then_some(true),
            extra: Map::new(),
        }
    }

    /// The owner reference marked as controller, if any.
    pub fn controller_owner(&self) -> Option<&OwnerReference> {
        self.metadata
            .details()
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.is_controller())
    }

    /// `metadata.name`, or `None` when the object has none (yet: a `generateName` object
    /// before the server named it, or a document that forgot it).
    pub fn name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    /// Sets `metadata.name`.
    pub fn set_name(&mut self, name: impl Into<String>) {
        self.metadata.name = Some(name.into());
    }

    /// `metadata.namespace`, if set.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    /// Sets or clears `metadata.namespace`.
    pub fn set_namespace(&mut self, namespace: Option<String>) {
        self.metadata.namespace = namespace;
    }

    /// The same object in `namespace`.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.metadata.namespace = Some(namespace.into());
        self
    }

    /// The labels (empty when there are none).
    pub fn labels(&self) -> &IndexMap<String, String> {
        self.metadata.labels.as_ref().unwrap_or(&NO_STRINGS)
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// Sets label `key`, returning the previous value. The key keeps its position if present.
    pub fn set_label(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Option<String> {
        self.metadata
            .labels
            .get_or_insert_with(IndexMap::new)
            .insert(key.into(), value.into())
    }

    /// Removes label `key`, returning its value; the other labels keep their order.
    pub fn remove_label(&mut self, key: &str) -> Option<String> {
        self.metadata.labels.as_mut()?.shift_remove(key)
    }

    /// The same object with label `key` set.
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_label(key, value);
        self
    }

    /// The annotations (empty when there are none).
    pub fn annotations(&self) -> &IndexMap<String, String> {
        self.metadata.annotations.as_ref().unwrap_or(&NO_STRINGS)
    }

    /// The value of annotation `key` (see [`crate::keys`] for the well-known keys).
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// Sets annotation `key`, returning the previous value. The key keeps its position if present.
    pub fn set_annotation(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Option<String> {
        self.metadata
            .annotations
            .get_or_insert_with(IndexMap::new)
            .insert(key.into(), value.into())
    }

    /// Removes annotation `key`, returning its value; the others keep their order.
    pub fn remove_annotation(&mut self, key: &str) -> Option<String> {
        self.metadata.annotations.as_mut()?.shift_remove(key)
    }

    /// The same object with annotation `key` set.
    pub fn with_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_annotation(key, value);
        self
    }

    /// Whether `metadata.finalizers` contains `finalizer`.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.metadata
            .details()
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == finalizer)
    }

    /// Adds `finalizer` unless present; returns whether it was added.
    pub fn add_finalizer(&mut self, finalizer: impl Into<String>) -> bool {
        let finalizer = finalizer.into();
        if self.has_finalizer(&finalizer) {
            return false;
        }
        self.metadata
            .details_mut()
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(finalizer);
        true
    }

    /// Removes `finalizer`; returns whether it was present.
    pub fn remove_finalizer(&mut self, finalizer: &str) -> bool {
        let Some(finalizers) = self
            .metadata
            .details_if_any_mut()
            .and_then(|details| details.finalizers.as_mut())
        else {
            return false;
        };
        let before = finalizers.len();
        finalizers.retain(|f| f != finalizer);
        before != finalizers.len()
    }

    /// Whether the object is being deleted (`metadata.deletionTimestamp` is set).
    pub fn is_being_deleted(&self) -> bool {
        self.metadata.details().deletion_timestamp.is_some()
    }

    /// `spec`, if present.
    pub fn spec(&self) -> Option<&Value> {
        self.body.get("spec")
    }

    /// `spec` as a mapping to edit, created empty when absent; an error if it is not a mapping.
    pub fn spec_mut(&mut self) -> Result<&mut Map<String, Value>, ObjectError> {
        self.field_mapping_mut("spec")
    }

    /// `status`, if present.
    pub fn status(&self) -> Option<&Value> {
        self.body.get("status")
    }

    /// `status` as a mapping to edit, created empty when absent; an error if it is not a mapping.
    pub fn status_mut(&mut self) -> Result<&mut Map<String, Value>, ObjectError> {
        self.field_mapping_mut("status")
    }

    fn field_mapping_mut(
        &mut self,
        field: &'static str,
    ) -> Result<&mut Map<String, Value>, ObjectError> {
        let object = Box::new(self.object_ref());
        match self
            .body
            .entry_mapping(field)
            .map_err(|_| ObjectError::FieldNotAMapping {
                object: object.clone(),
                field,
            })? {
            Value::Object(map) => Ok(map),
            _ => Err(ObjectError::FieldNotAMapping { object, field }),
        }
    }

    /// `status.conditions` (empty when absent).
    pub fn conditions(&self) -> Result<Vec<Condition>, ObjectError> {
        let conditions = match self.status() {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(status)) => match status.get("conditions") {
                None | Some(Value::Null) => return Ok(Vec::new()),
                Some(conditions) => conditions,
            },
            Some(_) => {
                return Err(ObjectError::FieldNotAMapping {
                    object: Box::new(self.object_ref()),
                    field: "status",
                });
            }
        };
        Vec::<Condition>::deserialize(conditions).map_err(|source| ObjectError::BadConditions {
            object: Box::new(self.object_ref()),
            source,
        })
    }

    /// The condition of type `type_` in `status.conditions`.
    pub fn condition(&self, type_: &str) -> Result<Option<Condition>, ObjectError> {
        Ok(self.conditions()?.into_iter().find(|c| c.type_ == type_))
    }

    /// Whether `status.conditions` has `type_` with status `True` (false when unreadable).
    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.conditions()
            .is_ok_and(|conditions| condition::is_condition_true(&conditions, type_))
    }

    /// Replaces `status.conditions` (creating `status` when absent).
    pub fn set_conditions(&mut self, conditions: &[Condition]) -> Result<(), ObjectError> {
        let object = Box::new(self.object_ref());
        let value = serde_json::to_value(conditions)
            .map_err(|source| ObjectError::BadConditions { object, source })?;
        self.status_mut()?.insert("conditions".into(), value);
        Ok(())
    }

    /// [`condition::set_condition`] on `status.conditions`: keeps `lastTransitionTime` when the
    /// status is unchanged, sets it to `now` when it changes. Returns whether anything changed.
    pub fn set_condition(&mut self, condition: Condition, now: &str) -> Result<bool, ObjectError> {
        let mut conditions = self.conditions()?;
        let changed = condition::set_condition(&mut conditions, condition, now);
        if changed {
            self.set_conditions(&conditions)?;
        }
        Ok(changed)
    }
}

impl LabelLookup for Object {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.label(key)
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let with_metadata = !self.metadata.is_empty();
        let mut map =
            serializer.serialize_map(Some(2 + usize::from(with_metadata) + self.body.len()))?;
        map.serialize_entry("apiVersion", &self.api_version)?;
        map.serialize_entry("kind", &self.kind)?;
        if with_metadata {
            map.serialize_entry("metadata", &self.metadata)?;
        }
        for (key, value) in &self.body {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Object::from_json(value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
