//! Nephrite's gRPC wire contracts.
//!
//! Every `.proto` file under `proto/proto` is compiled at build time with
//! protox and tonic-prost-build (no system `protoc` needed). Each protobuf
//! package becomes a module path mirroring its name, so `nephrite.krm.v1`
//! is [`nephrite::krm::v1`] and `kuryr.l7.v1` would be `kuryr::l7::v1`; a new
//! `.proto` file needs no edit here. Messages are prost types; services come with a
//! tonic client (`*_client`) and server (`*_server`) module.
//!
//! [`FILE_DESCRIPTOR_SET`] holds the encoded descriptors of every file for
//! gRPC server reflection (`nephrite-runtime` registers it for you).
//!
//! The serving and dialing plumbing (health, reflection, shutdown, TLS,
//! Unix sockets) lives in `nephrite-runtime`; this crate is only the wire.

/// The encoded `google.protobuf.FileDescriptorSet` of every Nephrite `.proto`
/// file (with its imports), for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/nephrite_descriptor.bin"));

// The generated module tree: one module per protobuf package, nested by the package's
// dotted name (`nephrite.krm.v1` is `nephrite::krm::v1`, `kuryr.l7.v1` is `kuryr::l7::v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/_includes.rs"));
}

pub use generated::*;

pub use nephrite::daemon::v1 as daemon_v1;
pub use nephrite::krm::v1 as krm_v1;

/// The descriptor set decoded, for callers that want to inspect it.
///
/// # Errors
/// Fails only if the embedded bytes are corrupt, which a build would not
/// produce.
pub fn file_descriptor_set() -> Result<prost_types::FileDescriptorSet, prost::DecodeError> {
    prost::Message::decode(FILE_DESCRIPTOR_SET)
}

#[cfg(test)]
mod tests;
