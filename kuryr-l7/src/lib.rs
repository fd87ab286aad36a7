//! kuryr-l7: the L7 controller and router for Kubernetes Ingress and OpenShift Route, on the
//! pure model of `nephrite-l7`.
//!
//! Inside the daemon, rules travel as domain values ([`source::Snapshot`]: the translation,
//! its compiled table, read errors). Only the edges speak protobuf (`kuryr.l7.v1`): [`wire`]
//! converts, and [`rules_service`], [`subscription`] and the `rules` CLI's fetch use it.
//!
//! - [`source`]: the directory source (`dir:PATH`) and its watcher, producing snapshots.
//! - [`kubernetes`]: the Kubernetes source (watches, leader election, status and Events).
//! - [`publisher`]: the controller's current snapshot, handed to drivers and the rules service.
//! - [`controller`]: `kuryr-l7 controller`: source → publisher → rules service and driver.
//! - [`haproxy`]: the `haproxy` driver (render, `haproxy -c`, hitless reload).
//! - [`router`]: the embedded data plane (hyper reverse proxy, TLS, balancing, ejection) and
//!   `kuryr-l7 router`.
//! - [`rules`]: `kuryr-l7 rules`, the rendering of a snapshot.
//! - [`wire`]: snapshots on the wire and their content-hash versions.
//! - [`rules_service`]: the rules service every controller serves; [`rules_auth`]: its roles.
//! - [`subscription`]: a router following the rules service, failing over between controllers.
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
pub mod subscription;
pub mod vif;
pub mod wire;
