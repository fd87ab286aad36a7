//! An object's [`ObjectMeta`]: the fields every package uses inline, the rarely used ones
//! boxed in [`MetaDetails`], and the flat form both are read from and written as.

use std::sync::LazyLock;

use indexmap::IndexMap;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::label::LabelLookup;
use crate::reference::OwnerReference;

/// An object's `metadata`: the fields every package uses inline, the rest in
/// [`MetaDetails`] behind one box that a plain package never allocates, so that an object stays
/// small (how many bytes a merge touches is what its cost at scale follows). Fields it does not
/// list (`managedFields`, `selfLink`, …) are kept in [`MetaDetails::extra`] in their order;
/// timestamps are kept as the strings given.
#[derive(Debug, Clone, Default)]
pub struct ObjectMeta {
    /// `name`.
    pub name: Option<String>,
    /// `namespace`.
    pub namespace: Option<String>,
    /// `labels`, in order.
    pub labels: Option<IndexMap<String, String>>,
    /// `annotations`, in order.
    pub annotations: Option<IndexMap<String, String>>,
    /// The fields packages rarely carry, boxed only when one is set: read them through
    /// [`ObjectMeta::details`], change them through [`ObjectMeta::details_mut`]. `None` and an
    /// empty box are equal.
    pub details: Option<Box<MetaDetails>>,
}

/// The metadata fields packages rarely carry: those the server sets, owner references,
/// finalizers and fields [`ObjectMeta`] does not list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaDetails {
    /// `generateName`: a prefix the server completes into a name.
    pub generate_name: Option<String>,
    /// `uid`.
    pub uid: Option<String>,
    /// `resourceVersion`: opaque, compared for equality only.
    pub resource_version: Option<String>,
    /// `generation`: bumped by the server when the spec changes.
    pub generation: Option<i64>,
    /// `creationTimestamp`, as given.
    pub creation_timestamp: Option<String>,
    /// `deletionTimestamp`, as given; present while the object is being deleted.
    pub deletion_timestamp: Option<String>,
    /// `ownerReferences`.
    pub owner_references: Option<Vec<OwnerReference>>,
    /// `finalizers`.
    pub finalizers: Option<Vec<String>>,
    /// Every other metadata field, in order.
    pub extra: Map<String, Value>,
}

static NO_DETAILS: LazyLock<MetaDetails> = LazyLock::new(MetaDetails::default);

impl MetaDetails {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        *self == MetaDetails::default()
    }
}

impl ObjectMeta {
    /// Metadata with only `name` set.
    pub fn named(name: impl Into<String>) -> Self {
        ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        }
    }

    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self.name.is_none()
            && self.namespace.is_none()
            && self.labels.is_none()
            && self.annotations.is_none()
            && self.details().is_empty()
    }

    /// The fields packages rarely carry (all unset when there are none).
    pub fn details(&self) -> &MetaDetails {
        self.details.as_deref().unwrap_or(&NO_DETAILS)
    }

    /// The fields packages rarely carry, when the object has any of them boxed.
    pub fn details_if_any(&self) -> Option<&MetaDetails> {
        self.details.as_deref()
    }

    /// The fields packages rarely carry, to change, when the object has any of them boxed.
    pub fn details_if_any_mut(&mut self) -> Option<&mut MetaDetails> {
        self.details.as_deref_mut()
    }

    /// The fields packages rarely carry, to change (boxed on first use).
    pub fn details_mut(&mut self) -> &mut MetaDetails {
        self.details.get_or_insert_default()
    }
}

impl PartialEq for ObjectMeta {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.namespace == other.namespace
            && self.labels == other.labels
            && self.annotations == other.annotations
            && self.details() == other.details()
    }
}

impl Eq for ObjectMeta {}

/// Writes `metadata` flat, in the order Kubernetes writes it; unset fields are left out.
impl Serialize for ObjectMeta {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        fn set<M: SerializeMap, T: Serialize>(
            map: &mut M,
            key: &str,
            value: &Option<T>,
        ) -> Result<(), M::Error> {
            value
                .as_ref()
                .map_or(Ok(()), |value| map.serialize_entry(key, value))
        }
        let details = self.details();
        let mut map = serializer.serialize_map(None)?;
        set(&mut map, "name", &self.name)?;
        set(&mut map, "generateName", &details.generate_name)?;
        set(&mut map, "namespace", &self.namespace)?;
        set(&mut map, "uid", &details.uid)?;
        set(&mut map, "resourceVersion", &details.resource_version)?;
        set(&mut map, "generation", &details.generation)?;
        set(&mut map, "creationTimestamp", &details.creation_timestamp)?;
        set(&mut map, "deletionTimestamp", &details.deletion_timestamp)?;
        set(&mut map, "labels", &self.labels)?;
        set(&mut map, "annotations", &self.annotations)?;
        set(&mut map, "ownerReferences", &details.owner_references)?;
        set(&mut map, "finalizers", &details.finalizers)?;
        for (key, value) in &details.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// `metadata` as read: every field flat. Named `ObjectMeta`, as serde's messages name the type
/// they expected.
mod wire {
    use super::{Deserialize, IndexMap, Map, OwnerReference, Value};

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct ObjectMeta {
        #[serde(default)]
        pub(super) name: Option<String>,
        #[serde(default)]
        pub(super) generate_name: Option<String>,
        #[serde(default)]
        pub(super) namespace: Option<String>,
        #[serde(default)]
        pub(super) uid: Option<String>,
        #[serde(default)]
        pub(super) resource_version: Option<String>,
        #[serde(default)]
        pub(super) generation: Option<i64>,
        #[serde(default)]
        pub(super) creation_timestamp: Option<String>,
        #[serde(default)]
        pub(super) deletion_timestamp: Option<String>,
        #[serde(default)]
        pub(super) labels: Option<IndexMap<String, String>>,
        #[serde(default)]
        pub(super) annotations: Option<IndexMap<String, String>>,
        #[serde(default)]
        pub(super) owner_references: Option<Vec<OwnerReference>>,
        #[serde(default)]
        pub(super) finalizers: Option<Vec<String>>,
        #[serde(flatten)]
        pub(super) extra: Map<String, Value>,
    }
}

impl<'de> Deserialize<'de> for ObjectMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = wire::ObjectMeta::deserialize(deserializer)?;
        let details = MetaDetails {
            generate_name: wire.generate_name,
            uid: wire.uid,
            resource_version: wire.resource_version,
            generation: wire.generation,
            creation_timestamp: wire.creation_timestamp,
            deletion_timestamp: wire.deletion_timestamp,
            owner_references: wire.owner_references,
            finalizers: wire.finalizers,
            extra: wire.extra,
        };
        Ok(ObjectMeta {
            name: wire.name,
            namespace: wire.namespace,
            labels: wire.labels,
            annotations: wire.annotations,
            details: (!details.is_empty()).then(|| Box::new(details)),
        })
    }
}

impl LabelLookup for ObjectMeta {
    fn label_value(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }
}
