//! kuryr-l7's rules API (`kuryr.l7.v1.Rules`) as its callers use it, owned by the daemon that
//! serves it.
//!
//! Every controller serves the rules service; routers follow it and the `kuryr-l7 rules` CLI
//! reads it. Both go through this crate, which speaks domain values — the [`Snapshot`] of a
//! translation with its compiled `RouteTable`, [`RouterAck`]s, deltas applied and checked
//! against their content-hash version — and typed errors, and keeps protobuf to itself. It
//! links the gRPC client and the runtime's dialer only: no Kubernetes client, no HTTP server,
//! no data plane.
//!
//! - [`Snapshot`], [`RouterAck`]: what the API carries, shared with the controller;
//! - [`Subscription`]: a router following the controllers, failing over between them,
//!   acknowledging each version it serves and keeping the last one in a cache file;
//! - [`fetch`]: one reader's look at a controller's rules and routers;
//! - [`wire`]: the protobuf ⇄ domain conversions, the version hash and deltas, shared with the
//!   controller's rules service.

mod fetch;
mod snapshot;
mod subscription;
pub mod wire;

pub use fetch::{FetchError, Fetched, fetch};
pub use snapshot::{RouterAck, Snapshot};
pub use subscription::{Followed, HEARTBEAT, Subscription, WATCH_SILENCE, load_cache};
