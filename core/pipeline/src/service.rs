//! The northbound Load-Balancer network function: a Kubernetes Service and
//! its endpoints become one load-balancer module per Service port (virtual
//! IP, port and protocol → weighted ready backends), the form the pipelines
//! place and the data planes render. The translation is pure and
//! deterministic (endpoint order does not matter), and an update is the
//! difference between two translations.
//!
//! Each address family is translated on its own, as kube-proxy runs one
//! proxier per family: a dual-stack Service has a ClusterIP of each family,
//! its EndpointSlices are of one address type each, and the modules of one
//! family hold only that family's VIP and backends ([`ServiceFamily`]: the
//! types default to IPv4, `LoadBalancer<Ipv6Addr>` is the IPv6 twin).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// A transport protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

/// Where a Service port sends traffic on an endpoint, as the Service says.
/// The EndpointSlice controller resolves it, pod by pod, into the slices'
/// port numbers, which are what a load balancer uses; it is kept to name it
/// when an endpoint has no port for the Service port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetPort {
    /// A port number.
    Number(u16),
    /// The name of an endpoint port (each endpoint may map it to its own number).
    Name(String),
}

/// Session affinity of a Service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Affinity {
    /// Every connection picks a backend anew.
    #[default]
    None,
    /// A client address keeps its backend.
    ClientIp,
}

/// A port of a Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePort {
    /// Its name (required when a Service has several ports; `None` for an
    /// unnamed one, never empty): the name of its EndpointSlice ports.
    pub name: Option<String>,
    /// The protocol.
    pub protocol: Protocol,
    /// The port on the virtual IP.
    pub port: u16,
    /// The port on the endpoints.
    pub target_port: TargetPort,
    /// The port on every node (`NodePort` Services).
    pub node_port: Option<u16>,
}

/// A Service as the load balancer needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The IPv4 virtual IP (`None`: headless, or no IPv4 ClusterIP).
    pub cluster_ip: Option<Ipv4Addr>,
    /// The IPv6 virtual IP (`None`: headless, or no IPv6 ClusterIP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ip6: Option<Ipv6Addr>,
    /// Its ports.
    pub ports: Vec<ServicePort>,
    /// Session affinity.
    pub affinity: Affinity,
}

/// A port of an endpoint (EndpointSlice `ports`). The EndpointSlice
/// controller writes one per Service port, named after the Service port
/// (`spec.ports[].name`, empty for a Service's single unnamed port), with
/// the number it resolved the Service port's `targetPort` to on the slice's
/// pods; a pod on which a named `targetPort` does not resolve lands in a
/// slice without that port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointPort {
    /// The name of the Service port it serves (`None`: the unnamed one).
    pub name: Option<String>,
    /// The protocol.
    pub protocol: Protocol,
    /// The number.
    pub port: u16,
}

/// An address family a Service is load-balanced on: where its ClusterIP
/// of that family is. Implemented by [`Ipv4Addr`] and [`Ipv6Addr`].
pub trait ServiceFamily:
    Copy + Ord + std::fmt::Debug + std::fmt::Display + Into<IpAddr> + Send + Sync + 'static
{
    /// The Service's ClusterIP of this family (`None`: it has none).
    fn cluster_ip(service: &Service) -> Option<Self>;
}

impl ServiceFamily for Ipv4Addr {
    fn cluster_ip(service: &Service) -> Option<Self> {
        service.cluster_ip
    }
}

impl ServiceFamily for Ipv6Addr {
    fn cluster_ip(service: &Service) -> Option<Self> {
        service.cluster_ip6
    }
}

/// An endpoint of a Service (from its EndpointSlices), of one family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint<A = Ipv4Addr> {
    /// The pod's address.
    pub address: A,
    /// Ready for traffic (`conditions.ready`).
    pub ready: bool,
    /// The ports of its slice.
    pub ports: Vec<EndpointPort>,
}

/// A backend of a load-balancer module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Backend<A = Ipv4Addr> {
    /// The address.
    pub address: A,
    /// The port.
    pub port: u16,
    /// Its share: connections go to backends in proportion to weights.
    pub weight: u32,
}

/// The key of a load-balancer module: which Service port it renders.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LoadBalancerKey {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub service: String,
    /// The protocol.
    pub protocol: Protocol,
    /// The port on the virtual IP.
    pub port: u16,
}

/// A load-balancer module: a virtual IP, port and protocol spread over
/// weighted ready backends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancer<A = Ipv4Addr> {
    /// The virtual IP.
    pub vip: A,
    /// Also on every node at this port.
    pub node_port: Option<u16>,
    /// Session affinity.
    pub affinity: Affinity,
    /// Ready backends, sorted, each once.
    pub backends: Vec<Backend<A>>,
}

/// Why part of a Service could not be translated (that part is skipped,
/// the rest applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceWarning {
    /// A ready endpoint whose EndpointSlice has no port for a Service
    /// port: the EndpointSlice controller leaves the port out when the
    /// Service port's `targetPort` names no port of the endpoint's pod.
    #[error(
        "service {namespace}/{service} port {port}: endpoint {endpoint} has no port {}in its EndpointSlice (targetPort {target:?} does not resolve on it)",
        endpoint_port_label(.name.as_deref())
    )]
    UnknownTargetPort {
        /// Namespace.
        namespace: String,
        /// Service.
        service: String,
        /// The Service port.
        port: u16,
        /// The Service port's name (`None`: its single unnamed port), the
        /// name its EndpointSlice port carries.
        name: Option<String>,
        /// The Service port's targetPort, as written.
        target: String,
        /// The endpoint without it.
        endpoint: IpAddr,
    },
    /// A VIP, protocol and port another Service holds already.
    #[error("service {namespace}/{service} port {port}: {vip} is taken by service {owner}")]
    VipTaken {
        /// Namespace.
        namespace: String,
        /// Service.
        service: String,
        /// The Service port.
        port: u16,
        /// The VIP.
        vip: IpAddr,
        /// The Service holding it (`namespace/name`).
        owner: String,
    },
}

/// How a warning names the EndpointSlice port a Service port needs.
fn endpoint_port_label(name: Option<&str>) -> String {
    match name {
        Some(n) => format!("named {n:?} "),
        None => String::from("for the unnamed Service port "),
    }
}

/// The load-balancer modules of `service` over `endpoints` in the family
/// `A` (the Service's ClusterIP of that family, the endpoints of that
/// family's EndpointSlices), and what could not be translated. A Service
/// without a ClusterIP of the family (headless, or single-stack in the
/// other) has none; a not-ready endpoint is never a backend; an endpoint
/// listed twice counts once.
///
/// A Service port and an endpoint's port pair up as kube-proxy pairs them:
/// by the Service port's name (and protocol), the endpoint port's number
/// being the backend's port. The Service's `targetPort` is not looked at
/// here: the EndpointSlice controller resolved it, pod by pod, into the
/// slice (a named `targetPort` may be a different number on each pod).
pub fn load_balancers<A: ServiceFamily>(
    service: &Service,
    endpoints: &[Endpoint<A>],
) -> (
    BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
    Vec<ServiceWarning>,
) {
    let mut modules = BTreeMap::new();
    let mut warnings = Vec::new();
    let Some(vip) = A::cluster_ip(service) else {
        return (modules, warnings);
    };
    for sp in &service.ports {
        let mut backends: Vec<Backend<A>> = Vec::new();
        for ep in endpoints.iter().filter(|e| e.ready) {
            let port = ep
                .ports
                .iter()
                .find(|p| p.protocol == sp.protocol && p.name == sp.name)
                .map(|p| p.port);
            match port {
                Some(port) => backends.push(Backend {
                    address: ep.address,
                    port,
                    weight: 1,
                }),
                None => warnings.push(ServiceWarning::UnknownTargetPort {
                    namespace: service.namespace.clone(),
                    service: service.name.clone(),
                    port: sp.port,
                    name: sp.name.clone(),
                    target: match &sp.target_port {
                        TargetPort::Name(n) => n.clone(),
                        TargetPort::Number(n) => n.to_string(),
                    },
                    endpoint: ep.address.into(),
                }),
            }
        }
        backends.sort();
        backends.dedup();
        modules.insert(
            LoadBalancerKey {
                namespace: service.namespace.clone(),
                service: service.name.clone(),
                protocol: sp.protocol,
                port: sp.port,
            },
            LoadBalancer {
                vip,
                node_port: sp.node_port,
                affinity: service.affinity,
                backends,
            },
        );
    }
    warnings.sort_by_key(ToString::to_string);
    warnings.dedup();
    (modules, warnings)
}

/// What changes between two sets of load-balancer modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerDiff<A = Ipv4Addr> {
    /// Modules new or changed, as they are now.
    pub put: BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
    /// Modules gone.
    pub removed: Vec<LoadBalancerKey>,
}

impl<A> Default for LoadBalancerDiff<A> {
    fn default() -> Self {
        LoadBalancerDiff {
            put: BTreeMap::new(),
            removed: Vec::new(),
        }
    }
}

impl<A: Clone> LoadBalancerDiff<A> {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.put.is_empty() && self.removed.is_empty()
    }

    /// Apply to `modules`.
    pub fn apply(&self, modules: &mut BTreeMap<LoadBalancerKey, LoadBalancer<A>>) {
        for key in &self.removed {
            modules.remove(key);
        }
        for (key, lb) in &self.put {
            modules.insert(key.clone(), lb.clone());
        }
    }
}

/// The difference from `old` to `new`: only what changed.
pub fn diff_load_balancers<A: Clone + PartialEq>(
    old: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
    new: &BTreeMap<LoadBalancerKey, LoadBalancer<A>>,
) -> LoadBalancerDiff<A> {
    LoadBalancerDiff {
        put: new
            .iter()
            .filter(|(k, lb)| old.get(*k) != Some(*lb))
            .map(|(k, lb)| (k.clone(), lb.clone()))
            .collect(),
        removed: old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect(),
    }
}
