//! The NFTopology controller's pure core: what a network-function topology intent means and
//! what to do about it, with no IO.
//!
//! - [`api`]: `NFTopology`, `NFClass`, `NFDeployedTopology` (and `Capacity`), reading both the
//!   seed's and the Nephio API's field names, writing the API's.
//! - [`graph`]: NF instances and network instances on petgraph; neighbours share a network.
//! - [`policy`]: "type X waits for every connected instance of type Y" rules, cycles refused.
//! - [`plan`]: topology + classes + clusters → one variant per (instance × matching cluster),
//!   with deployed ids, labels and gates.
//! - [`deployed`]: the deployed topology, updated one published/removed package at a time.
//! - [`porch`]: the PackageVariantSets and Capacities the Porch backend writes, and the gate
//!   decisions taken from observed PackageRevisions.
//! - [`replan`]: what a changed intent or changed sites call for — children to create, update,
//!   delete or orphan, keyed by (topology, instance, site) — the gates of new children and
//!   the per-(instance, site) rollout view `ntc status` prints.
//! - [`status`]: the NFTopology status and the `ntc plan` report.
//! - [`tko`]: the TKO backend's decisions (sites as clusters, child deployments, approvals).
//!
//! ```
//! use nephrite_topology::api::{Cluster, NFClass, NFTopology};
//! use nephrite_topology::{plan, RolloutPolicy};
//!
//! let topology: NFTopology = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "core"},
//!     "spec": {"nfInstances": [
//!         {"name": "upf", "clusterSelector": {"matchLabels": {"role": "edge"}},
//!          "nfTemplate": {"nfType": "upf", "className": "upf-class",
//!                         "nfInterfaces": [{"name": "n4", "networkInstanceName": "n4-net"}]}},
//!         {"name": "smf", "clusterSelector": {"matchLabels": {"role": "core"}},
//!          "nfTemplate": {"nfType": "smf", "classRef": {"name": "smf-class"},
//!                         "nfAttachments": [{"name": "n4", "networkInstanceRef": {"name": "n4-net"}}]}}
//!     ]}
//! }))?;
//! let class = |name: &str| -> NFClass { serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": name},
//!     "spec": {"packageRef": {"repository": "catalog", "packageName": name}}
//! })).unwrap() };
//! let clusters = [
//!     Cluster::new("edge-1", [("role", "edge")]),
//!     Cluster::new("regional", [("role", "core")]),
//! ];
//! let plan = plan::plan(&topology, &[class("upf-class"), class("smf-class")], &clusters,
//!                       &RolloutPolicy::default())?;
//! let smf = plan.variant_by_id("smf-regional").unwrap();
//! let gates: Vec<_> = plan.gates(smf).into_iter().map(|g| g.condition_type).collect();
//! assert_eq!(gates, ["wait-for-UPF-upf-edge-1"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod api;
pub mod deployed;
mod error;
#[cfg(test)]
mod fixture;
pub mod graph;
pub mod plan;
pub mod policy;
pub mod porch;
pub mod replan;
pub mod status;
pub mod tko;

pub use deployed::{Change, DeployedTopologyBuilder};
pub use error::TopologyError;
pub use plan::{Plan, Variant};
pub use policy::{RolloutPolicy, WaitRule};
