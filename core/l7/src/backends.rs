//! Backends to addresses: Services, EndpointSlices and Secrets indexed by namespace and name,
//! and the pools built from them.
//!
//! A backend's `service.port.number` / `name` selects a Service port by `port` or `name` (a
//! Service needs nothing but `spec.ports`); the members are the addresses of the ready (or
//! readiness-unknown) endpoints of the EndpointSlices labelled `kubernetes.io/service-name` with
//! the Service's name in the same namespace, on the slice port with the same name as the
//! Service port.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};

use crate::model::{Member, Pool};
use crate::objects::{EndpointSliceBody, IntOrString, SecretBody, ServiceSpec};

/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Services, slices and secrets of one source, by namespace and name.
#[derive(Debug, Default)]
pub struct Backends {
    services: HashMap<(String, String), ServiceSpec>,
    slices: HashMap<(String, String), Vec<EndpointSliceBody>>,
    secrets: HashMap<(String, String), SecretBody>,
}

/// How a backend names a Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    /// `port.number`.
    Number(i64),
    /// `port.name`.
    Name(String),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(name) => f.write_str(name),
        }
    }
}

fn same_name(a: Option<&str>, b: Option<&str>) -> bool {
    a.unwrap_or_default() == b.unwrap_or_default()
}

impl Backends {
    /// Adds a Service.
    pub fn add_service(&mut self, namespace: &str, name: &str, spec: ServiceSpec) {
        self.services
            .insert((namespace.to_owned(), name.to_owned()), spec);
    }

    /// Adds an EndpointSlice for the Service `service`.
    pub fn add_slice(&mut self, namespace: &str, service: &str, slice: EndpointSliceBody) {
        self.slices
            .entry((namespace.to_owned(), service.to_owned()))
            .or_default()
            .push(slice);
    }

    /// Adds a Secret.
    pub fn add_secret(&mut self, namespace: &str, name: &str, secret: SecretBody) {
        self.secrets
            .insert((namespace.to_owned(), name.to_owned()), secret);
    }

    /// The Secret `namespace/name`.
    pub fn secret(&self, namespace: &str, name: &str) -> Option<&SecretBody> {
        self.secrets.get(&(namespace.to_owned(), name.to_owned()))
    }

    fn slices(&self, namespace: &str, service: &str) -> &[EndpointSliceBody] {
        self.slices
            .get(&(namespace.to_owned(), service.to_owned()))
            .map_or(&[], Vec::as_slice)
    }

    /// The ready addresses of `service`'s slices on the slice port chosen by `pick`.
    fn addresses(
        &self,
        namespace: &str,
        service: &str,
        pick: impl Fn(&EndpointSliceBody) -> Option<u16>,
    ) -> BTreeSet<SocketAddr> {
        let mut out = BTreeSet::new();
        for slice in self.slices(namespace, service) {
            if slice.address_type.as_deref() == Some("FQDN") {
                continue;
            }
            let Some(port) = pick(slice) else { continue };
            for endpoint in &slice.endpoints {
                let ready = endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or(true);
                if !ready {
                    continue;
                }
                for address in &endpoint.addresses {
                    if let Ok(ip) = address.parse::<IpAddr>() {
                        out.insert(SocketAddr::new(ip, port));
                    }
                }
            }
        }
        out
    }

    /// The pool `<namespace>/<service>:<port>` for an Ingress backend, with a warning when the
    /// Service or its port is missing (the pool is then empty: 503).
    pub fn service_pool(
        &self,
        namespace: &str,
        service: &str,
        port: &PortRef,
    ) -> (Pool, Option<String>) {
        let id = format!("{namespace}/{service}:{port}");
        let mut pool = Pool {
            id,
            ..Pool::default()
        };
        let Some(spec) = self
            .services
            .get(&(namespace.to_owned(), service.to_owned()))
        else {
            return (
                pool,
                Some(format!(
                    "Service {namespace}/{service} not found: 503 for its paths"
                )),
            );
        };
        let Some(service_port) = spec.ports.iter().find(|p| match port {
            PortRef::Number(n) => p.port == *n,
            PortRef::Name(name) => p.name.as_deref() == Some(name.as_str()),
        }) else {
            return (
                pool,
                Some(format!(
                    "Service {namespace}/{service} has no port {port}: 503 for its paths"
                )),
            );
        };
        let wanted = service_port.name.as_deref();
        let addresses = self.addresses(namespace, service, |slice| {
            slice
                .ports
                .iter()
                .find(|p| same_name(p.name.as_deref(), wanted))
                .and_then(|p| p.port)
                .and_then(|p| u16::try_from(p).ok())
        });
        pool.members = addresses
            .into_iter()
            .map(|address| Member { address, weight: 1 })
            .collect();
        (pool, None)
    }

    /// The ready addresses of `service` on the endpoint port `target` (by slice port name or
    /// number; `None` = each slice's first port), for a Route backend.
    pub fn route_addresses(
        &self,
        namespace: &str,
        service: &str,
        target: Option<&IntOrString>,
    ) -> BTreeSet<SocketAddr> {
        self.addresses(namespace, service, |slice| {
            let port = match target {
                None => slice.ports.first(),
                Some(IntOrString::Int(n)) => slice.ports.iter().find(|p| p.port == Some(*n)),
                Some(IntOrString::String(name)) => slice
                    .ports
                    .iter()
                    .find(|p| p.name.as_deref() == Some(name.as_str())),
            };
            port.and_then(|p| p.port)
                .and_then(|p| u16::try_from(p).ok())
        })
    }

    /// The Service `namespace/name`, if known.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&ServiceSpec> {
        self.services.get(&(namespace.to_owned(), name.to_owned()))
    }

    /// Whether a Service `namespace/name` or slices for it exist.
    pub fn knows_service(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_owned(), name.to_owned());
        self.services.contains_key(&key) || self.slices.contains_key(&key)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Members for weighted services: each service with weight `w` gets `w / Σw` of the requests
/// (services without a ready address left out), split evenly over its addresses. Weights are
/// scaled to integers by the least common multiple of the address counts.
pub fn weighted_members(services: &[(u32, BTreeSet<SocketAddr>)]) -> Vec<Member> {
    let lcm = services
        .iter()
        .filter(|(weight, addresses)| *weight > 0 && !addresses.is_empty())
        .map(|(_, addresses)| addresses.len() as u64)
        .fold(1u64, |acc, n| (acc / gcd(acc, n)).saturating_mul(n));
    let mut members: Vec<Member> = Vec::new();
    for (weight, addresses) in services {
        if addresses.is_empty() {
            continue;
        }
        let each = u64::from(*weight).saturating_mul(lcm) / addresses.len() as u64;
        let each = u32::try_from(each).unwrap_or(u32::MAX);
        for address in addresses {
            match members.iter_mut().find(|m| m.address == *address) {
                Some(member) => member.weight = member.weight.saturating_add(each),
                None => members.push(Member {
                    address: *address,
                    weight: each,
                }),
            }
        }
    }
    members
}
