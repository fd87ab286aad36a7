//! The agent's only contact with protobuf: the gRPC services it serves
//! (`nimbess.cni.v1.Cni` and `nimbess.cni.v1.Agent`, [`AgentService`];
//! `nimbess.cni.v1.Vifs`, [`VifService`], whose client [`VifClient`] kuryr-l7 uses), the
//! clients that dial them (the plugin's [`AgentConnection`], the
//! inspection subcommands' [`InspectClient`]), and the conversions between
//! the wire types and the [`crate::cni`] domain types ([`convert`]). The
//! rest of the crate passes domain values, so a change of the wire format
//! touches these modules only.

mod client;
pub mod convert;
mod server;
mod vif;

pub use client::{AgentConnection, InspectClient, InspectError, Pipelines};
pub use server::{AgentService, add_services};
pub use vif::{VifCallError, VifClient, VifService};
