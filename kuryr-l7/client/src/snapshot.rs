//! The domain values the rules API carries: a [`Snapshot`] (one translation of the controller's
//! objects, compiled into the table a router serves, with what could not be read) and a
//! [`RouterAck`] (what a router said it serves). They live here, beside their wire form, so
//! the controller that serves them and every caller (routers, the `rules` CLI) share one
//! definition and none of them needs protobuf to name them.

use std::sync::Arc;

use nephrite_l7::{Options, RouteTable, SourceObject, Translation, translate};

/// One translation of a source, compiled, with what went wrong while reading it.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The translation (model, rejections, conflicts, warnings).
    pub translation: Translation,
    /// The compiled table the router serves.
    pub table: Arc<RouteTable>,
    /// Files or documents that could not be read (`file: line N: reason`).
    pub read_errors: Vec<String>,
}

impl Snapshot {
    /// Translates and compiles `objects`.
    pub fn build(objects: &[SourceObject], read_errors: Vec<String>, options: &Options) -> Self {
        Self::compile(translate(objects, options), read_errors)
    }

    /// Compiles `translation`.
    pub fn compile(translation: Translation, read_errors: Vec<String>) -> Self {
        let table = Arc::new(RouteTable::compile(&translation.config));
        Snapshot {
            translation,
            table,
            read_errors,
        }
    }

    /// Logs every rejection, conflict, warning and read error.
    pub fn log(&self) {
        for error in &self.read_errors {
            tracing::warn!("{error}");
        }
        for r in &self.translation.rejections {
            tracing::warn!(object = %r.object, file = %r.origin, "rejected: {}", r.reason);
        }
        for c in &self.translation.conflicts {
            tracing::warn!(loser = %c.loser, file = %c.origin, "conflict on {} {}: {} wins", c.host, c.path, c.winner);
        }
        for w in &self.translation.warnings {
            tracing::warn!(object = %w.object, file = %w.origin, "{}", w.message);
        }
    }
}

/// What a router last said it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterAck {
    /// The router's name (unique among routers).
    pub router: String,
    /// The version it serves.
    pub version: String,
    /// Where it serves traffic (informational).
    pub address: String,
    /// When it acknowledged, RFC 3339.
    pub acknowledged_at: String,
}
