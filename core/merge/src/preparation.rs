//! The preparation model: the `nephio.org/prepare` (and `nephio.org/metadata`) modes, the
//! rewrite a merge applies to them, and which resources of a package are *preparable*.
//!
//! A resource is preparable when its prepare mode is `Here` (the default when the annotation is
//! absent), some preparer is registered for its GVK, and it is not already
//! `nephio.org/prepared: "true"`. `Postpone` and `Never` resources are skipped, and so is a
//! resource whose mode is a value TKO does not define (it is neither prepared nor rewritten,
//! so a typo never triggers a preparer).

use nephrite_krm::{Gvk, Object, Package, keys};

/// The value of `nephio.org/prepare` or `nephio.org/metadata` on one resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PrepareMode {
    /// Act in this package (the default when the annotation is absent).
    Here,
    /// Act later, in the child deployments this resource is merged into.
    Postpone,
    /// Never act on this resource.
    Never,
    /// A value TKO does not define, kept as given; treated like `Never`.
    Unknown(String),
}

impl PrepareMode {
    /// Reads an annotation value: absent or empty is `Here`.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            None | Some("") => PrepareMode::Here,
            Some(keys::PREPARE_HERE) => PrepareMode::Here,
            Some(keys::PREPARE_POSTPONE) => PrepareMode::Postpone,
            Some(keys::PREPARE_NEVER) => PrepareMode::Never,
            Some(other) => PrepareMode::Unknown(other.to_owned()),
        }
    }

    /// The resource's `nephio.org/prepare` mode.
    pub fn of(object: &Object) -> Self {
        PrepareMode::parse(object.annotation(keys::PREPARE))
    }

    /// The resource's `nephio.org/metadata` mode.
    pub fn metadata_of(object: &Object) -> Self {
        PrepareMode::parse(object.annotation(keys::METADATA))
    }

    /// The annotation spelling.
    pub fn as_str(&self) -> &str {
        match self {
            PrepareMode::Here => keys::PREPARE_HERE,
            PrepareMode::Postpone => keys::PREPARE_POSTPONE,
            PrepareMode::Never => keys::PREPARE_NEVER,
            PrepareMode::Unknown(value) => value,
        }
    }
}

/// The rewrite a merge applies to a `nephio.org/prepare` or `nephio.org/metadata` annotation
/// value of a merged resource:
///
/// | before | after |
/// |---|---|
/// | absent | absent |
/// | `Here` or empty | `Never` (it was acted on where it came from) |
/// | `Postpone` | `Here` (act in the package it was merged into) |
/// | `Never` | `Never` |
/// | anything else | unchanged |
pub fn rewrite_mode(value: Option<&str>) -> Option<String> {
    match value {
        None => None,
        Some("" | keys::PREPARE_HERE) => Some(keys::PREPARE_NEVER.to_owned()),
        Some(keys::PREPARE_POSTPONE) => Some(keys::PREPARE_HERE.to_owned()),
        Some(other) => Some(other.to_owned()),
    }
}

/// Applies [`rewrite_mode`] to both `nephio.org/prepare` and `nephio.org/metadata` of `object`.
pub fn rewrite_annotations(object: &mut Object) {
    for key in [keys::PREPARE, keys::METADATA] {
        if let Some(new) = rewrite_mode(object.annotation(key)) {
            object.set_annotation(key, new);
        }
    }
}

/// Whether `object` carries `nephio.org/prepared: "true"`.
pub fn is_prepared(object: &Object) -> bool {
    object.annotation(keys::PREPARED) == Some(keys::TRUE)
}

/// Whether `object` is preparable: mode `Here`, not prepared, and `has_preparer` says a preparer
/// exists for its GVK.
pub fn is_preparable(object: &Object, has_preparer: impl Fn(&Gvk) -> bool) -> bool {
    PrepareMode::of(object) == PrepareMode::Here
        && !is_prepared(object)
        && has_preparer(&object.gvk())
}

/// Indexes of the preparable resources of `package`, in package order.
pub fn preparable_resources(package: &Package, has_preparer: impl Fn(&Gvk) -> bool) -> Vec<usize> {
    package
        .iter()
        .enumerate()
        .filter(|(_, object)| is_preparable(object, &has_preparer))
        .map(|(index, _)| index)
        .collect()
}

#[cfg(test)]
mod tests;
