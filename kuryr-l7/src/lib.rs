//! kuryr-l7: the L7 router (and, next, the controller) for Kubernetes Ingress and OpenShift
//! Route, on the pure model of `nephrite-l7`.
//!
//! - [`source`]: the directory source (`dir:PATH`) and its watcher, producing [`source::Snapshot`]s.
//! - [`router`]: the embedded data plane (hyper reverse proxy, TLS, balancing, ejection).
//! - [`rules`]: the `rules` subcommand's rendering of a snapshot.
//! - [`wire`]: snapshots on the wire (`kuryr.l7.v1`) and their content-hash versions.
//! - [`rules_service`]: the rules service every controller serves.
//! - [`subscription`]: a router following the rules service, failing over between controllers.
//! - [`kubernetes`]: the Kubernetes source (watches, leader election, status and Events).
//! - [`haproxy`]: the `haproxy` driver (render, `haproxy -c`, hitless reload).
//! - [`controller`]: `kuryr-l7 controller`: source → rules service (→ data plane driver).

pub mod controller;
pub mod haproxy;
pub mod kubernetes;
pub mod router;
pub mod rules;
pub mod rules_service;
pub mod source;
pub mod subscription;
pub mod wire;
