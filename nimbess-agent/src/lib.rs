//! The Nimbess agent: a per-host CNI agent that keeps a port pipeline per
//! pod interface (built by `nephrite-pipeline` from each network's meta
//! pipeline) and renders it into a data plane.
//!
//! - [`cni`]: the CNI's vocabulary (commands, error codes, request, result), the client
//!   crate's (`nephrite-nimbess-client`), which the plugin shares;
//! - [`auth`]: the socket's role table (`cni`, `read`);
//! - [`agent`]: the CNI logic (validation, IPAM, render plans, rollback, persistence);
//! - [`grpc`]: the only protobuf in the crate besides the fabric's etcd client: the services
//!   `nimbess.cni.v1.Cni`, `nimbess.cni.v1.Agent` and `nimbess.cni.v1.Vifs` (their clients and
//!   the wire ⇄ domain conversions are the client crate's);
//! - [`daemon`], [`cli`]: `nimbess-agent serve` and the inspection subcommands;
//! - [`driver`]: the `kernel` (netlink) and `sim` data planes;
//! - [`northbound`]: Kubernetes Services and their endpoints (`--kube`, `--resources`) → load balancers;
//! - [`fabric`]: the multi-host fabric's shared state in etcd;
//! - [`vif`]: addresses reserved for a pod's VIFs (kuryr-l7's VIF handler), plugged by ADDs
//!   naming them;
//! - [`config`], [`state`], [`naming`]: the config file, the state file, kernel device names;
//! - [`teardown`]: the kernel data plane taken down on purpose (`nimbess-agent teardown`);
//! - [`explain`]: `nimbess-agent explain`, why a connection is allowed or not, and whether
//!   the kernel agrees (`--live`).
//!
//! The CNI plugin, `nimbess-cni`, is its own crate (`nephrite-nimbess-cni`, beside this one),
//! linked against the client crate only.

pub mod agent;
pub mod auth;
pub mod cli;
pub use nimbess_client::cni;
pub mod config;
pub mod daemon;
pub mod driver;
pub mod explain;
pub mod fabric;
pub mod grpc;
pub mod naming;
pub mod northbound;
pub mod state;
pub mod teardown;
pub mod vif;
