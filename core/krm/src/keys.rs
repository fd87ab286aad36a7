//! Well-known keys: the `nephio.org/*` annotations the preparation loop and the merge engine
//! read and write (TKO's behaviour), and the labels the controllers put on what they create.
//!
//! Values are plain strings, so each key's accepted values are listed beside it.

// ---- annotations ----

/// Whether this resource is prepared in this package: [`PREPARE_HERE`] (the default when the
/// annotation is absent), [`PREPARE_POSTPONE`] (prepare later, in the child deployments it is
/// merged into) or [`PREPARE_NEVER`].
pub const PREPARE: &str = "nephio.org/prepare";

/// Set to [`TRUE`] on a resource once it has been prepared. On the package's `Deployment`
/// resource (`deployment.nephio.org/v1alpha1`) it marks the whole package prepared. Removing it,
/// or setting it to [`FALSE`], forces re-preparation.
pub const PREPARED: &str = "nephio.org/prepared";

/// Whether a prepared deployment is approved automatically: [`APPROVE_DEFAULT`] (follow the
/// daemon's auto-approve setting), [`APPROVE_AUTO`] or [`APPROVE_MANUAL`].
pub const APPROVE: &str = "nephio.org/approve";

/// Set to [`TRUE`] on the package's `Deployment` resource when the deployment is approved.
pub const APPROVED: &str = "nephio.org/approved";

/// How a merged resource combines with an existing resource of the same GVK + name:
/// [`MERGE_REPLACE`] (the default) or [`MERGE_OVERRIDE`] (deep merge).
pub const MERGE: &str = "nephio.org/merge";

/// A name: the merged resource takes this name before it is matched against the template's
/// resources (lets several merges of the same kind target different resources).
pub const RENAME: &str = "nephio.org/rename";

/// Whether a `metadata.nephio.org` resource contributes metadata here: [`PREPARE_HERE`],
/// [`PREPARE_POSTPONE`] or [`PREPARE_NEVER`] (same values and merge rewrite as [`PREPARE`]).
pub const METADATA: &str = "nephio.org/metadata";

/// Value of [`PREPARE`] / [`METADATA`]: act in this package (the default when absent).
pub const PREPARE_HERE: &str = "Here";
/// Value of [`PREPARE`] / [`METADATA`]: do not act here, act in the child deployments this
/// resource is merged into (merging rewrites it to [`PREPARE_HERE`]).
pub const PREPARE_POSTPONE: &str = "Postpone";
/// Value of [`PREPARE`] / [`METADATA`]: never act on this resource.
pub const PREPARE_NEVER: &str = "Never";

/// Value of [`APPROVE`]: follow the daemon's auto-approve setting.
pub const APPROVE_DEFAULT: &str = "Default";
/// Value of [`APPROVE`]: approve as soon as the deployment is prepared.
pub const APPROVE_AUTO: &str = "Auto";
/// Value of [`APPROVE`]: wait for an explicit approval.
pub const APPROVE_MANUAL: &str = "Manual";

/// Value of [`MERGE`]: the merged resource replaces the existing one entirely (the default).
pub const MERGE_REPLACE: &str = "Replace";
/// Value of [`MERGE`]: deep merge — maps merge recursively, lists and scalars replace.
pub const MERGE_OVERRIDE: &str = "Override";

/// The string `"true"` used by [`PREPARED`] and [`APPROVED`].
pub const TRUE: &str = "true";
/// The string `"false"` (for [`PREPARED`]: forces re-preparation).
pub const FALSE: &str = "false";

/// Every annotation key defined here, for tools that list or strip them.
pub const ALL: &[&str] = &[
    PREPARE, PREPARED, APPROVE, APPROVED, MERGE, RENAME, METADATA,
];

// ---- labels ----

/// Label that the NFTopology controller puts on every package it fans out, set to the name of
/// the `NFTopology` object; it travels PackageVariantSet → PackageVariant → PackageRevision
/// (through `spec.template.labels`) so the controller can find the revisions it created.
pub const NF_DEPLOYMENT_NAME: &str = "nf-deployment-name";
