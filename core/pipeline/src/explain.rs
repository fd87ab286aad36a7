//! "Why can (not) A reach B?" answered from the model: a connection from a
//! pod to a pod or an address, on a protocol and port, followed the way the
//! data plane takes it —
//!
//! 1. a Service's virtual IP and port is translated (DNAT) to each of its
//!    ready backends (one path per backend; none: refused);
//! 2. the destination must be routed: an address on a pod network must be
//!    a pod's, an address in the Service CIDR must be a Service's;
//! 3. the source's egress and the destination's ingress are judged by
//!    every tier of policy ([`crate::decide_connection`]);
//! 4. directly into another pod network only what the destination's
//!    ingress explicitly allows crosses (a Service opens the crossing for
//!    its own connections, [`crate::tiered_connection_allowed`]).
//!
//! Each path names the verdict and the one thing that decides it, plus
//! the trail (both policy sides) that led there; the whole is a value with
//! a text form ([`std::fmt::Display`]) and a JSON form (serde).

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::egress::{Egress, EgressPolicy};
use crate::module::PodName;
use crate::policy::{PolicyNamespace, PolicyPod};
use crate::service::{LoadBalancer, LoadBalancerKey, Protocol};
use crate::verdict::{Decider, Direction, PolicySet, SideVerdict, decide_connection};

#[cfg(test)]
mod tests;

/// A source or destination as a user names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionEnd {
    /// A pod by namespace and name.
    Pod(PodName),
    /// An address (a pod's, a Service's, or any other).
    Address(Ipv4Addr),
}

impl FromStr for ConnectionEnd {
    type Err = Error;

    /// An IPv4 address, `namespace/name`, or `name` (namespace `default`).
    fn from_str(s: &str) -> Result<Self, Error> {
        if let Ok(address) = s.parse() {
            return Ok(ConnectionEnd::Address(address));
        }
        let (namespace, name) = s.split_once('/').unwrap_or(("default", s));
        if namespace.is_empty() || name.is_empty() || name.contains('/') {
            return Err(Error::InvalidEndpoint(s.to_string()));
        }
        Ok(ConnectionEnd::Pod(PodName {
            namespace: namespace.into(),
            name: name.into(),
        }))
    }
}

/// What the model knows of a cluster, as `explain` reads it.
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a> {
    /// The pod networks, the Service CIDR and masquerade.
    pub egress: &'a EgressPolicy,
    /// Every pod of the cluster.
    pub pods: &'a [PolicyPod],
    /// Each pod's network, by the pod's address.
    pub pod_networks: &'a BTreeMap<Ipv4Addr, String>,
    /// The namespaces.
    pub namespaces: &'a [PolicyNamespace],
    /// Every policy.
    pub policies: &'a PolicySet,
    /// The Services' load balancers.
    pub load_balancers: &'a BTreeMap<LoadBalancerKey, LoadBalancer>,
}

/// The connection asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainQuery {
    /// The pod opening the connection.
    pub source: ConnectionEnd,
    /// Where it goes.
    pub destination: ConnectionEnd,
    /// The protocol.
    pub protocol: Protocol,
    /// The destination port.
    pub port: u16,
}

/// A pod located.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodAt {
    /// Its name.
    pub pod: PodName,
    /// Its address.
    pub address: Ipv4Addr,
    /// Its network.
    pub network: String,
}

/// The Service a connection was addressed to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceHop {
    /// The Service.
    pub service: PodName,
    /// Its virtual IP.
    pub vip: Ipv4Addr,
    /// The port on it.
    pub port: u16,
    /// The ready backends (address, port) it translates to.
    pub backends: Vec<(Ipv4Addr, u16)>,
}

/// How a connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It reaches the destination.
    Allowed,
    /// Dropped by a policy or by the isolation between networks.
    Denied,
    /// Refused at once: a Service port without a ready backend.
    Refused,
    /// Nothing there to reach: no route.
    Unrouted,
    /// A Service's backends differ (only for a whole explanation).
    Mixed,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Allowed => "allowed",
            Verdict::Denied => "denied",
            Verdict::Refused => "refused",
            Verdict::Unrouted => "unrouted",
            Verdict::Mixed => "depends on the backend",
        })
    }
}

/// Where the source's packet is sent, by destination address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Route {
    /// On the source's own network.
    Local,
    /// On another pod network.
    OtherNetwork {
        /// That network.
        network: String,
    },
    /// In the Service CIDR.
    ServiceCidr,
    /// Out of the host.
    Outside {
        /// Behind the host's address.
        masqueraded: bool,
    },
}

/// The one thing that decides a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// A policy decision on one side: the rule that allowed or denied, or
    /// the NetworkPolicies' isolation.
    Policy {
        /// The side.
        direction: Direction,
        /// What decided it.
        decider: Decider,
    },
    /// Directly into another pod network and nothing on the destination's
    /// ingress explicitly allows it.
    NetworkIsolation {
        /// The source's network.
        from: String,
        /// The destination's network.
        to: String,
    },
    /// The Service port has no ready backend.
    NoEndpoints {
        /// The Service.
        service: PodName,
    },
    /// An address on a pod network that no pod holds.
    NoPod {
        /// The network.
        network: String,
    },
    /// An address in the Service CIDR that no Service serves on that
    /// protocol and port.
    NoService,
    /// No policy and no isolation stands in the way.
    Open,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Policy { direction, decider } => write!(f, "{direction}: {decider}"),
            Reason::NetworkIsolation { from, to } => write!(
                f,
                "isolation between networks {from} and {to} (no ingress rule of the destination allows it, and it is no Service's)"
            ),
            Reason::NoEndpoints { service } => {
                write!(f, "Service {service} has no ready endpoint on that port")
            }
            Reason::NoPod { network } => write!(f, "no pod has that address on network {network}"),
            Reason::NoService => f.write_str("no Service serves that address, protocol and port"),
            Reason::Open => f.write_str("no policy applies"),
        }
    }
}

/// One way the connection can go: to the destination itself, or to one
/// backend of a Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathVerdict {
    /// The address the packet is finally sent to.
    pub address: Ipv4Addr,
    /// The port there.
    pub port: u16,
    /// The pod at that address, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodName>,
    /// Where the source's packet is routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// How it ends.
    pub verdict: Verdict,
    /// What decides.
    pub decided_by: Reason,
    /// The source's egress, when judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<SideVerdict>,
    /// The destination's ingress, when judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<SideVerdict>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Explanation {
    /// The source pod.
    pub source: PodAt,
    /// The destination address as sent.
    pub destination: Ipv4Addr,
    /// The protocol.
    pub protocol: Protocol,
    /// The port.
    pub port: u16,
    /// The Service on the way, if the destination is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceHop>,
    /// One path, or one per backend of the Service.
    pub paths: Vec<PathVerdict>,
}

impl Explanation {
    /// The verdict of every path, or [`Verdict::Mixed`] when they differ.
    pub fn verdict(&self) -> Verdict {
        let mut verdicts = self.paths.iter().map(|p| p.verdict);
        let first = verdicts.next().unwrap_or(Verdict::Unrouted);
        if verdicts.all(|v| v == first) {
            first
        } else {
            Verdict::Mixed
        }
    }
}

fn find_pod<'a>(cluster: &ClusterView<'a>, endpoint: &ConnectionEnd) -> Option<&'a PolicyPod> {
    cluster.pods.iter().find(|p| match endpoint {
        ConnectionEnd::Pod(n) => p.namespace == n.namespace && p.name == n.name,
        ConnectionEnd::Address(a) => p.address == *a,
    })
}

fn pod_name(pod: &PolicyPod) -> PodName {
    PodName {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
    }
}

/// Explains `query` on `cluster`.
///
/// # Errors
/// [`Error::UnknownPod`] when the source is no pod, or the destination
/// names a pod that does not exist; [`Error::UnknownPodNetwork`] when the
/// source pod's network is not known.
pub fn explain(cluster: &ClusterView<'_>, query: &ExplainQuery) -> Result<Explanation, Error> {
    let src = find_pod(cluster, &query.source)
        .ok_or_else(|| Error::UnknownPod(endpoint_text(&query.source)))?;
    let network = cluster
        .pod_networks
        .get(&src.address)
        .ok_or_else(|| Error::UnknownPodNetwork(pod_name(src).to_string()))?;
    let destination = match &query.destination {
        ConnectionEnd::Address(a) => *a,
        ConnectionEnd::Pod(_) => {
            find_pod(cluster, &query.destination)
                .ok_or_else(|| Error::UnknownPod(endpoint_text(&query.destination)))?
                .address
        }
    };
    let (protocol, port) = (query.protocol, query.port);
    let lb = cluster
        .load_balancers
        .iter()
        .find(|(k, lb)| lb.vip == destination && k.protocol == protocol && k.port == port);
    let mut service = None;
    let paths = match lb {
        None => vec![path(
            cluster,
            src,
            network,
            destination,
            port,
            protocol,
            false,
        )],
        Some((key, lb)) => {
            let backends: Vec<(Ipv4Addr, u16)> = lb
                .backends
                .iter()
                .filter(|b| b.weight > 0)
                .map(|b| (b.address, b.port))
                .collect();
            let name = PodName {
                namespace: key.namespace.clone(),
                name: key.service.clone(),
            };
            let paths = if backends.is_empty() {
                vec![PathVerdict {
                    address: destination,
                    port,
                    pod: None,
                    route: Some(Route::ServiceCidr),
                    verdict: Verdict::Refused,
                    decided_by: Reason::NoEndpoints {
                        service: name.clone(),
                    },
                    egress: None,
                    ingress: None,
                }]
            } else {
                backends
                    .iter()
                    .map(|&(a, p)| path(cluster, src, network, a, p, protocol, true))
                    .collect()
            };
            service = Some(ServiceHop {
                service: name,
                vip: destination,
                port,
                backends,
            });
            paths
        }
    };
    Ok(Explanation {
        source: PodAt {
            pod: pod_name(src),
            address: src.address,
            network: network.clone(),
        },
        destination,
        protocol,
        port,
        service,
        paths,
    })
}

fn endpoint_text(e: &ConnectionEnd) -> String {
    match e {
        ConnectionEnd::Pod(n) => n.to_string(),
        ConnectionEnd::Address(a) => a.to_string(),
    }
}

/// One path from `src` (on `network`) to `address`:`port`, translated by
/// a Service when `via_service`.
fn path(
    cluster: &ClusterView<'_>,
    src: &PolicyPod,
    network: &str,
    address: Ipv4Addr,
    port: u16,
    protocol: Protocol,
    via_service: bool,
) -> PathVerdict {
    let dst_pod = cluster.pods.iter().find(|p| p.address == address);
    let dst_network = cluster
        .pod_networks
        .get(&address)
        .map(String::as_str)
        .or_else(|| cluster.egress.network_of(address))
        .unwrap_or_default()
        .to_string();
    let egress = cluster.egress.decide(network, address);
    let route = match egress {
        Egress::Local => Route::Local,
        Egress::Isolated => Route::OtherNetwork {
            network: dst_network.clone(),
        },
        Egress::Service => Route::ServiceCidr,
        Egress::Direct => Route::Outside { masqueraded: false },
        Egress::Masqueraded => Route::Outside { masqueraded: true },
    };
    let mut out = PathVerdict {
        address,
        port,
        pod: dst_pod.map(pod_name),
        route: Some(route),
        verdict: Verdict::Unrouted,
        decided_by: Reason::Open,
        egress: None,
        ingress: None,
    };
    let unrouted = match egress {
        Egress::Service => Some(Reason::NoService),
        Egress::Local | Egress::Isolated if dst_pod.is_none() => Some(Reason::NoPod {
            network: dst_network.clone(),
        }),
        _ => None,
    };
    if let Some(reason) = unrouted {
        out.decided_by = reason;
        return out;
    }
    let v = decide_connection(
        cluster.policies,
        cluster.pods,
        cluster.namespaces,
        src.address,
        address,
        protocol,
        port,
    );
    let policy = |side: &SideVerdict| Reason::Policy {
        direction: side.direction,
        decider: side.decided_by.clone(),
    };
    (out.verdict, out.decided_by) = if !v.egress.allowed {
        (Verdict::Denied, policy(&v.egress))
    } else if !v.ingress.allowed {
        (Verdict::Denied, policy(&v.ingress))
    } else if egress == Egress::Isolated && !via_service && !v.ingress.explicitly_allowed() {
        (
            Verdict::Denied,
            Reason::NetworkIsolation {
                from: network.to_string(),
                to: dst_network,
            },
        )
    } else if v.ingress.explicitly_allowed() {
        (Verdict::Allowed, policy(&v.ingress))
    } else if v.egress.explicitly_allowed() {
        (Verdict::Allowed, policy(&v.egress))
    } else {
        (Verdict::Allowed, Reason::Open)
    };
    out.egress = Some(v.egress);
    out.ingress = Some(v.ingress);
    out
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Local => f.write_str("on the source's network"),
            Route::OtherNetwork { network } => write!(f, "on network {network}"),
            Route::ServiceCidr => f.write_str("in the Service CIDR"),
            Route::Outside { masqueraded: true } => f.write_str("out of the host, masqueraded"),
            Route::Outside { masqueraded: false } => f.write_str("out of the host"),
        }
    }
}

fn side_line(f: &mut fmt::Formatter<'_>, who: &str, side: &SideVerdict) -> fmt::Result {
    let verdict = if side.allowed { "allowed" } else { "denied" };
    write!(
        f,
        "\n      {} of {who}: {verdict} by {}",
        side.direction, side.decided_by
    )?;
    if let Some(pass) = &side.passed_by {
        write!(f, " (handed on by {pass})")?;
    }
    Ok(())
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let protocol = match self.protocol {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        };
        write!(
            f,
            "{} ({} on {}) -> {} {protocol}/{}: {}",
            self.source.pod,
            self.source.address,
            self.source.network,
            self.destination,
            self.port,
            self.verdict()
        )?;
        if let Some(s) = &self.service {
            let backends: Vec<String> =
                s.backends.iter().map(|(a, p)| format!("{a}:{p}")).collect();
            let backends = if backends.is_empty() {
                "no ready backend".to_string()
            } else {
                backends.join(", ")
            };
            write!(
                f,
                "\n  Service {} DNAT {}:{} -> {backends}",
                s.service, s.vip, s.port
            )?;
        }
        for p in &self.paths {
            write!(f, "\n  -> {}:{}", p.address, p.port)?;
            if let Some(pod) = &p.pod {
                write!(f, " ({pod})")?;
            }
            if let Some(route) = &p.route {
                write!(f, " {route}")?;
            }
            write!(f, ": {} by {}", p.verdict, p.decided_by)?;
            let dst = p
                .pod
                .as_ref()
                .map_or_else(|| p.address.to_string(), ToString::to_string);
            if let Some(side) = &p.egress {
                side_line(f, &self.source.pod.to_string(), side)?;
            }
            if let Some(side) = &p.ingress {
                side_line(f, &dst, side)?;
            }
        }
        Ok(())
    }
}
