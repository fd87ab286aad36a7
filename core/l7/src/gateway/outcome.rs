//! What building the model decided about each object, kept for status: the verdict of every
//! condition the spec defines, per GatewayClass, Gateway, listener and HTTPRoute parent, and the
//! compiled Gateways.

use serde::Serialize;

use super::api::{ParentReference, RouteGroupKind};
use super::compiled::CompiledGateway;
use super::{GatewayError, ObjectKey};

/// The value of one condition: whether it holds, the spec's reason, and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Status `True` or `False`.
    pub holds: bool,
    /// The reason.
    pub reason: &'static str,
    /// Human-readable detail.
    pub message: String,
}

impl Verdict {
    /// A condition that holds.
    pub fn yes(reason: &'static str, message: impl Into<String>) -> Self {
        Verdict {
            holds: true,
            reason,
            message: message.into(),
        }
    }

    /// A condition that does not hold.
    pub fn no(reason: &'static str, message: impl Into<String>) -> Self {
        Verdict {
            holds: false,
            reason,
            message: message.into(),
        }
    }
}

/// A GatewayClass of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassOutcome {
    /// Its name.
    pub name: String,
    /// `Accepted`.
    pub accepted: Verdict,
}

/// One listener of a Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerOutcome {
    /// The listener's name.
    pub name: String,
    /// The route kinds it takes.
    pub supported_kinds: Vec<RouteGroupKind>,
    /// How many routes attached.
    pub attached_routes: u32,
    /// `Accepted`.
    pub accepted: Verdict,
    /// `ResolvedRefs`.
    pub resolved_refs: Verdict,
    /// `Conflicted`.
    pub conflicted: Verdict,
    /// `Programmed` (what the model allows; the driver's own state is the daemon's to add).
    pub programmed: Verdict,
}

/// A Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayOutcome {
    /// The Gateway.
    pub gateway: ObjectKey,
    /// `Accepted`.
    pub accepted: Verdict,
    /// Its listeners, in spec order.
    pub listeners: Vec<ListenerOutcome>,
}

/// One parentRef of an HTTPRoute that names a Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentOutcome {
    /// The parentRef as written.
    pub parent_ref: ParentReference,
    /// `Accepted`.
    pub accepted: Verdict,
    /// `ResolvedRefs`.
    pub resolved_refs: Verdict,
    /// `PartiallyInvalid`, when some rules were refused and others are served.
    pub partially_invalid: Option<Verdict>,
    /// `l7.kuryr.nephrite.io/Served` ([`SERVED_CONDITION`](super::lower::SERVED_CONDITION)):
    /// set, not holding, when the data plane serves some rule only partly or not at all
    /// (see [`lower`](super::lower)); `None` when every rule is served as written.
    pub served: Option<Verdict>,
}

/// An HTTPRoute with at least one parentRef to a Gateway of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOutcome {
    /// The route.
    pub route: ObjectKey,
    /// Its parents of ours, in parentRefs order.
    pub parents: Vec<ParentOutcome>,
}

/// Everything the objects amount to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Model {
    /// Our GatewayClasses.
    pub classes: Vec<ClassOutcome>,
    /// Our Gateways.
    pub gateways: Vec<GatewayOutcome>,
    /// HTTPRoutes attached (or refused) to our Gateways.
    pub routes: Vec<RouteOutcome>,
    /// The compiled Gateways (programmed listeners only), in the order of `gateways`.
    pub compiled: Vec<CompiledGateway>,
    /// Objects that could not be read.
    pub errors: Vec<GatewayError>,
}

impl Model {
    /// The compiled Gateway `key`.
    pub fn compiled_gateway(&self, key: &ObjectKey) -> Option<&CompiledGateway> {
        self.compiled.iter().find(|g| &g.gateway == key)
    }
}
