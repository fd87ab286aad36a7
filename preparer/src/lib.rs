//! `preparer`: the TKO deployment store, the Data API (`nephrite.preparer.data.v1`) and the preparation
//! loop, in one daemon that is also its own CLI.
//!
//! - [`store`]: the [`store::Store`] trait and its SQLite / PostgreSQL backends.
//! - [`api`]: the Data API gRPC service over a store.
//! - [`auth`]: the Data API's roles (`read`, `write`, `plugin`, `admin`).
//! - [`preparation`]: the loop that prepares deployments (built-in topology preparers and
//!   remote plugins).
//! - [`daemon`]: `preparer serve` wiring.
//! - [`cli`]: the client subcommands.
//! - [`dashboard`]: what both dashboards share (the board kept live by `Watch`, the filter).
//! - [`tui`]: `preparer dashboard`, the terminal dashboard.
//! - [`web`]: the web dashboard of `preparer serve --web`.

pub mod api;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod creation;
pub mod daemon;
pub mod dashboard;
pub mod errors;
pub mod plugin_credentials;
pub mod plugins;
pub mod preparation;
pub mod store;
pub mod tui;
pub mod web;
