//! AdminNetworkPolicy and BaselineAdminNetworkPolicy
//! (`policy.networking.k8s.io/v1alpha1`, the network-policy-api project's
//! CRDs) as the API serves them, read into the pipeline's
//! [`nephrite_pipeline::AdminNetworkPolicy`] and
//! [`nephrite_pipeline::BaselineAdminNetworkPolicy`]. What cannot be read
//! (an unknown action, a peer by `nodes` or `networks`, which the model
//! does not hold, a field the API's schema refuses) is an error naming the
//! object and the field; that policy is skipped.
//!
//! The wire types are written here (k8s-openapi has none for CRDs) with
//! the `kube::Resource` a watcher and an Event need.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use nephrite_pipeline::{
    AdminAction, AdminNetworkPolicy as Anp, AdminPort, AdminRule, BaselineAction,
    BaselineAdminNetworkPolicy as Banp, PodSet, Protocol,
};
use serde::{Deserialize, Serialize};

use super::policies::selector;

/// The API group and version of both kinds.
pub const API_VERSION: &str = "policy.networking.k8s.io/v1alpha1";

/// `AdminNetworkPolicy` as served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdminNetworkPolicy {
    /// The object's metadata (cluster-scoped: no namespace).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: AdminSpec,
}

/// `BaselineAdminNetworkPolicy` as served.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineAdminNetworkPolicy {
    /// The object's metadata (cluster-scoped; the one BANP is `default`).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` (its `priority` is ignored: a BANP has none).
    #[serde(default)]
    pub spec: AdminSpec,
}

/// The `spec` of either kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminSpec {
    /// `priority` (ANP only).
    pub priority: Option<i64>,
    /// `subject`.
    pub subject: Option<Subject>,
    /// `ingress` rules, in order.
    #[serde(default)]
    pub ingress: Vec<Rule>,
    /// `egress` rules, in order.
    #[serde(default)]
    pub egress: Vec<Rule>,
}

/// A subject or a peer: exactly one of its fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `namespaces`.
    pub namespaces: Option<LabelSelector>,
    /// `pods`.
    pub pods: Option<PodsSelector>,
    /// `nodes` (egress peers only; not modelled).
    pub nodes: Option<serde_json::Value>,
    /// `networks` (egress peers only; not modelled).
    pub networks: Option<serde_json::Value>,
}

/// `pods`: a namespace selector and a pod selector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsSelector {
    /// `namespaceSelector`.
    #[serde(default)]
    pub namespace_selector: LabelSelector,
    /// `podSelector`.
    #[serde(default)]
    pub pod_selector: LabelSelector,
}

/// One ingress or egress rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// `name`.
    pub name: Option<String>,
    /// `action`: `Allow`, `Deny`, `Pass` (BANP: `Allow`, `Deny`).
    #[serde(default)]
    pub action: String,
    /// `from` (ingress).
    pub from: Option<Vec<Subject>>,
    /// `to` (egress).
    pub to: Option<Vec<Subject>>,
    /// `ports`.
    pub ports: Option<Vec<Port>>,
}

/// One entry of `ports`: exactly one of its fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// `portNumber`.
    pub port_number: Option<PortNumber>,
    /// `namedPort`.
    pub named_port: Option<String>,
    /// `portRange`.
    pub port_range: Option<PortRange>,
}

/// `portNumber`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortNumber {
    /// `protocol` (default TCP).
    pub protocol: Option<String>,
    /// `port`.
    pub port: i64,
}

/// `portRange`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortRange {
    /// `protocol` (default TCP).
    pub protocol: Option<String>,
    /// `start`.
    pub start: i64,
    /// `end`.
    pub end: i64,
}

macro_rules! cluster_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl ::kube::Resource for $ty {
            type DynamicType = ();
            type Scope = ::kube::core::ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("policy.networking.k8s.io")
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("v1alpha1")
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(API_VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

cluster_resource!(
    AdminNetworkPolicy,
    "AdminNetworkPolicy",
    "adminnetworkpolicies"
);
cluster_resource!(
    BaselineAdminNetworkPolicy,
    "BaselineAdminNetworkPolicy",
    "baselineadminnetworkpolicies"
);

fn pod_set(s: &Subject, field: &str) -> Result<PodSet, String> {
    let given = [
        s.namespaces.is_some(),
        s.pods.is_some(),
        s.nodes.is_some(),
        s.networks.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(format!(
            "{field}: exactly one of namespaces, pods, nodes, networks is required"
        ));
    }
    if let Some(ns) = &s.namespaces {
        return Ok(PodSet::Namespaces(selector(
            ns,
            &format!("{field}.namespaces"),
        )?));
    }
    if let Some(p) = &s.pods {
        return Ok(PodSet::Pods {
            namespace_selector: selector(
                &p.namespace_selector,
                &format!("{field}.pods.namespaceSelector"),
            )?,
            pod_selector: selector(&p.pod_selector, &format!("{field}.pods.podSelector"))?,
        });
    }
    let which = if s.nodes.is_some() {
        "nodes"
    } else {
        "networks"
    };
    Err(format!(
        "{field}.{which}: peers by {which} are not supported by this agent"
    ))
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

fn port_number(n: i64, field: &str) -> Result<u16, String> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("{field}: {n} is not a port number (1-65535)"))
}

fn port(p: &Port, field: &str) -> Result<AdminPort, String> {
    let given = [
        p.port_number.is_some(),
        p.named_port.is_some(),
        p.port_range.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(format!(
            "{field}: exactly one of portNumber, namedPort, portRange is required"
        ));
    }
    if let Some(n) = &p.port_number {
        let f = format!("{field}.portNumber");
        return Ok(AdminPort::Number {
            protocol: protocol(n.protocol.as_deref(), &f)?,
            port: port_number(n.port, &format!("{f}.port"))?,
        });
    }
    if let Some(name) = &p.named_port {
        if name.is_empty() {
            return Err(format!("{field}.namedPort is empty"));
        }
        return Ok(AdminPort::Named(name.clone()));
    }
    let r = p.port_range.as_ref().expect("one field is given");
    let f = format!("{field}.portRange");
    let (start, end) = (
        port_number(r.start, &format!("{f}.start"))?,
        port_number(r.end, &format!("{f}.end"))?,
    );
    if start > end {
        return Err(format!("{f}: start {start} is after end {end}"));
    }
    Ok(AdminPort::Range {
        protocol: protocol(r.protocol.as_deref(), &f)?,
        start,
        end,
    })
}

fn rules<A>(
    list: &[Rule],
    field: &str,
    egress: bool,
    action: impl Fn(&str) -> Option<A>,
    actions: &str,
) -> Result<Vec<AdminRule<A>>, String> {
    let mut out = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let action = action(&r.action)
            .ok_or_else(|| format!("{at}.action {:?} is not {actions}", r.action))?;
        let (peers_field, peers) = if egress {
            ("to", &r.to)
        } else {
            ("from", &r.from)
        };
        let peers = peers
            .iter()
            .flatten()
            .enumerate()
            .map(|(j, s)| pod_set(s, &format!("{at}.{peers_field}[{j}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let ports = r
            .ports
            .iter()
            .flatten()
            .enumerate()
            .map(|(j, p)| port(p, &format!("{at}.ports[{j}]")))
            .collect::<Result<Vec<_>, _>>()?;
        out.push(AdminRule {
            name: r.name.clone(),
            action,
            peers,
            ports,
        });
    }
    Ok(out)
}

fn subject(spec: &AdminSpec, what: &str) -> Result<PodSet, String> {
    let s = spec
        .subject
        .as_ref()
        .ok_or_else(|| format!("{what}: spec.subject is required"))?;
    pod_set(s, &format!("{what}: spec.subject"))
}

/// An AdminNetworkPolicy in the model's terms, validated.
///
/// # Errors
/// A field that cannot be read or that the API's schema refuses, naming
/// the policy and the field.
pub fn admin(p: &AdminNetworkPolicy) -> Result<Anp, String> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let what = format!("AdminNetworkPolicy {name}");
    let priority = p
        .spec
        .priority
        .ok_or_else(|| format!("{what}: spec.priority is required"))?;
    let priority = u16::try_from(priority)
        .map_err(|_| format!("{what}: spec.priority {priority} is not 0..=1000"))?;
    let action = |a: &str| match a {
        "Allow" => Some(AdminAction::Allow),
        "Deny" => Some(AdminAction::Deny),
        "Pass" => Some(AdminAction::Pass),
        _ => None,
    };
    let at = |dir: &str| format!("{what}: spec.{dir}");
    let anp = Anp {
        name,
        priority,
        subject: subject(&p.spec, &what)?,
        ingress: rules(
            &p.spec.ingress,
            &at("ingress"),
            false,
            action,
            "Allow, Deny or Pass",
        )?,
        egress: rules(
            &p.spec.egress,
            &at("egress"),
            true,
            action,
            "Allow, Deny or Pass",
        )?,
    };
    anp.validate().map_err(|e| e.to_string())?;
    Ok(anp)
}

/// A BaselineAdminNetworkPolicy in the model's terms, validated (its name
/// must be `default`).
///
/// # Errors
/// As [`admin`].
pub fn baseline(p: &BaselineAdminNetworkPolicy) -> Result<Banp, String> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let what = format!("BaselineAdminNetworkPolicy {name}");
    let action = |a: &str| match a {
        "Allow" => Some(BaselineAction::Allow),
        "Deny" => Some(BaselineAction::Deny),
        _ => None,
    };
    let at = |dir: &str| format!("{what}: spec.{dir}");
    let banp = Banp {
        name,
        subject: subject(&p.spec, &what)?,
        ingress: rules(
            &p.spec.ingress,
            &at("ingress"),
            false,
            action,
            "Allow or Deny",
        )?,
        egress: rules(&p.spec.egress, &at("egress"), true, action, "Allow or Deny")?,
    };
    banp.validate().map_err(|e| e.to_string())?;
    Ok(banp)
}

#[cfg(test)]
mod tests;
