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
//! - [`config`]: `kuryr.conf` read into a typed [`config::KuryrConf`].
//! - [`ApiError`]: what failed (method, URL, status, the server's message) and whether a
//!   retry can help.

pub mod auth;
pub mod config;
mod error;
pub mod neutron;
pub mod octavia;
mod session;

pub use error::{ApiError, ExternalGatewayNotFound};
pub use session::{Answer, Endpoint, Session};
