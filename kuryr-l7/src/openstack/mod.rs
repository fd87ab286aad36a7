//! OpenStack for the `octavia` (`neutron_l7_policy`) driver: REST clients of Octavia v2 and
//! Neutron v2.0, Keystone v3 authentication, and `kuryr.conf`.
//!
//! The driver's L7 router *is* an Octavia load balancer reachable through a Neutron floating
//! IP. These modules are the edge where OpenStack's wire types live; the controller hands them
//! domain decisions and gets typed objects and typed errors back.
//!
//! - [`auth`]: credentials (`password`, `v3applicationcredential`, `noauth`), tokens, catalog.
//! - [`Session`]: one HTTP client with the current token, re-issued on 401 or expiry.
//! - [`octavia::Octavia`]: load balancers, listeners, pools, members, L7 policies and rules,
//!   each change waited out to `ACTIVE`.
//! - [`neutron::Neutron`]: networks, subnets, ports, floating IPs, routers.
//! - [`barbican::Barbican`]: the certificate containers of `TERMINATED_HTTPS` listeners.
//! - [`config`]: `kuryr.conf` read into a typed [`config::KuryrConf`]; [`settings`]: the file
//!   and the controller's flags merged (a flag wins) into [`settings::OpenStackSettings`].
//! - [`observe`]: the Router LB's L7 tree read into `nephrite_l7::octavia::Tree`;
//!   [`executor`]: a plan's calls run one at a time, failures isolated; [`driver`]: the sync
//!   loop (snapshots, backoff, Warning Events, state annotations).
//! - [`router_lb`]: the Router LB (VIP port, load balancer, listener, floating IP) found or
//!   created; [`startup`]: the driver's start with the Node annotation; [`state`]: the
//!   versioned annotations.
//! - [`ApiError`]: what failed (method, URL, status, the server's message) and whether a
//!   retry can help.

pub mod auth;
pub mod barbican;
pub mod config;
pub mod driver;
mod error;
pub mod executor;
pub mod graph;
pub mod neutron;
pub mod observe;
pub mod octavia;
pub mod router_lb;
mod session;
pub mod settings;
pub mod startup;
pub mod state;

pub use error::{ApiError, ExternalGatewayNotFound};
pub use session::{Answer, Endpoint, Session};
