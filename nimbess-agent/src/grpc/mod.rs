//! The agent's side of its socket: the gRPC services it serves (`nimbess.cni.v1.Cni` and
//! `nimbess.cni.v1.Agent`, [`AgentService`]; `nimbess.cni.v1.Vifs`, [`VifService`]). The
//! clients that dial them and the wire ⇄ domain conversions both ends share are the client
//! crate's (`nephrite-nimbess-client`); the rest of the agent passes domain values, so a
//! change of the wire format touches these modules and that crate only.

mod server;
mod vif;

pub use server::{AgentService, add_services};
pub use vif::VifService;
