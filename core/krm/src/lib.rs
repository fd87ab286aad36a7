//! The Kubernetes Resource Model for Nephrite: pure data types and functions, no IO.
//!
//! - [`Object`]: a dynamic KRM object (apiVersion, kind, [`ObjectMeta`], body) that keeps
//!   everything it was given, in order, and converts to and from any serde type.
//! - [`Gvk`], [`ObjectRef`], [`OwnerReference`]: naming objects and their owners.
//! - [`LabelSelector`]: `matchLabels` + `matchExpressions`, matching, and the string form
//!   `a=b,c!=d,e in (f,g),!h`; label key/value validation in [`label`].
//! - [`Condition`] and the helpers in [`condition`] (`set_condition` takes `now` as an argument).
//! - [`Package`]: an ordered list of objects with multi-document YAML in and out and lookup by
//!   GVK + name.
//! - [`keys`]: the well-known `nephio.org/*` annotation keys and label keys.
//! - With the `dynamic-object` feature, `TryFrom` conversions to and from kube's `DynamicObject`
//!   (see the `dynamic` module source for what crosses).
//!
//! ```
//! use nephrite_krm::{Gvk, LabelSelector, Object, Package};
//!
//! let yaml = "\
//! apiVersion: v1
//! kind: ConfigMap
//! metadata:
//!   name: settings
//!   labels: {tier: edge}
//! data:
//!   mode: 'yes'
//! ";
//! let mut package = Package::from_yaml(yaml)?;
//! let gvk = Gvk::new("", "v1", "ConfigMap");
//! let selector: LabelSelector = "tier in (edge,core)".parse()?;
//!
//! let config = package.get_mut(&gvk, "settings").expect("present");
//! assert!(selector.matches(config));
//! config.set_annotation(nephrite_krm::keys::PREPARED, "true");
//! assert!(package.to_yaml().contains("nephio.org/prepared: 'true'"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod condition;
#[cfg(feature = "dynamic-object")]
mod dynamic;
mod gvk;
pub mod keys;
pub mod label;
mod object;
mod package;
mod reference;
pub mod selector;
mod yaml;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use condition::{Condition, ConditionStatus};
pub use gvk::{Gvk, GvkError};
pub use label::{LabelError, LabelLookup};
pub use object::{Body, MetaDetails, Object, ObjectError, ObjectMeta, RESERVED_KEYS, ReservedKey};
pub use package::{DocumentError, Package, PackageError};
pub use reference::{ObjectRef, OwnerReference};
pub use selector::{
    LabelSelector, LabelSelectorRequirement, SelectorError, SelectorOperator, SelectorParseError,
};
pub use yaml::limits::{DEFAULT_MAX_DEPTH, DEFAULT_MAX_DOCUMENT_BYTES, LimitError, YamlLimits};
