//! What both dashboards (`preparer dashboard`, the terminal UI, and the web page of
//! `preparer serve --web`) share: a [`Board`] of templates, sites, plugins and deployments kept
//! live by the Data API's `Watch` ([`feed`]), the deployment [`DeploymentFilter`] and the
//! [`ListWindow`] that shows a few rows of a list of any length, and the [`Request`]s a person
//! makes from either ([`perform`]).
//!
//! The board holds no terminal or HTTP type: it changes only through [`Update`]s, so its logic
//! is tested without a screen, and the same board serves both front ends.

pub mod feed;
mod filter;
mod model;
mod request;
mod window;

pub use feed::{Connector, Feed, FeedConfig};
pub use filter::{DeploymentFilter, FilterError, Tristate};
pub use model::{Board, CatalogEntry, CatalogKind, Connection, DeploymentRow, Update};
pub use request::{Outcome, Request, perform};
pub use window::ListWindow;
