//! `ntc`, the NFTopology controller: the daemon and CLI around `nephrite-topology`.
//!
//! - [`input`]: reading `ntc plan`'s files (topology, classes, clusters).
//! - [`output`]: printing a plan as YAML, JSON or a table.
//! - [`crds`]: the CRDs `ntc crds` prints.
//! - [`porch`]: the Porch backend, a kube-runtime controller.
//! - [`tko`]: the TKO backend, a preparer plugin and tracker on the Data API.

pub mod crds;
pub mod input;
pub mod output;
pub mod porch;
pub mod tko;
