//! kuryr-l7: the L7 router (and, next, the controller) for Kubernetes Ingress and OpenShift
//! Route, on the pure model of `nephrite-l7`.
//!
//! - [`source`]: the directory source (`dir:PATH`) and its watcher, producing [`source::Snapshot`]s.
//! - [`router`]: the embedded data plane (hyper reverse proxy, TLS, balancing, ejection).
//! - [`rules`]: the `rules` subcommand's rendering of a snapshot.

pub mod router;
pub mod rules;
pub mod source;
