//! The Kubernetes and OpenShift objects translation reads, typed down to the fields it uses:
//! Ingress and IngressClass (`networking.k8s.io/v1`), Route (`route.openshift.io/v1`), Service
//! (`v1`), EndpointSlice (`discovery.k8s.io/v1`) and TLS Secrets (`v1`, `kubernetes.io/tls`).
//! Unknown fields are ignored; a field of the wrong shape rejects the object.

use serde::Deserialize;

/// A port reference: a number or a name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    /// A number.
    Int(i64),
    /// A name.
    String(String),
}

/// `spec` of an Ingress.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressSpec {
    /// `ingressClassName`.
    #[serde(default)]
    pub ingress_class_name: Option<String>,
    /// `defaultBackend`.
    #[serde(default)]
    pub default_backend: Option<IngressBackend>,
    /// `tls`.
    #[serde(default)]
    pub tls: Vec<IngressTls>,
    /// `rules`.
    #[serde(default)]
    pub rules: Vec<IngressRule>,
}

/// `spec.tls[]` of an Ingress.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressTls {
    /// Hosts the certificate serves.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The `kubernetes.io/tls` Secret in the Ingress's namespace.
    #[serde(default)]
    pub secret_name: Option<String>,
}

/// `spec.rules[]` of an Ingress.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressRule {
    /// Exact or `*.` wildcard host; absent = any host.
    #[serde(default)]
    pub host: Option<String>,
    /// The HTTP paths.
    #[serde(default)]
    pub http: Option<HttpIngressRuleValue>,
}

/// `http` of an Ingress rule.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HttpIngressRuleValue {
    /// The paths.
    #[serde(default)]
    pub paths: Vec<HttpIngressPath>,
}

/// One path of an Ingress rule.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpIngressPath {
    /// The path.
    #[serde(default)]
    pub path: Option<String>,
    /// `Exact`, `Prefix` or `ImplementationSpecific` (required).
    #[serde(default)]
    pub path_type: Option<String>,
    /// Where matching requests go.
    #[serde(default)]
    pub backend: IngressBackend,
}

/// An Ingress backend.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressBackend {
    /// The Service backend.
    #[serde(default)]
    pub service: Option<IngressServiceBackend>,
    /// A resource backend (not supported: rejected).
    #[serde(default)]
    pub resource: Option<serde_json::Value>,
}

/// A Service backend.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressServiceBackend {
    /// The Service name.
    #[serde(default)]
    pub name: String,
    /// The Service port.
    #[serde(default)]
    pub port: Option<ServiceBackendPort>,
}

/// A Service port by number or name.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceBackendPort {
    /// `number`.
    #[serde(default)]
    pub number: Option<i64>,
    /// `name`.
    #[serde(default)]
    pub name: Option<String>,
}

/// `spec` of an IngressClass.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IngressClassSpec {
    /// The controller name.
    #[serde(default)]
    pub controller: Option<String>,
}

/// `spec` of a Route.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// The host.
    #[serde(default)]
    pub host: Option<String>,
    /// The path prefix.
    #[serde(default)]
    pub path: Option<String>,
    /// The main backend.
    #[serde(default)]
    pub to: Option<RouteTargetReference>,
    /// Up to 3 more backends.
    #[serde(default)]
    pub alternate_backends: Vec<RouteTargetReference>,
    /// `port.targetPort`.
    #[serde(default)]
    pub port: Option<RoutePort>,
    /// TLS settings.
    #[serde(default)]
    pub tls: Option<RouteTls>,
}

/// A Route backend.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RouteTargetReference {
    /// `Service` (the only kind).
    #[serde(default)]
    pub kind: Option<String>,
    /// The Service name.
    #[serde(default)]
    pub name: String,
    /// 0–256, default 100.
    #[serde(default)]
    pub weight: Option<i64>,
}

/// `spec.port` of a Route.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutePort {
    /// The endpoint port by name or number.
    pub target_port: IntOrString,
}

/// `spec.tls` of a Route.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteTls {
    /// `edge`, `passthrough` or `reencrypt`.
    #[serde(default)]
    pub termination: String,
    /// PEM certificate.
    #[serde(default)]
    pub certificate: Option<String>,
    /// PEM key.
    #[serde(default)]
    pub key: Option<String>,
    /// PEM CA chain appended to the certificate.
    #[serde(default)]
    pub ca_certificate: Option<String>,
    /// PEM CA for the backends (reencrypt).
    #[serde(default, rename = "destinationCACertificate")]
    pub destination_ca_certificate: Option<String>,
    /// `None`, `Allow` or `Redirect`.
    #[serde(default)]
    pub insecure_edge_termination_policy: Option<String>,
}

/// `spec` of a Service.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceSpec {
    /// The ports.
    #[serde(default)]
    pub ports: Vec<ServicePort>,
}

/// A Service port.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServicePort {
    /// Name (may be absent for a single port).
    #[serde(default)]
    pub name: Option<String>,
    /// The Service port number.
    #[serde(default)]
    pub port: i64,
}

/// The fields of an EndpointSlice translation reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSliceBody {
    /// `IPv4`, `IPv6` or `FQDN`.
    #[serde(default)]
    pub address_type: Option<String>,
    /// The endpoints.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// The ports.
    #[serde(default)]
    pub ports: Vec<EndpointPort>,
}

/// An endpoint of a slice.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Endpoint {
    /// Addresses.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Conditions.
    #[serde(default)]
    pub conditions: Option<EndpointConditions>,
}

/// An endpoint's conditions.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointConditions {
    /// Ready (absent = ready).
    #[serde(default)]
    pub ready: Option<bool>,
}

/// A port of a slice.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct EndpointPort {
    /// The name (matches the Service port's name).
    #[serde(default)]
    pub name: Option<String>,
    /// The port number.
    #[serde(default)]
    pub port: Option<i64>,
}

/// The fields of a Secret translation reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretBody {
    /// `kubernetes.io/tls` for certificates.
    #[serde(default, rename = "type")]
    pub secret_type: Option<String>,
    /// Base64 values.
    #[serde(default)]
    pub data: std::collections::BTreeMap<String, String>,
    /// Plain values (win over `data`).
    #[serde(default)]
    pub string_data: std::collections::BTreeMap<String, String>,
}

impl SecretBody {
    /// The value of `key` as text, from `stringData` or base64 `data`.
    pub fn text(&self, key: &str) -> Result<Option<String>, String> {
        if let Some(value) = self.string_data.get(key) {
            return Ok(Some(value.clone()));
        }
        let Some(encoded) = self.data.get(key) else {
            return Ok(None);
        };
        let bytes = decode_base64(encoded).ok_or_else(|| format!("data.{key} is not base64"))?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("data.{key} is not UTF-8 PEM text"))
    }
}

/// Decodes standard base64 (padding optional, whitespace ignored).
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0u32;
    let mut padding = false;
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        if padding {
            return None;
        }
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((buffer >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}
