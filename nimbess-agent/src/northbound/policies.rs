//! NetworkPolicies, Pods and Namespaces (wire types) read into the pipeline
//! model's policy types. A policy that cannot be read (an invalid CIDR, a
//! selector operator Kubernetes does not have, a port name that is no
//! IANA service name) is a warning naming it and the field, and is skipped
//! whole: skipping part of it could allow more than it says. An IPv6
//! `ipBlock` is read like an IPv4 one: it holds no IPv4 peer, so on the
//! agent's IPv4 data plane its rule admits nothing, and its policy selects
//! and isolates the pods it names (skipped, it would leave them open).
//!
//! Pods are placed at addresses by the ports: a Pod object is at the
//! addresses of the ports whose runtime named it (`K8S_POD_NAMESPACE` and
//! `K8S_POD_NAME` in `CNI_ARGS`, recorded on the port), whatever its
//! `status.podIP` says. A Pod no port names (one of another host outside a
//! fabric, or one whose runtime named no pod) is at its `status.podIP`,
//! unless a port there names another pod.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy as KubePolicy, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nephrite_pipeline::{
    IpCidr, NamedPort, NetworkPolicy, Peer, PodName, PolicyNamespace, PolicyPod, PolicyRule,
    PortRange, Protocol, Requirement, RulePort, Selector, SelectorOp,
};

use super::objects::object_name;

pub(super) fn selector(s: &LabelSelector, field: &str) -> Result<Selector, String> {
    let mut out = Selector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        expressions: Vec::new(),
    };
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let op = match e.operator.as_str() {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(format!(
                    "{field}.matchExpressions[{i}].operator {other:?} is not In, NotIn, Exists or DoesNotExist"
                ));
            }
        };
        out.expressions.push(Requirement {
            key: e.key.clone(),
            op,
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

fn cidr(text: &str, field: &str) -> Result<IpCidr, String> {
    text.parse::<IpCidr>().map_err(|_| {
        let family = if text.contains(':') { "IPv6" } else { "IPv4" };
        format!("{field} {text:?} is not an {family} CIDR")
    })
}

/// An `ipBlock` of either family; its excepts must be of the block's.
fn block(block: &IPBlock, field: &str) -> Result<Peer, String> {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    let at = format!("{field}.ipBlock.cidr");
    let cidr = cidr(&block.cidr, &at)?;
    for (i, e) in block.except.iter().flatten().enumerate() {
        let here = format!("{field}.ipBlock.except[{i}]");
        match (cidr, self::cidr(e, &here)?) {
            (IpCidr::V4(_), IpCidr::V4(e)) => v4.push(e),
            (IpCidr::V6(_), IpCidr::V6(e)) => v6.push(e),
            _ => {
                return Err(format!(
                    "{here} {e:?} is not of the family of {at} {:?}",
                    block.cidr
                ));
            }
        }
    }
    Ok(match cidr {
        IpCidr::V4(cidr) => Peer::Block { cidr, except: v4 },
        IpCidr::V6(cidr) => Peer::BlockV6 { cidr, except: v6 },
    })
}

fn peer(p: &NetworkPolicyPeer, field: &str) -> Result<Peer, String> {
    if let Some(b) = &p.ip_block {
        return block(b, field);
    }
    Ok(Peer::Pods {
        namespace_selector: p
            .namespace_selector
            .as_ref()
            .map(|s| selector(s, &format!("{field}.namespaceSelector")))
            .transpose()?,
        pod_selector: p
            .pod_selector
            .as_ref()
            .map(|s| selector(s, &format!("{field}.podSelector")))
            .transpose()?,
    })
}

fn protocol(p: Option<&str>, field: &str) -> Result<Protocol, String> {
    match p.unwrap_or("TCP") {
        "TCP" => Ok(Protocol::Tcp),
        "UDP" => Ok(Protocol::Udp),
        "SCTP" => Ok(Protocol::Sctp),
        other => Err(format!(
            "{field}.protocol {other:?} is not TCP, UDP or SCTP"
        )),
    }
}

/// An IANA service name, as Kubernetes requires of a port's name: at most
/// 15 lowercase letters, digits and single inner hyphens, one letter at least.
fn is_service_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

fn port(p: &NetworkPolicyPort, field: &str) -> Result<RulePort, String> {
    let protocol = protocol(p.protocol.as_deref(), field)?;
    let number = |n: i32, what: &str| {
        u16::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{field}.{what} {n} is not a port number"))
    };
    let range = match &p.port {
        None => None,
        Some(IntOrString::Int(n)) => {
            let lo = number(*n, "port")?;
            let hi = p
                .end_port
                .map(|e| number(e, "endPort"))
                .transpose()?
                .unwrap_or(lo);
            if hi < lo {
                return Err(format!("{field}.endPort {hi} is below port {lo}"));
            }
            Some((lo, hi))
        }
        Some(IntOrString::String(name)) => {
            if !is_service_name(name) {
                return Err(format!(
                    "{field}.port {name:?} is neither a port number nor a port name"
                ));
            }
            if let Some(end) = p.end_port {
                return Err(format!(
                    "{field}.endPort {end} needs a numeric port, not the name {name:?}"
                ));
            }
            return Ok(RulePort::Named {
                protocol,
                name: name.clone(),
            });
        }
    };
    Ok(RulePort::Numbers(PortRange { protocol, range }))
}

fn rules<R>(
    list: Option<&Vec<R>>,
    field: &str,
    parts: impl Fn(
        &R,
    ) -> (
        Option<&Vec<NetworkPolicyPeer>>,
        Option<&Vec<NetworkPolicyPort>>,
    ),
) -> Result<Vec<PolicyRule>, String> {
    let mut out = Vec::new();
    for (i, r) in list.into_iter().flatten().enumerate() {
        let (peers, ports) = parts(r);
        let mut rule = PolicyRule {
            peers: Vec::new(),
            ports: Vec::new(),
        };
        for (j, p) in peers.into_iter().flatten().enumerate() {
            rule.peers.push(peer(p, &format!("{field}[{i}] peer {j}"))?);
        }
        for (j, p) in ports.into_iter().flatten().enumerate() {
            rule.ports
                .push(port(p, &format!("{field}[{i}].ports[{j}]"))?);
        }
        out.push(rule);
    }
    Ok(out)
}

/// A NetworkPolicy as the translation needs it.
///
/// # Errors
/// A field that cannot be read, naming the policy and the field.
pub fn policy(p: &KubePolicy) -> Result<NetworkPolicy, String> {
    let name = object_name(&p.metadata);
    let spec = p.spec.clone().unwrap_or_default();
    let at = |e: String| format!("networkpolicy {name}: {e}");
    let pod_selector =
        selector(&spec.pod_selector.unwrap_or_default(), "spec.podSelector").map_err(at)?;
    let types: Vec<String> = match &spec.policy_types {
        Some(t) => t.clone(),
        None if spec.egress.is_some() => vec!["Ingress".into(), "Egress".into()],
        None => vec!["Ingress".into()],
    };
    if let Some(t) = types.iter().find(|t| *t != "Ingress" && *t != "Egress") {
        return Err(at(format!(
            "spec.policyTypes {t:?} is not Ingress or Egress"
        )));
    }
    let ingress = types
        .iter()
        .any(|t| t == "Ingress")
        .then(|| {
            rules(spec.ingress.as_ref(), "spec.ingress", |r| {
                (r.from.as_ref(), r.ports.as_ref())
            })
        })
        .transpose()
        .map_err(at)?;
    let egress = types
        .iter()
        .any(|t| t == "Egress")
        .then(|| {
            rules(spec.egress.as_ref(), "spec.egress", |r| {
                (r.to.as_ref(), r.ports.as_ref())
            })
        })
        .transpose()
        .map_err(at)?;
    Ok(NetworkPolicy {
        namespace: p
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: p.metadata.name.clone().unwrap_or_default(),
        pod_selector,
        ingress,
        egress,
    })
}

/// A Pod object as policies need it, before it is placed at addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodObject {
    /// Namespace and name.
    pub pod: PodName,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `status.podIP`, when it is an IPv4 address.
    pub pod_ip: Option<Ipv4Addr>,
    /// The containers' named ports.
    pub ports: Vec<NamedPort>,
}

/// A Pod object read: labels, `status.podIP`, the containers' named ports
/// (a port whose protocol or number cannot be read is left out: no policy
/// can name it).
pub fn pod(p: &Pod) -> PodObject {
    let pod_ip = p
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_ref())
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
    let mut ports = Vec::new();
    for c in p.spec.iter().flat_map(|s| &s.containers) {
        for cp in c.ports.iter().flatten() {
            let (Some(name), Ok(protocol), Ok(port)) = (
                cp.name.as_ref().filter(|n| !n.is_empty()),
                protocol(cp.protocol.as_deref(), "containerPort"),
                u16::try_from(cp.container_port),
            ) else {
                continue;
            };
            if port > 0 {
                ports.push(NamedPort {
                    name: name.clone(),
                    protocol,
                    port,
                });
            }
        }
    }
    ports.sort();
    ports.dedup();
    PodObject {
        pod: PodName {
            namespace: p
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: p.metadata.name.clone().unwrap_or_default(),
        },
        labels: p.metadata.labels.clone().unwrap_or_default(),
        pod_ip,
        ports,
    }
}

/// The pods at their addresses: each Pod at the addresses of the ports
/// `owners` records for it (one [`PolicyPod`] per address); a Pod no port
/// names at its `status.podIP`, unless a port there names another pod; a
/// Pod with neither is not policed (it has no address yet).
pub fn place(pods: &[PodObject], owners: &[(Option<PodName>, Ipv4Addr)]) -> Vec<PolicyPod> {
    let mut by_pod: BTreeMap<&PodName, Vec<Ipv4Addr>> = BTreeMap::new();
    let mut named_at: BTreeMap<Ipv4Addr, Vec<&PodName>> = BTreeMap::new();
    for (owner, address) in owners {
        if let Some(owner) = owner {
            by_pod.entry(owner).or_default().push(*address);
            named_at.entry(*address).or_default().push(owner);
        }
    }
    let mut out = Vec::new();
    for p in pods {
        let addresses: Vec<Ipv4Addr> = match by_pod.get(&p.pod) {
            Some(addresses) => addresses.clone(),
            None => p
                .pod_ip
                .filter(|ip| named_at.get(ip).is_none_or(|names| names.contains(&&p.pod)))
                .into_iter()
                .collect(),
        };
        for address in addresses {
            out.push(PolicyPod {
                namespace: p.pod.namespace.clone(),
                name: p.pod.name.clone(),
                labels: p.labels.clone(),
                address,
                ports: p.ports.clone(),
            });
        }
    }
    out
}

/// A namespace, with the `kubernetes.io/metadata.name` label the API
/// server sets.
pub fn namespace(n: &Namespace) -> PolicyNamespace {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = n.metadata.labels.clone().unwrap_or_default();
    labels.insert("kubernetes.io/metadata.name".into(), name.clone());
    PolicyNamespace { name, labels }
}
