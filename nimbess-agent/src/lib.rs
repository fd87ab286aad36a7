//! The Nimbess agent: a per-host CNI agent that keeps a port pipeline per
//! pod interface (built by `nephrite-pipeline` from each network's meta
//! pipeline) and renders it into a data plane.
//!
//! - [`agent`]: the CNI logic (validation, IPAM, render plans, rollback, persistence);
//! - [`service`]: the gRPC services `nimbess.cni.v1.Cni` and `nimbess.cni.v1.Agent`;
//! - [`driver`]: the `kernel` (netlink) and `sim` data planes;
//! - [`fabric`]: the multi-host fabric's shared state in etcd;
//! - [`plugin`]: the `nimbess-cni` binary's logic (CNI environment + stdin → gRPC);
//! - [`config`], [`state`], [`naming`]: the config file, the state file, kernel device names.

pub mod agent;
pub mod config;
pub mod driver;
pub mod fabric;
pub mod naming;
pub mod plugin;
pub mod service;
pub mod state;
