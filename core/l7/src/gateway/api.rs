//! Typed views of the Gateway API v1 kinds read from [`Object`]s: GatewayClass, Gateway,
//! HTTPRoute and ReferenceGrant, down to the fields routing and status use.
//!
//! Each part of a spec (a listener, a parentRef, a rule) is read on its own, so a field of the
//! wrong shape is reported with its path (`spec.rules[2]`) and the object, never a panic, and
//! the other parts of the object are still read. Defaults are the API's: a parentRef is a
//! `Gateway` of group `gateway.networking.k8s.io` in the route's namespace, a backendRef a core
//! `Service` of weight 1, a match without a path the prefix `/`, a listener's routes from the
//! `Same` namespace, a TLS mode `Terminate`, a redirect's status code 302.

use nephrite_krm::{LabelSelector, Object};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{GatewayError, ObjectKey};

/// The API group of the Gateway API kinds.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A GatewayClass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayClass {
    /// Its name (cluster-scoped).
    pub name: String,
    /// `spec.controllerName`.
    pub controller_name: String,
}

/// A Gateway: its class and listeners.
#[derive(Debug, Clone, PartialEq)]
pub struct Gateway {
    /// Namespace and name.
    pub key: ObjectKey,
    /// `spec.gatewayClassName`.
    pub class_name: String,
    /// `spec.listeners`, in order.
    pub listeners: Vec<ListenerSpec>,
}

/// One `spec.listeners[]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSpec {
    /// `name`, unique in the Gateway.
    pub name: String,
    /// `hostname`: exact or `*.` wildcard; absent = any.
    #[serde(default)]
    pub hostname: Option<String>,
    /// `port`.
    pub port: u16,
    /// `protocol`: `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed name.
    pub protocol: String,
    /// `tls`.
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    /// `allowedRoutes`.
    #[serde(default)]
    pub allowed_routes: AllowedRoutes,
}

/// `tls` of a listener.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate` (default) or `Passthrough`.
    #[serde(default = "terminate")]
    pub mode: String,
    /// `certificateRefs`.
    #[serde(default)]
    pub certificate_refs: Vec<SecretObjectReference>,
}

fn terminate() -> String {
    "Terminate".to_owned()
}

/// A reference to a Secret (or another kind, refused) by group, kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SecretObjectReference {
    /// `group`: `""` (core) by default.
    #[serde(default)]
    pub group: String,
    /// `kind`: `Secret` by default.
    #[serde(default = "secret_kind")]
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `namespace`: the Gateway's by default.
    #[serde(default)]
    pub namespace: Option<String>,
}

fn secret_kind() -> String {
    "Secret".to_owned()
}

/// `allowedRoutes` of a listener.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct AllowedRoutes {
    /// `namespaces`.
    #[serde(default)]
    pub namespaces: RouteNamespaces,
    /// `kinds`; empty = the kinds the protocol supports.
    #[serde(default)]
    pub kinds: Vec<RouteGroupKind>,
}

/// `allowedRoutes.namespaces`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RouteNamespaces {
    /// `from`: `Same` (default), `All` or `Selector`.
    #[serde(default = "same")]
    pub from: String,
    /// `selector`, for `from: Selector`.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

impl Default for RouteNamespaces {
    fn default() -> Self {
        RouteNamespaces {
            from: same(),
            selector: None,
        }
    }
}

fn same() -> String {
    "Same".to_owned()
}

/// A route kind a listener allows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub struct RouteGroupKind {
    /// `group`: `gateway.networking.k8s.io` by default.
    #[serde(default = "gateway_group")]
    pub group: String,
    /// `kind`.
    pub kind: String,
}

fn gateway_group() -> String {
    GROUP.to_owned()
}

/// An HTTPRoute.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRoute {
    /// Namespace and name.
    pub key: ObjectKey,
    /// `metadata.creationTimestamp` (RFC 3339), for precedence between routes.
    pub created: Option<String>,
    /// `spec.parentRefs`.
    pub parent_refs: Vec<ParentReference>,
    /// `spec.hostnames`.
    pub hostnames: Vec<String>,
    /// `spec.rules`: each read on its own; an unreadable rule is its error (the field path).
    pub rules: Vec<Result<RouteRule, GatewayError>>,
}

/// One `spec.parentRefs[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// `group`: `gateway.networking.k8s.io` by default.
    #[serde(default = "gateway_group")]
    pub group: String,
    /// `kind`: `Gateway` by default.
    #[serde(default = "gateway_kind")]
    pub kind: String,
    /// `namespace`: the route's by default.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `name`.
    pub name: String,
    /// `sectionName`: a listener name.
    #[serde(default)]
    pub section_name: Option<String>,
    /// `port`: a listener port.
    #[serde(default)]
    pub port: Option<u16>,
}

fn gateway_kind() -> String {
    "Gateway".to_owned()
}

/// One `spec.rules[]` entry.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteRule {
    /// `matches`; empty = one match of the prefix `/`.
    #[serde(default)]
    pub matches: Vec<RouteMatch>,
    /// `filters`, in order.
    #[serde(default)]
    pub filters: Vec<RouteFilter>,
    /// `backendRefs`.
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}

/// One `matches[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    /// `path`; absent = prefix `/`.
    #[serde(default)]
    pub path: Option<PathMatch>,
    /// `headers`, ANDed.
    #[serde(default)]
    pub headers: Vec<ValueMatch>,
    /// `queryParams`, ANDed.
    #[serde(default)]
    pub query_params: Vec<ValueMatch>,
    /// `method`.
    #[serde(default)]
    pub method: Option<String>,
}

/// `path` of a match.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PathMatch {
    /// `Exact`, `PathPrefix` (default) or `RegularExpression`.
    #[serde(default = "path_prefix", rename = "type")]
    pub match_type: String,
    /// `value`, `/` by default.
    #[serde(default = "slash")]
    pub value: String,
}

fn path_prefix() -> String {
    "PathPrefix".to_owned()
}

fn slash() -> String {
    "/".to_owned()
}

/// A header or query parameter match.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ValueMatch {
    /// `Exact` (default) or `RegularExpression`.
    #[serde(default = "exact", rename = "type")]
    pub match_type: String,
    /// `name`.
    pub name: String,
    /// `value`.
    pub value: String,
}

fn exact() -> String {
    "Exact".to_owned()
}

/// One `filters[]` entry, by its `type`; the other members are read only for that type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteFilter {
    /// `type`.
    #[serde(rename = "type")]
    pub filter_type: String,
    /// `requestHeaderModifier`.
    #[serde(default)]
    pub request_header_modifier: Option<HeaderModifierSpec>,
    /// `responseHeaderModifier`.
    #[serde(default)]
    pub response_header_modifier: Option<HeaderModifierSpec>,
    /// `requestRedirect`.
    #[serde(default)]
    pub request_redirect: Option<RedirectSpec>,
    /// `urlRewrite`.
    #[serde(default)]
    pub url_rewrite: Option<RewriteSpec>,
    /// `requestMirror`.
    #[serde(default)]
    pub request_mirror: Option<MirrorSpec>,
}

/// `requestHeaderModifier` / `responseHeaderModifier`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct HeaderModifierSpec {
    /// Headers to overwrite.
    #[serde(default)]
    pub set: Vec<HeaderValue>,
    /// Headers to append to.
    #[serde(default)]
    pub add: Vec<HeaderValue>,
    /// Header names to remove.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// A header name and value.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HeaderValue {
    /// `name`.
    pub name: String,
    /// `value`.
    pub value: String,
}

/// `requestRedirect`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedirectSpec {
    /// `http` or `https`.
    #[serde(default)]
    pub scheme: Option<String>,
    /// The host of the Location.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The path of the Location.
    #[serde(default)]
    pub path: Option<PathModifierSpec>,
    /// The port of the Location.
    #[serde(default)]
    pub port: Option<u16>,
    /// 301, 302 (default), 303, 307 or 308.
    #[serde(default)]
    pub status_code: Option<u16>,
}

/// `urlRewrite`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct RewriteSpec {
    /// The Host the backend sees.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The path the backend sees.
    #[serde(default)]
    pub path: Option<PathModifierSpec>,
}

/// A path modifier of a redirect or rewrite.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathModifierSpec {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub modifier_type: String,
    /// For `ReplaceFullPath`.
    #[serde(default)]
    pub replace_full_path: Option<String>,
    /// For `ReplacePrefixMatch`.
    #[serde(default)]
    pub replace_prefix_match: Option<String>,
}

/// `requestMirror`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MirrorSpec {
    /// `backendRef`.
    #[serde(rename = "backendRef")]
    pub backend_ref: BackendRef,
    /// `percent` of requests mirrored (0–100).
    #[serde(default)]
    pub percent: Option<u32>,
    /// `fraction` of requests mirrored.
    #[serde(default)]
    pub fraction: Option<Fraction>,
}

/// A fraction `numerator / denominator` (denominator 100 by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Fraction {
    /// `numerator`.
    pub numerator: u32,
    /// `denominator`.
    #[serde(default = "hundred")]
    pub denominator: u32,
}

fn hundred() -> u32 {
    100
}

/// A `backendRefs[]` entry (or a mirror's `backendRef`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BackendRef {
    /// `group`: `""` (core) by default.
    #[serde(default)]
    pub group: String,
    /// `kind`: `Service` by default.
    #[serde(default = "service_kind")]
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `namespace`: the route's by default.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `port`: required for a Service.
    #[serde(default)]
    pub port: Option<u16>,
    /// `weight`: 1 by default, 0 = no traffic.
    #[serde(default = "one")]
    pub weight: u32,
    /// Per-backend `filters` (not served: the rule is refused).
    #[serde(default)]
    pub filters: Vec<Value>,
}

fn service_kind() -> String {
    "Service".to_owned()
}

fn one() -> u32 {
    1
}

/// A ReferenceGrant: who, in its own namespace, may be referred to from where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceGrant {
    /// Namespace and name (the namespace is that of the objects it opens).
    pub key: ObjectKey,
    /// `spec.from`.
    pub from: Vec<GrantFrom>,
    /// `spec.to`.
    pub to: Vec<GrantTo>,
}

/// A `spec.from[]` entry of a ReferenceGrant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GrantFrom {
    /// `group` of the referring kind.
    #[serde(default)]
    pub group: String,
    /// `kind` of the referring object.
    pub kind: String,
    /// `namespace` of the referring object.
    pub namespace: String,
}

/// A `spec.to[]` entry of a ReferenceGrant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GrantTo {
    /// `group` of the referred kind (`""` = core).
    #[serde(default)]
    pub group: String,
    /// `kind` of the referred object.
    pub kind: String,
    /// `name`: absent = any object of the kind.
    #[serde(default)]
    pub name: Option<String>,
}

/// Whether `object` is of `kind` in the Gateway API group (any version).
pub fn is_gateway_kind(object: &Object, kind: &str) -> bool {
    object.kind == kind
        && object
            .api_version
            .split_once('/')
            .is_some_and(|(group, _)| group == GROUP)
}

/// The object's namespace and name (`default` when no namespace is set).
pub fn key_of(object: &Object) -> Result<ObjectKey, GatewayError> {
    let name = object.name().ok_or_else(|| GatewayError::Invalid {
        object: format!(
            "{} in {}",
            object.kind,
            object.namespace().unwrap_or("default")
        ),
        field: "metadata.name".into(),
        message: "missing".into(),
    })?;
    Ok(ObjectKey::new(
        object.namespace().unwrap_or("default"),
        name,
    ))
}

fn describe(object: &Object) -> String {
    crate::translate::describe(object)
}

/// Reads `value` (absent = `T::default()` when `default` is given) as `T`, naming `field`.
fn read<T: DeserializeOwned>(
    object: &Object,
    field: &str,
    value: &Value,
) -> Result<T, GatewayError> {
    serde_json::from_value(value.clone()).map_err(|err| GatewayError::Invalid {
        object: describe(object),
        field: field.to_owned(),
        message: err.to_string(),
    })
}

fn spec_field<'a>(object: &'a Object, field: &str) -> Option<&'a Value> {
    object.spec().and_then(|spec| spec.get(field))
}

/// Reads the entries of the list `spec.<field>` one by one.
fn read_list<T: DeserializeOwned>(object: &Object, field: &str) -> Vec<Result<T, GatewayError>> {
    match spec_field(object, field) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| read(object, &format!("spec.{field}[{index}]"), item))
            .collect(),
        Some(_) => vec![Err(GatewayError::Invalid {
            object: describe(object),
            field: format!("spec.{field}"),
            message: "not a list".into(),
        })],
    }
}

fn required_string(object: &Object, field: &str) -> Result<String, GatewayError> {
    match spec_field(object, field) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        _ => Err(GatewayError::Invalid {
            object: describe(object),
            field: format!("spec.{field}"),
            message: "missing or not a non-empty string".into(),
        }),
    }
}

impl GatewayClass {
    /// Reads a GatewayClass.
    pub fn from_object(object: &Object) -> Result<Self, GatewayError> {
        Ok(GatewayClass {
            name: key_of(object)?.name,
            controller_name: required_string(object, "controllerName")?,
        })
    }
}

impl Gateway {
    /// Reads a Gateway; any unreadable listener refuses it (listeners are validated as a set).
    pub fn from_object(object: &Object) -> Result<Self, GatewayError> {
        let listeners = read_list::<ListenerSpec>(object, "listeners")
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Gateway {
            key: key_of(object)?,
            class_name: required_string(object, "gatewayClassName")?,
            listeners,
        })
    }
}

impl HttpRoute {
    /// Reads an HTTPRoute. Unreadable parentRefs or hostnames refuse it; an unreadable rule is
    /// kept as its error (the route serves its other rules).
    pub fn from_object(object: &Object) -> Result<Self, GatewayError> {
        let parent_refs = read_list::<ParentReference>(object, "parentRefs")
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        let hostnames = read_list::<String>(object, "hostnames")
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        Ok(HttpRoute {
            key: key_of(object)?,
            created: object.metadata.details().creation_timestamp.clone(),
            parent_refs,
            hostnames,
            rules: read_list::<RouteRule>(object, "rules"),
        })
    }
}

impl ReferenceGrant {
    /// Reads a ReferenceGrant.
    pub fn from_object(object: &Object) -> Result<Self, GatewayError> {
        let from = read_list::<GrantFrom>(object, "from")
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        let to = read_list::<GrantTo>(object, "to")
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReferenceGrant {
            key: key_of(object)?,
            from,
            to,
        })
    }
}
