//! Throwaway PostgreSQL, etcd, MariaDB and RabbitMQ, the real OpenStack Octavia and Neutron APIs
//! ([`OpenStack`]), and lookups of HAProxy, wrk, iperf3, nft, nginx and the CNI plugins, for
//! tests; and, for benchmarks, what the machine was doing ([`machine`]) and the
//! median of repeated runs ([`stats`]).
//!
//! Every domain's tests need the same few real services; this crate starts them once, the same
//! way, and says clearly when one cannot be had:
//!
//! ```no_run
//! use nephrite_test_services::{Etcd, Postgres, Tool, Unavailable, require_root, tool};
//!
//! fn my_test() -> Result<(), Unavailable> {
//!     let pg = match Postgres::start() {
//!         Ok(pg) => pg,
//!         Err(e) => {
//!             e.skip("my_test");
//!             return Ok(());
//!         }
//!     };
//!     let _url = pg.url(); // postgres://postgres@127.0.0.1:PORT/postgres
//!     let etcd = Etcd::start()?; // http://127.0.0.1:PORT
//!     let _endpoint = etcd.endpoint();
//!     let _haproxy = tool(Tool::Haproxy)?;
//!     require_root("needs CAP_NET_ADMIN for netns")?;
//!     Ok(())
//! } // etcd and PostgreSQL stop here, their directories are removed
//! ```
//!
//! Servers are child processes of the test, each with its own ports and temporary directory,
//! so tests run in parallel. They stop on drop, when start-up fails half way, and (through a
//! watchdog) when the test process is killed.

pub mod cni;
mod etcd;
mod http;
pub mod kube_apiserver;
pub mod machine;
mod mariadb;
mod netns;
mod openstack;
mod port;
mod postgres;
mod privilege;
pub mod process;
mod rabbitmq;
#[cfg(feature = "kube-client")]
pub mod rbac;
mod server_process;
pub mod stats;
mod tool;
mod unavailable;

pub use etcd::Etcd;
pub use kube_apiserver::{KubeApiServer, KubeEndpoint};
pub use mariadb::MariaDb;
pub use openstack::{Keystone, OpenStack, install_venvs, new_project_id};
pub use port::{free_loopback_port, free_port_on};
pub use postgres::{Postgres, SqlError};
pub use privilege::{require_root, running_as_root};
pub use rabbitmq::RabbitMq;
pub use tool::{DEBIAN_PACKAGES, Tool, program, tool};
pub use unavailable::Unavailable;
