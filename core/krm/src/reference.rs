//! References to objects: [`ObjectRef`] (which object) and [`OwnerReference`] (who owns it).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::gvk::Gvk;

/// Names one object: its GVK, namespace (absent for cluster-scoped objects and for package
/// resources without one), name and, when known, uid.
///
/// Its serde shape is Kubernetes' object reference: `{apiVersion, kind, namespace?, name, uid?}`,
/// which is also how a TKO `Placement` lists the resources to merge.
///
/// ```
/// use nephrite_krm::{Gvk, ObjectRef};
///
/// let r = ObjectRef::new(Gvk::new("apps", "v1", "Deployment"), "web").with_namespace("prod");
/// assert_eq!(r.to_string(), "apps/v1 Deployment prod/web");
/// let json = serde_json::to_string(&r)?;
/// assert_eq!(json, r#"{"apiVersion":"apps/v1","kind":"Deployment","namespace":"prod","name":"web"}"#);
/// assert_eq!(serde_json::from_str::<ObjectRef>(&json)?, r);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// The object's type.
    pub gvk: Gvk,
    /// The object's namespace, if it has one.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The object's uid, when known.
    pub uid: Option<String>,
}

impl ObjectRef {
    /// A reference without namespace or uid.
    pub fn new(gvk: Gvk, name: impl Into<String>) -> Self {
        ObjectRef {
            gvk,
            namespace: None,
            name: name.into(),
            uid: None,
        }
    }

    /// The same reference in `namespace`.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The same reference with a uid.
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }
}

impl fmt::Display for ObjectRef {
    /// `apps/v1 Deployment prod/web`, or `v1 Namespace prod` without a namespace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.gvk.api_version(), self.gvk.kind)?;
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        f.write_str(&self.name)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRefWire {
    api_version: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uid: Option<String>,
}

impl Serialize for ObjectRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ObjectRefWire {
            api_version: self.gvk.api_version(),
            kind: self.gvk.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ObjectRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ObjectRefWire::deserialize(deserializer)?;
        let gvk = Gvk::from_api_version_kind(&wire.api_version, &wire.kind)
            .map_err(serde::de::Error::custom)?;
        Ok(ObjectRef {
            gvk,
            namespace: wire.namespace,
            name: wire.name,
            uid: wire.uid,
        })
    }
}

/// An entry of `metadata.ownerReferences`: the owner's apiVersion, kind, name and uid, whether it
/// is the managing controller, and whether it blocks deletion. Unknown fields are kept in
/// [`OwnerReference::extra`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's apiVersion.
    pub api_version: String,
    /// The owner's kind.
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The owner's uid (Kubernetes requires it; an empty uid is left out when written).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether the owner cannot be deleted before this object (foreground deletion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
    /// Fields not listed above, in their original order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl OwnerReference {
    /// The owner's GVK (read leniently from its apiVersion).
    pub fn gvk(&self) -> Gvk {
        Gvk::from_api_version_kind_lenient(&self.api_version, &self.kind)
    }

    /// Whether this entry marks the managing controller.
    pub fn is_controller(&self) -> bool {
        self.controller == Some(true)
    }

    /// Whether this entry points at the object `reference` names (uid compared when both have one).
    pub fn refers_to(&self, reference: &ObjectRef) -> bool {
        self.gvk() == reference.gvk
            && self.name == reference.name
            && match &reference.uid {
                Some(uid) if !self.uid.is_empty() => *uid == self.uid,
                _ => true,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ref_display_and_serde() {
        let r = ObjectRef::new(Gvk::new("", "v1", "Namespace"), "prod");
        assert_eq!(r.to_string(), "v1 Namespace prod");
        let json =
            serde_json::json!({"apiVersion": "example.org/v1", "kind": "Tuning", "name": "t"});
        let r: ObjectRef = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(r.gvk, Gvk::new("example.org", "v1", "Tuning"));
        assert_eq!(serde_json::to_value(&r).unwrap(), json);
        let bad = serde_json::json!({"apiVersion": "a/b/c", "kind": "K", "name": "n"});
        let err = serde_json::from_value::<ObjectRef>(bad).unwrap_err();
        assert!(err.to_string().contains("a/b/c"), "{err}");
    }

    #[test]
    fn owner_reference_keeps_unknown_fields() {
        let json = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-1",
            "controller": true, "future": {"x": 1}
        });
        let owner: OwnerReference = serde_json::from_value(json.clone()).unwrap();
        assert!(owner.is_controller());
        assert_eq!(owner.extra["future"], serde_json::json!({"x": 1}));
        assert_eq!(serde_json::to_string(&owner).unwrap(), json.to_string());
        let target = ObjectRef::new(Gvk::new("apps", "v1", "ReplicaSet"), "rs");
        assert!(owner.refers_to(&target));
        assert!(owner.refers_to(&target.clone().with_uid("u-1")));
        assert!(!owner.refers_to(&target.with_uid("u-2")));
    }
}
