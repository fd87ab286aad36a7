//! The Octavia-shaped L7 model, Kubernetes Ingress / OpenShift Route translation and the
//! compiled route table. Pure: no IO, no clock, no async runtime.
//!
//! - [`model`]: [`Listener`], [`Policy`] (action, position), [`Rule`] (type, compare type, key,
//!   value, invert), [`Pool`], [`Member`], with Octavia's validation and position semantics.
//! - [`eval`]: the request as rules see it and the reference evaluation (position order, first
//!   match, rules ANDed, an empty policy never matches).
//! - [`translate()`]: Ingress (`networking.k8s.io/v1`) and Route (`route.openshift.io/v1`),
//!   Services, EndpointSlices, Secrets and IngressClasses → [`L7Config`], with rejections,
//!   conflicts and warnings.
//! - [`RouteTable`]: the configuration compiled for lookups that do not scan every rule.
//! - [`haproxy`]: the configuration rendered for HAProxy 2.6 (Octavia's amphora template with
//!   the OpenShift router's TLS front), and the certificate files it refers to.
//! - [`octavia`]: the ordered Octavia v2 calls that turn a load balancer's observed L7 tree
//!   into the desired one, touching only what the controller owns.
//! - [`status`]: what a controller writes back to Kubernetes (Ingress and Route status, Warning
//!   Events) for a translation.
//! - [`gateway`]: Gateway API v1 (GatewayClass, Gateway, HTTPRoute, ReferenceGrant): attachment,
//!   a compiled driver-neutral form with the spec's precedence, its reference evaluation, the
//!   spec's status, and what each driver can express of it.
//!
//! ```
//! use nephrite_krm::Package;
//! use nephrite_l7::{Options, Outcome, RouteTable, SourceObject, translate, eval};
//!
//! let package = Package::from_yaml("\
//! apiVersion: networking.k8s.io/v1
//! kind: Ingress
//! metadata: {name: web, namespace: shop}
//! spec:
//!   rules:
//!   - host: shop.example.com
//!     http:
//!       paths:
//!       - {path: /cart, pathType: Prefix, backend: {service: {name: cart, port: {number: 80}}}}
//! ")?;
//! let objects: Vec<SourceObject> = package
//!     .into_objects()
//!     .into_iter()
//!     .map(|object| SourceObject { object, origin: "shop.yaml".into() })
//!     .collect();
//! let translation = translate(&objects, &Options::default());
//! let table = RouteTable::compile(&translation.config);
//! let headers: Vec<(String, String)> = Vec::new();
//! let request = |path| eval::Request {
//!     host: "shop.example.com", path, target: path, headers: &headers, client_cert: None,
//! };
//! assert_eq!(table.http.lookup(&request("/cart/42")), Outcome::Pool("shop/cart:80"));
//! assert_eq!(table.http.lookup(&request("/cartoon")), Outcome::Status(404));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod backends;
pub mod eval;
pub mod gateway;
pub mod haproxy;
pub mod model;
pub mod objects;
pub mod octavia;
pub mod status;
pub mod table;
pub mod translate;

pub use eval::{
    ClientCert, Headers, Outcome, Request, WithMethod, normalize_host, normalize_path, query_param,
};
pub use model::{
    Action, Certificate, CompareType, Filters, HeaderChanges, L7Config, Listener, Member, Mirror,
    ModelError, PathChange, Policy, Pool, PoolProtocol, Rule, RuleType,
};
pub use table::{CompiledListener, RouteTable};
pub use translate::{Conflict, Options, Rejection, SourceObject, Translation, Warning, translate};
