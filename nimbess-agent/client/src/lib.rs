//! The Nimbess agent's API as its callers use it, owned by the agent that serves it.
//!
//! The agent listens on a Unix socket with three services (`nimbess.cni.v1.Cni`, `Agent`,
//! `Vifs`). Everything that calls them — the `nimbess-cni` plugin, kuryr-l7's VIF handler, the
//! agent's own inspection subcommands — goes through this crate, which speaks domain values
//! and typed errors and keeps protobuf to itself. It links no data plane: no netlink, no etcd,
//! no Kubernetes client.
//!
//! - [`cni`]: the CNI's vocabulary (commands, error codes, request, result), what the plugin
//!   and the agent's logic exchange;
//! - [`vif`]: VIFs reserved for a pod before its sandbox exists (claims, references, views);
//! - [`AgentConnection`]: the plugin's CNI calls;
//! - [`InspectClient`]: ports, networks, pipelines and `Verify`;
//! - [`VifClient`]: allocate, release, list and get VIFs;
//! - [`wire`]: the protobuf ⇄ domain conversions, shared with the agent's services.

pub mod cni;
mod connection;
mod inspect;
pub mod vif;
mod vifs;
pub mod wire;

pub use connection::AgentConnection;
pub use inspect::{InspectClient, InspectError, Pipelines};
pub use vifs::{VifCallError, VifClient};
