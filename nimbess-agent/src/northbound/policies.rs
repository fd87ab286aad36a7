//! NetworkPolicies, Pods and Namespaces (wire types) read into the pipeline
//! model's policy types. A policy that cannot be read (an invalid CIDR, a
//! selector operator Kubernetes does not have, a named port) is a warning
//! naming it and the field, and is skipped whole: skipping part of it could
//! allow more than it says.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy as KubePolicy, NetworkPolicyPeer, NetworkPolicyPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nephrite_pipeline::{
    Ipv4Cidr, NetworkPolicy, Peer, PolicyNamespace, PolicyPod, PolicyRule, PortRange, Protocol,
    Requirement, Selector, SelectorOp,
};

use super::objects::object_name;

fn selector(s: &LabelSelector, field: &str) -> Result<Selector, String> {
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

fn cidr(text: &str, field: &str) -> Result<Ipv4Cidr, String> {
    text.parse::<Ipv4Cidr>()
        .map_err(|_| format!("{field} {text:?} is not an IPv4 CIDR"))
}

fn peer(p: &NetworkPolicyPeer, field: &str) -> Result<Peer, String> {
    if let Some(block) = &p.ip_block {
        let mut except = Vec::new();
        for (i, e) in block.except.iter().flatten().enumerate() {
            except.push(cidr(e, &format!("{field}.ipBlock.except[{i}]"))?);
        }
        return Ok(Peer::Block {
            cidr: cidr(&block.cidr, &format!("{field}.ipBlock.cidr"))?,
            except,
        });
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

fn port(p: &NetworkPolicyPort, field: &str) -> Result<PortRange, String> {
    let protocol = match p.protocol.as_deref().unwrap_or("TCP") {
        "TCP" => Protocol::Tcp,
        "UDP" => Protocol::Udp,
        "SCTP" => Protocol::Sctp,
        other => {
            return Err(format!(
                "{field}.protocol {other:?} is not TCP, UDP or SCTP"
            ));
        }
    };
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
            return Err(format!(
                "{field}.port {name:?}: named ports are not supported"
            ));
        }
    };
    Ok(PortRange { protocol, range })
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

/// A pod with an IPv4 address (`status.podIP`); others are not policed.
pub fn pod(p: &Pod) -> Option<PolicyPod> {
    let address = p
        .status
        .as_ref()?
        .pod_ip
        .as_ref()?
        .parse::<Ipv4Addr>()
        .ok()?;
    Some(PolicyPod {
        namespace: p
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: p.metadata.name.clone().unwrap_or_default(),
        labels: p.metadata.labels.clone().unwrap_or_default(),
        address,
    })
}

/// A namespace, with the `kubernetes.io/metadata.name` label the API
/// server sets.
pub fn namespace(n: &Namespace) -> PolicyNamespace {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = n.metadata.labels.clone().unwrap_or_default();
    labels.insert("kubernetes.io/metadata.name".into(), name.clone());
    PolicyNamespace { name, labels }
}
