//! Kubernetes objects (the wire types of `k8s-openapi`) read into the
//! pipeline model's northbound types. What cannot be read is a warning
//! naming the object and the field; that object is skipped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// A Service's ClusterIP of each family it has.
type ClusterIps = (Option<Ipv4Addr>, Option<Ipv6Addr>);

/// The ClusterIPs of a Service, one per family, as its `spec` states them:
/// `clusterIPs` (or `clusterIP` alone), checked against `ipFamilies` (the
/// family of each ClusterIP, in order) and `ipFamilyPolicy` (`SingleStack`,
/// the default: one; `PreferDualStack`: one or two; `RequireDualStack`:
/// two). `Ok(None)`: headless.
fn cluster_ips(
    spec: &k8s_openapi::api::core::v1::ServiceSpec,
    name: &str,
) -> Result<Option<ClusterIps>, String> {
    let listed: Vec<(String, &str)> = match (&spec.cluster_ips, spec.cluster_ip.as_deref()) {
        (Some(ips), _) if !ips.is_empty() => ips
            .iter()
            .enumerate()
            .map(|(i, ip)| (format!("spec.clusterIPs[{i}]"), ip.as_str()))
            .collect(),
        (_, None | Some("")) => return Ok(None),
        (_, Some(ip)) => vec![("spec.clusterIP".to_string(), ip)],
    };
    if listed.iter().any(|(_, ip)| *ip == "None") {
        return Ok(None);
    }
    if listed.len() > 2 {
        return Err(format!(
            "service {name}: spec.clusterIPs holds {} addresses (at most one per family)",
            listed.len()
        ));
    }
    let families = spec.ip_families.as_deref().unwrap_or_default();
    let (mut v4, mut v6) = (None, None);
    for (i, (field, ip)) in listed.iter().enumerate() {
        let ip: IpAddr = ip
            .parse()
            .map_err(|_| format!("service {name}: {field} {ip:?} is not an IP address"))?;
        let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
        if let Some(stated) = families.get(i)
            && stated != family
        {
            return Err(format!(
                "service {name}: {field} {ip} is {family} but spec.ipFamilies[{i}] says {stated}"
            ));
        }
        let taken = match ip {
            IpAddr::V4(a) => v4.replace(a).is_some(),
            IpAddr::V6(a) => v6.replace(a).is_some(),
        };
        if taken {
            return Err(format!(
                "service {name}: spec.clusterIPs holds two {family} addresses (at most one per family)"
            ));
        }
    }
    for (i, f) in families.iter().enumerate() {
        if f != "IPv4" && f != "IPv6" {
            return Err(format!(
                "service {name}: spec.ipFamilies[{i}] {f:?} is not IPv4 or IPv6"
            ));
        }
    }
    let count = listed.len();
    match spec.ip_family_policy.as_deref() {
        None | Some("SingleStack") if count > 1 => Err(format!(
            "service {name}: spec.ipFamilyPolicy is SingleStack but spec.clusterIPs holds {count} addresses"
        )),
        Some("RequireDualStack") if count < 2 => Err(format!(
            "service {name}: spec.ipFamilyPolicy is RequireDualStack but spec.clusterIPs holds one address"
        )),
        None | Some("SingleStack" | "PreferDualStack" | "RequireDualStack") => Ok(Some((v4, v6))),
        Some(other) => Err(format!(
            "service {name}: spec.ipFamilyPolicy {other:?} is not SingleStack, PreferDualStack or RequireDualStack"
        )),
    }
}

/// A Service as the load balancer needs it, with its ClusterIP of each
/// family it has (`cluster_ips`); `Ok(None)` for Services it does not
/// balance (ExternalName, headless).
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
    let Some((cluster_ip, cluster_ip6)) = cluster_ips(spec, &name)? else {
        return Ok(None);
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
        cluster_ip,
        cluster_ip6,
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

/// An address family as an EndpointSlice's `addressType` names it.
pub trait SliceFamily: std::str::FromStr + Sized {
    /// The `addressType` (`IPv4`, `IPv6`).
    const ADDRESS_TYPE: &'static str;
}

impl SliceFamily for Ipv4Addr {
    const ADDRESS_TYPE: &'static str = "IPv4";
}

impl SliceFamily for Ipv6Addr {
    const ADDRESS_TYPE: &'static str = "IPv6";
}

/// The endpoints of an EndpointSlice of the family `A` (a slice of another
/// address type: none). A missing `ready` condition means ready, as
/// Kubernetes says.
///
/// # Errors
/// An address or port that cannot be read, naming the slice and the field.
pub fn endpoints<A: SliceFamily>(slice: &EndpointSlice) -> Result<Vec<Endpoint<A>>, String> {
    let name = object_name(&slice.metadata);
    if slice.address_type != A::ADDRESS_TYPE {
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
            let address = a.parse::<A>().map_err(|_| {
                format!(
                    "endpointslice {name}: endpoints[{i}].addresses[{j}] {a:?} is not an {} address",
                    A::ADDRESS_TYPE
                )
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
