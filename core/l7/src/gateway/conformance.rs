//! Conformance cases as data, so the pure evaluator and every driver run the same files.
//!
//! A case is one multi-document YAML file: the objects (GatewayClass, Gateway, HTTPRoutes,
//! Services, EndpointSlices, Secrets, Namespaces, ReferenceGrants) and one document of kind
//! `ConformanceCase` (`conformance.l7.nephrite.io/v1`) saying which Gateway to send requests
//! to, the requests, what a client and the backend observe for each, and the status conditions
//! expected. Expectations are in observable terms ([`Observed`]: status code, which Service
//! answered, the `Location`, the host, target and headers the backend received, the response
//! headers), so a driver test can fill an [`Observed`] from a real exchange with an echo backend
//! and check it with the same [`Expect::check`] the evaluator's runner uses.
//!
//! A driver runner skips what its driver cannot express: [`support_for`] says, from the
//! driver's [`DriverCapabilities`], whether the rule deciding a request is served fully, partly
//! (check what is served, and expect the listed gaps) or not at all (skip the request, and
//! expect the route's status to say so).

use std::collections::BTreeMap;

use nephrite_krm::{Object, Package};
use serde::Deserialize;

use super::ObjectKey;
use super::capabilities::{DriverCapabilities, Served, explain};
use super::compiled::CompiledGateway;
use super::evaluate::{Decision, HttpRequest};
use crate::eval::normalize_host;

/// The apiVersion of the case document.
pub const CASE_API_VERSION: &str = "conformance.l7.nephrite.io/v1";
/// The kind of the case document.
pub const CASE_KIND: &str = "ConformanceCase";

/// A case file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// The YAML is not a package of objects.
    #[error("case file: {0}")]
    Yaml(#[from] nephrite_krm::PackageError),
    /// No document, or more than one, is a ConformanceCase.
    #[error("case file: expected exactly one {CASE_KIND} document, found {0}")]
    CaseCount(usize),
    /// The ConformanceCase's spec is malformed.
    #[error("{CASE_KIND} {name}: spec: {message}")]
    Spec {
        /// The case's name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// Core or extended, as upstream conformance groups features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum SupportLevel {
    /// Every implementation must pass.
    Core,
    /// Implementations that claim the feature must pass.
    Extended,
}

/// A case: objects, requests, expectations.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's name.
    pub name: String,
    /// Its spec.
    pub spec: CaseSpec,
    /// The objects to apply.
    pub objects: Vec<Object>,
}

/// `spec` of a ConformanceCase.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseSpec {
    /// Core or Extended.
    pub support: SupportLevel,
    /// The upstream-style feature names the case exercises (`HTTPRouteQueryParamMatching`, …).
    pub features: Vec<String>,
    /// The Gateway requests go to.
    pub gateway: GatewayRef,
    /// Requests and what they should get.
    #[serde(default)]
    pub requests: Vec<RequestCase>,
    /// Expected status conditions.
    #[serde(default)]
    pub status: Vec<StatusExpectation>,
}

/// A Gateway by namespace and name.
#[derive(Debug, Clone, Deserialize)]
pub struct GatewayRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl GatewayRef {
    /// As an [`ObjectKey`].
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(&self.namespace, &self.name)
    }
}

/// A request of a case.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestSpec {
    /// Listener port (80 by default).
    #[serde(default = "port_80")]
    pub port: u16,
    /// Method (`GET` by default).
    #[serde(default = "get")]
    pub method: String,
    /// Host header.
    pub host: String,
    /// Path and query.
    pub path: String,
    /// Headers, in order.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn port_80() -> u16 {
    80
}

fn get() -> String {
    "GET".to_owned()
}

impl RequestSpec {
    /// As the evaluator takes it.
    pub fn to_request(&self) -> HttpRequest {
        HttpRequest {
            port: self.port,
            method: self.method.clone(),
            host: self.host.clone(),
            target: self.path.clone(),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// One request and its expectations.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestCase {
    /// What the request checks.
    pub name: String,
    /// The request.
    pub request: RequestSpec,
    /// What one exchange should show (not for `split` cases).
    #[serde(default)]
    pub expect: Option<Expect>,
    /// For weighted rules: the share of requests each Service (`namespace/name`) gets, as
    /// relative integers (`{a: 3, b: 1}` = 75 % / 25 %).
    #[serde(default)]
    pub split: BTreeMap<String, u64>,
    /// Response headers the (echo) backend answers with, for response header filters.
    #[serde(default)]
    pub backend_response_headers: BTreeMap<String, String>,
}

/// What an exchange should show; unset fields are not checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expect {
    /// Status code (200 = the backend answered).
    #[serde(default)]
    pub status: Option<u16>,
    /// The Service (`namespace/name`) that answered.
    #[serde(default)]
    pub backend: Option<String>,
    /// The `Location` of a redirect.
    #[serde(default)]
    pub location: Option<String>,
    /// The Host the backend saw.
    #[serde(default)]
    pub host: Option<String>,
    /// The target (path and query) the backend saw.
    #[serde(default)]
    pub path: Option<String>,
    /// Request headers the backend saw with these values (names any case).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request headers the backend must not see.
    #[serde(default)]
    pub absent_headers: Vec<String>,
    /// Response headers the client sees with these values.
    #[serde(default)]
    pub response_headers: BTreeMap<String, String>,
    /// Response headers the client must not see.
    #[serde(default)]
    pub absent_response_headers: Vec<String>,
    /// Services (`namespace/name`) that receive a copy.
    #[serde(default)]
    pub mirrors: Vec<String>,
}

/// What a client and the backend observed of one exchange.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Status code (200 when a backend answered).
    pub status: u16,
    /// The Service that answered, `namespace/name`.
    pub backend: Option<String>,
    /// The `Location` header.
    pub location: Option<String>,
    /// The Host the backend saw.
    pub host: Option<String>,
    /// The target the backend saw.
    pub path: Option<String>,
    /// Request headers the backend saw.
    pub headers: Vec<(String, String)>,
    /// Response headers the client saw.
    pub response_headers: Vec<(String, String)>,
    /// Services that received a copy, `namespace/name`.
    pub mirrors: Vec<String>,
}

fn find<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Observed {
    /// What the evaluator's decision amounts to, the backend answering with
    /// `backend_response_headers`.
    pub fn from_decision(
        decision: &Decision,
        backend_response_headers: &[(String, String)],
    ) -> Self {
        match decision {
            Decision::Forward(forward) => {
                let mut response_headers = backend_response_headers.to_vec();
                forward.response_headers.apply(&mut response_headers);
                Observed {
                    status: 200,
                    backend: Some(forward.backend.service.to_string()),
                    location: None,
                    host: Some(forward.host.clone()),
                    path: Some(forward.target.clone()),
                    headers: forward.headers.clone(),
                    response_headers,
                    mirrors: forward
                        .mirrors
                        .iter()
                        .map(|m| m.backend.service.to_string())
                        .collect(),
                }
            }
            Decision::Redirect {
                status,
                location,
                response_headers: modifier,
            } => {
                let mut response_headers = Vec::new();
                modifier.apply(&mut response_headers);
                Observed {
                    status: *status,
                    location: Some(location.clone()),
                    response_headers,
                    ..Observed::default()
                }
            }
            Decision::Respond { status, .. } => Observed {
                status: *status,
                ..Observed::default()
            },
        }
    }
}

impl Expect {
    /// Every way `observed` differs from the expectation (empty = as expected).
    pub fn check(&self, observed: &Observed) -> Vec<String> {
        let mut out = Vec::new();
        let mut compare = |what: &str, want: Option<&str>, got: Option<&str>| {
            if let Some(want) = want
                && Some(want) != got
            {
                out.push(format!("{what}: expected {want:?}, got {got:?}"));
            }
        };
        compare(
            "status",
            self.status.map(|s| s.to_string()).as_deref(),
            Some(observed.status.to_string().as_str()),
        );
        compare(
            "backend",
            self.backend.as_deref(),
            observed.backend.as_deref(),
        );
        compare(
            "location",
            self.location.as_deref(),
            observed.location.as_deref(),
        );
        compare("host", self.host.as_deref(), observed.host.as_deref());
        compare("path", self.path.as_deref(), observed.path.as_deref());
        for (name, value) in &self.headers {
            compare(
                &format!("request header {name}"),
                Some(value),
                find(&observed.headers, name),
            );
        }
        for (name, value) in &self.response_headers {
            compare(
                &format!("response header {name}"),
                Some(value),
                find(&observed.response_headers, name),
            );
        }
        for name in &self.absent_headers {
            if let Some(value) = find(&observed.headers, name) {
                out.push(format!(
                    "request header {name}: expected absent, got {value:?}"
                ));
            }
        }
        for name in &self.absent_response_headers {
            if let Some(value) = find(&observed.response_headers, name) {
                out.push(format!(
                    "response header {name}: expected absent, got {value:?}"
                ));
            }
        }
        let mut want = self.mirrors.clone();
        let mut got = observed.mirrors.clone();
        want.sort();
        got.sort();
        if want != got {
            out.push(format!("mirrors: expected {want:?}, got {got:?}"));
        }
        out
    }
}

/// Conditions expected on an object (or one of its listeners or parents).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusExpectation {
    /// `GatewayClass`, `Gateway` or `HTTPRoute`.
    pub kind: String,
    /// Namespace (none for a GatewayClass).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// For a Gateway: the listener whose conditions are meant.
    #[serde(default)]
    pub listener: Option<String>,
    /// For an HTTPRoute: the parent Gateway's name (its first parentRef when unset).
    #[serde(default)]
    pub parent: Option<String>,
    /// For a listener: the expected `attachedRoutes`.
    #[serde(default)]
    pub attached_routes: Option<u32>,
    /// Condition type → `"<status>/<reason>"`, e.g. `Accepted: "False/NotAllowedByListeners"`.
    #[serde(default)]
    pub conditions: BTreeMap<String, String>,
}

impl Case {
    /// Reads a case file.
    pub fn from_yaml(text: &str) -> Result<Case, CaseError> {
        let (cases, objects): (Vec<Object>, Vec<Object>) = Package::from_yaml(text)?
            .into_objects()
            .into_iter()
            .partition(|o| o.api_version == CASE_API_VERSION && o.kind == CASE_KIND);
        let [case] = cases.as_slice() else {
            return Err(CaseError::CaseCount(cases.len()));
        };
        let name = case.name().unwrap_or("<no name>").to_owned();
        let spec = case
            .spec()
            .ok_or_else(|| "missing".to_owned())
            .and_then(|spec| serde_json::from_value(spec.clone()).map_err(|e| e.to_string()))
            .map_err(|message| CaseError::Spec {
                name: name.clone(),
                message,
            })?;
        Ok(Case {
            name,
            spec,
            objects,
        })
    }
}

/// How much of the rule that decides `request` on `gateway` the driver serves; `Fully` when no
/// rule matches (every driver answers that 404).
pub fn support_for(
    gateway: &CompiledGateway,
    request: &HttpRequest,
    capabilities: &DriverCapabilities,
) -> Served {
    let Some(host) = normalize_host(&request.host) else {
        return Served::Fully;
    };
    let Some(listener) = gateway.listener(request.port, &host) else {
        return Served::Fully;
    };
    let Some(entry) = listener.decisive_entry(&host, request) else {
        return Served::Fully;
    };
    explain(listener, capabilities)
        .get(entry.action)
        .map_or(Served::Fully, |rule| rule.served)
}
