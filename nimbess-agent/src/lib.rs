//! The Nimbess agent: a per-host CNI agent that keeps a port pipeline per
//! pod interface (built by `nephrite-pipeline` from each network's meta
//! pipeline) and renders it into a data plane.
//!
//! - [`cni`]: the CNI's vocabulary (commands, error codes, request, result);
//! - [`auth`]: the socket's role table (`cni`, `read`);
//! - [`agent`]: the CNI logic (validation, IPAM, render plans, rollback, persistence);
//! - [`grpc`]: the only protobuf in the crate: the services `nimbess.cni.v1.Cni`,
//!   `nimbess.cni.v1.Agent` and `nimbess.cni.v1.Vifs`, their clients, the wire ⇄ domain
//!   conversions;
//! - [`daemon`], [`cli`]: `nimbess-agent serve` and the inspection subcommands;
//! - [`driver`]: the `kernel` (netlink) and `sim` data planes;
//! - [`northbound`]: Kubernetes Services and their endpoints (`--kube`, `--resources`) → load balancers;
//! - [`fabric`]: the multi-host fabric's shared state in etcd;
//! - [`plugin`]: the `nimbess-cni` binary's logic (CNI environment + stdin → the agent);
//! - [`vif`]: addresses reserved for a pod's VIFs (kuryr-l7's VIF handler), plugged by ADDs
//!   naming them; [`vif_plug`]: the plugin's side (the pod's record → the interfaces to plug);
//! - [`config`], [`state`], [`naming`]: the config file, the state file, kernel device names.

pub mod agent;
pub mod auth;
pub mod cli;
pub mod cni;
pub mod config;
pub mod daemon;
pub mod driver;
pub mod fabric;
pub mod grpc;
pub mod naming;
pub mod northbound;
pub mod plugin;
pub mod state;
pub mod vif;
pub mod vif_plug;
