//! The TKO merge engine and preparation model — pure functions over
//! [`nephrite_krm::Package`], no IO, no clock (callers pass `now`).
//!
//! - [`merge`]: merging a merge package into a target package (identity GVK + name after
//!   `nephio.org/rename`; `Replace` by default, `Override` deep merge; absent → appended), with
//!   the "not ready" guard and the `prepare` / `metadata` annotation rewrite.
//! - [`preparation`]: the `nephio.org/prepare` modes, the rewrite table and which resources of a
//!   package are preparable.
//! - [`deployment`]: the package's `Deployment` resource (`deployment.nephio.org/v1alpha1`,
//!   name `deployment`): added when missing, marked prepared / approved, the `Prepared`
//!   condition.
//! - [`metadata`]: `<Kind>.<spec path>` metadata extracted from `metadata.nephio.org` resources.
//! - [`id`]: id validation and the `*` / `**` patterns used to select templates, sites and
//!   deployments by id or metadata.
//! - [`topology`]: the typed `topology.nephio.org/v1alpha1` resources the built-in preparers read
//!   (`Placement`, `Template`, `Site`, `Sites`) and the merge package a placement hands each child.
//!
//! ```
//! use nephrite_krm::Package;
//! use nephrite_merge::merge::merge_package;
//!
//! let mut template = Package::from_yaml("\
//! apiVersion: example.org/v1
//! kind: Tuning
//! metadata: {name: tuning}
//! spec: {workers: 2, mode: fast}
//! ")?;
//! let merge = Package::from_yaml("\
//! apiVersion: example.org/v1
//! kind: Tuning
//! metadata:
//!   name: controller-tuning
//!   annotations: {nephio.org/rename: tuning, nephio.org/merge: Override}
//! spec: {workers: 8}
//! ")?;
//! merge_package(&mut template, &merge, |_| false)?;
//! let tuning = &template.objects()[0];
//! assert_eq!(tuning.spec().unwrap()["workers"], 8);
//! assert_eq!(tuning.spec().unwrap()["mode"], "fast");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod deployment;
pub mod id;
pub mod merge;
pub mod metadata;
pub mod preparation;
pub mod topology;

pub use deployment::{Approval, DeploymentError, DeploymentResource};
pub use id::{IdError, IdPattern, validate_id};
pub use merge::{MergeError, MergeMode, MergeReport, merge_package};
pub use metadata::{Metadata, extract_metadata};
pub use preparation::{PrepareMode, is_preparable, preparable_resources, rewrite_mode};
