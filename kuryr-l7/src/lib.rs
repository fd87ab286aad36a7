//! kuryr-l7: the L7 controller and router for Kubernetes Ingress and OpenShift Route, on the
//! pure model of `nephrite-l7`.
//!
//! Inside the daemon, rules travel as domain values ([`source::Snapshot`]: the translation,
//! its compiled table, read errors). Only the rules service speaks protobuf (`kuryr.l7.v1`):
//! its callers — routers following the controllers, the `rules` CLI — go through the API's
//! client crate, `nephrite-kuryr-l7-client`, which owns the wire conversions both ends share.
//!
//! - [`source`]: the directory source (`dir:PATH`) and its watcher, producing snapshots.
//! - [`kubernetes`]: the Kubernetes source (watches, leader election, status and Events).
//! - [`publisher`]: the controller's current snapshot, handed to drivers and the rules service.
//! - [`controller`]: `kuryr-l7 controller`: source → publisher → rules service and driver.
//! - [`haproxy`]: the `haproxy` driver (render, `haproxy -c`, hitless reload).
//! - [`router`]: the embedded data plane (hyper reverse proxy, TLS, balancing, ejection) and
//!   `kuryr-l7 router`.
//! - [`rules`]: `kuryr-l7 rules`, the rendering of a snapshot.
//! - [`rules_service`]: the rules service every controller serves; [`rules_auth`]: its roles.
//! - [`machine`]: the host name and PEM files the daemons read.
//! - [`vif`]: `kuryr-l7 vif-handler`, Kuryr's VIF handler on `nephrite-vif`'s multi-VIF drivers.

pub mod controller;
pub mod haproxy;
pub mod kubernetes;
pub mod machine;
pub mod openstack;
pub mod publisher;
pub mod router;
pub mod rules;
pub mod rules_auth;
pub mod rules_service;
pub mod source;
pub mod vif;
