//! Gateway API v1 (`gateway.networking.k8s.io`): GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant read from objects, attached, compiled into a driver-neutral form, evaluated,
//! and turned into the status the spec defines. Pure: objects and settings in, a [`Model`] out;
//! the daemon watches the kinds and runs the drivers.
//!
//! Why a form of its own rather than the Octavia-shaped [`L7Config`](crate::L7Config) Ingress
//! uses: the Gateway API asks for more than Octavia's L7 model can say (weights across
//! Services, header and query matches, methods, header rewriting, URL rewrites, mirrors), and
//! its precedence is by specificity rather than by position. The compiled form keeps all of it;
//! [`capabilities`] says, per driver, which rules a driver can serve as written and what it
//! would drop, so that no driver silently serves a rule differently.
//!
//! - [`api`]: typed views of the kinds, with the API's defaults; bad input is a
//!   [`GatewayError`] naming the object and field.
//! - [`hostname`]: exact and wildcard hostnames, matching and listener ∩ route intersection.
//! - [`refs`]: backendRefs and certificateRefs resolved, ReferenceGrants checked.
//! - [`rules`]: one HTTPRoute rule checked and compiled.
//! - [`mod@build`]: listeners validated, routes attached (parentRefs × listeners: sectionName,
//!   port, allowedRoutes, hostnames), everything compiled: [`build()`].
//! - [`outcome`]: what was decided about each object, for status.
//! - [`compiled`]: the compiled form and the precedence order.
//! - [`evaluate`]: the reference evaluation `route(request, pick) -> Decision`.
//! - [`status`]: GatewayClass, Gateway and HTTPRoute status from a [`Model`].
//! - [`capabilities`]: what each driver can express, and which rules it serves fully or partly.
//! - [`lower`]: the compiled Gateways written into the Octavia-shaped model every driver takes,
//!   what cannot be said reported per rule and field.
//! - [`conformance`]: the conformance case format (objects, requests, expectations) every
//!   driver runs.
//!
//! ```
//! use nephrite_krm::Package;
//! use nephrite_l7::gateway::{Decision, HttpRequest, ObjectKey, Settings, build};
//!
//! let objects = Package::from_yaml("\
//! apiVersion: gateway.networking.k8s.io/v1
//! kind: GatewayClass
//! metadata: {name: kuryr}
//! spec: {controllerName: kuryr.nephrite.io/l7}
//! ---
//! apiVersion: gateway.networking.k8s.io/v1
//! kind: Gateway
//! metadata: {name: web, namespace: shop}
//! spec:
//!   gatewayClassName: kuryr
//!   listeners: [{name: http, port: 80, protocol: HTTP}]
//! ---
//! apiVersion: gateway.networking.k8s.io/v1
//! kind: HTTPRoute
//! metadata: {name: cart, namespace: shop}
//! spec:
//!   parentRefs: [{name: web}]
//!   hostnames: [shop.example.com]
//!   rules:
//!   - matches: [{path: {type: PathPrefix, value: /cart}}]
//!     filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]
//! ")?
//! .into_objects();
//! let model = build(&objects, &Settings::default());
//! let gateway = model.compiled_gateway(&ObjectKey::new("shop", "web")).expect("ours");
//! let request = |target: &str| HttpRequest {
//!     port: 80, method: "GET".into(), host: "shop.example.com".into(),
//!     target: target.into(), headers: Vec::new(),
//! };
//! let Decision::Redirect { status, location, .. } = gateway.route(&request("/cart/1"), 0) else {
//!     panic!("a redirect");
//! };
//! assert_eq!((status, location.as_str()), (302, "https://shop.example.com/cart/1"));
//! assert_eq!(gateway.route(&request("/cartoon"), 0).status(), 404);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use serde::Serialize;

pub mod api;
pub mod build;
pub mod capabilities;
pub mod compiled;
pub mod conformance;
pub mod evaluate;
pub mod hostname;
mod listeners;
pub mod lower;
pub mod outcome;
pub mod refs;
pub mod rules;
pub mod status;
#[cfg(test)]
mod tests;

pub use build::{Settings, build};
pub use compiled::{CompiledGateway, CompiledListener};
pub use evaluate::{Decision, Forward, HttpRequest};
pub use outcome::{
    ClassOutcome, GatewayOutcome, ListenerOutcome, Model, ParentOutcome, RouteOutcome, Verdict,
};

/// A namespaced object's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ObjectKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A Gateway API object that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// A field is missing or of the wrong shape.
    #[error("{object}: {field}: {message}")]
    Invalid {
        /// `HTTPRoute shop/web`.
        object: String,
        /// The field's path, e.g. `spec.rules[2]`.
        field: String,
        /// What is wrong.
        message: String,
    },
}
