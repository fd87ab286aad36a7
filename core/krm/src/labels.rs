//! Well-known label keys.

/// Label that the NFTopology controller puts on every package it fans out, set to the name of
/// the `NFTopology` object; it travels PackageVariantSet → PackageVariant → PackageRevision
/// (through `spec.template.labels`) so the controller can find the revisions it created.
pub const NF_DEPLOYMENT_NAME: &str = "nf-deployment-name";
