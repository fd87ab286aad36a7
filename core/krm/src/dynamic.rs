//! The bridge to kube's [`DynamicObject`] (feature `dynamic-object`), for controller authors
//! who read objects with `kube::Api<DynamicObject>` and decide with this crate, or the other
//! way round.
//!
//! Both directions go through the object's JSON form, so nothing is lost but the order of
//! fields, which `DynamicObject` does not keep: `data` becomes the [`Object`]'s body and
//! `metadata` its [`ObjectMeta`](crate::ObjectMeta) (fields kube knows and ours does not stay in
//! `extra`).
//!
//! ```
//! use kube_core::DynamicObject;
//! use nephrite_krm::Object;
//!
//! let dynamic: DynamicObject = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings", "namespace": "default"},
//!     "data": {"mtu": "9000"},
//! }))?;
//! let object = Object::try_from(dynamic)?;
//! assert_eq!(object.name(), Some("settings"));
//! assert_eq!(object.body["data"]["mtu"], "9000");
//!
//! let back = DynamicObject::try_from(object)?;
//! assert_eq!(back.metadata.namespace.as_deref(), Some("default"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use kube_core::discovery::ApiResource;
use kube_core::{DynamicObject, GroupVersionKind};

use crate::Gvk;
use crate::object::{Object, ObjectError};

impl Gvk {
    /// The dynamic API resource of this kind, served under `plural` (`nfclasses`), for
    /// `kube::Api<DynamicObject>`: the one way every Nephrite crate names a resource it has
    /// no Rust type for.
    ///
    /// ```
    /// use nephrite_krm::Gvk;
    ///
    /// let ingress = Gvk::new("networking.k8s.io", "v1", "Ingress").api_resource("ingresses");
    /// assert_eq!(ingress.api_version, "networking.k8s.io/v1");
    /// let pod = Gvk::new("", "v1", "Pod").api_resource("pods");
    /// assert_eq!((pod.group.as_str(), pod.api_version.as_str()), ("", "v1"));
    /// ```
    pub fn api_resource(&self, plural: &str) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, &self.version, &self.kind),
            plural,
        )
    }
}

impl TryFrom<DynamicObject> for Object {
    type Error = ObjectError;

    /// Fails when the dynamic object has no `apiVersion` or `kind` (`types` is `None`).
    fn try_from(dynamic: DynamicObject) -> Result<Self, ObjectError> {
        Object::from_typed(&dynamic)
    }
}

impl TryFrom<Object> for DynamicObject {
    type Error = ObjectError;

    /// Fails only when the metadata does not fit kube's `ObjectMeta` (a label value that is not
    /// a string cannot be in an [`Object`], so in practice this does not fail).
    fn try_from(object: Object) -> Result<Self, ObjectError> {
        object.to_typed()
    }
}
