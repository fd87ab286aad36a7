//! Kubernetes objects (the wire types of `k8s-openapi`) read into the
//! pipeline model's northbound types. What cannot be read is a warning
//! naming the object and the field; that object is skipped.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service as KubeService;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nephrite_pipeline::{
    Affinity, Endpoint, EndpointPort, Protocol, Service, ServicePort, TargetPort,
};

/// The label an EndpointSlice names its Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A Kubernetes object's `namespace/name`.
pub fn object_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or("")
    )
}

/// True for an RFC 1123 label (what namespaces and Service names are):
/// the names go into data-plane object names.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn protocol(p: Option<&str>, what: impl Fn() -> String) -> Result<Protocol, String> {
    match p.unwrap_or("TCP") {
        "TCP" => Ok(Protocol::Tcp),
        "UDP" => Ok(Protocol::Udp),
        "SCTP" => Ok(Protocol::Sctp),
        other => Err(format!(
            "{}: protocol {other:?} is not TCP, UDP or SCTP",
            what()
        )),
    }
}

fn port_number(n: i32, what: impl Fn() -> String) -> Result<u16, String> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("{}: {n} is not a port number (1-65535)", what()))
}

/// A Service as the load balancer needs it; `Ok(None)` for Services it does
/// not balance (ExternalName, headless, an IPv6 ClusterIP).
///
/// # Errors
/// A field that cannot be read, naming the Service and the field.
pub fn service(s: &KubeService) -> Result<Option<Service>, String> {
    let name = object_name(&s.metadata);
    let namespace = s
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let svc = s.metadata.name.clone().unwrap_or_default();
    if !is_dns_label(&namespace) || !is_dns_label(&svc) {
        return Err(format!(
            "service {name}: metadata.name and metadata.namespace must be DNS labels"
        ));
    }
    let Some(spec) = &s.spec else {
        return Ok(None);
    };
    if spec.type_.as_deref() == Some("ExternalName") {
        return Ok(None);
    }
    let cluster_ip = match spec.cluster_ip.as_deref() {
        None | Some("" | "None") => return Ok(None),
        Some(ip) => match ip.parse::<Ipv4Addr>() {
            Ok(ip) => ip,
            Err(_) if ip.contains(':') => return Ok(None),
            Err(_) => {
                return Err(format!(
                    "service {name}: spec.clusterIP {ip:?} is not an IPv4 address"
                ));
            }
        },
    };
    let mut ports = Vec::new();
    for (i, p) in spec.ports.iter().flatten().enumerate() {
        let field = || format!("service {name}: spec.ports[{i}]");
        let port = port_number(p.port, || format!("{} port", field()))?;
        let target_port = match &p.target_port {
            None => TargetPort::Number(port),
            Some(IntOrString::Int(n)) => {
                TargetPort::Number(port_number(*n, || format!("{} targetPort", field()))?)
            }
            Some(IntOrString::String(s)) => match s.parse::<i32>() {
                Ok(n) => TargetPort::Number(port_number(n, || format!("{} targetPort", field()))?),
                Err(_) => TargetPort::Name(s.clone()),
            },
        };
        let node_port = match p.node_port {
            None | Some(0) => None,
            Some(n) => Some(port_number(n, || format!("{} nodePort", field()))?),
        };
        ports.push(ServicePort {
            // an unnamed port's EndpointSlice ports are named "" (or not at all)
            name: p.name.clone().filter(|n| !n.is_empty()),
            protocol: protocol(p.protocol.as_deref(), field)?,
            port,
            target_port,
            node_port,
        });
    }
    let affinity = match spec.session_affinity.as_deref() {
        None | Some("None") => Affinity::None,
        Some("ClientIP") => Affinity::ClientIp,
        Some(other) => {
            return Err(format!(
                "service {name}: spec.sessionAffinity {other:?} is not None or ClientIP"
            ));
        }
    };
    Ok(Some(Service {
        namespace,
        name: svc,
        cluster_ip: Some(cluster_ip),
        ports,
        affinity,
    }))
}

/// The Service (`namespace`, name) an EndpointSlice belongs to.
pub fn slice_service(slice: &EndpointSlice) -> Option<(String, String)> {
    let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    let namespace = slice
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    Some((namespace, service.clone()))
}

/// The endpoints of an IPv4 EndpointSlice (other address types: none).
/// A missing `ready` condition means ready, as Kubernetes says.
///
/// # Errors
/// An address or port that cannot be read, naming the slice and the field.
pub fn endpoints(slice: &EndpointSlice) -> Result<Vec<Endpoint>, String> {
    let name = object_name(&slice.metadata);
    if slice.address_type != "IPv4" {
        return Ok(Vec::new());
    }
    let mut ports = Vec::new();
    for (i, p) in slice.ports.iter().flatten().enumerate() {
        let field = || format!("endpointslice {name}: ports[{i}]");
        let Some(n) = p.port else { continue };
        ports.push(EndpointPort {
            name: p.name.clone().filter(|n| !n.is_empty()),
            protocol: protocol(p.protocol.as_deref(), field)?,
            port: port_number(n, field)?,
        });
    }
    let mut out = Vec::new();
    for (i, e) in slice.endpoints.iter().enumerate() {
        let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
        for (j, a) in e.addresses.iter().enumerate() {
            let address = a.parse::<Ipv4Addr>().map_err(|_| {
                format!("endpointslice {name}: endpoints[{i}].addresses[{j}] {a:?} is not an IPv4 address")
            })?;
            out.push(Endpoint {
                address,
                ready,
                ports: ports.clone(),
            });
        }
    }
    Ok(out)
}
