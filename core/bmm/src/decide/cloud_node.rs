//! The cloud-controller-manager's node decisions, as Kubernetes' cloud-provider framework
//! defines the duties: *node initialization* (a Node started with `--cloud-provider=external`
//! carries the `uninitialized` taint until the provider has set its provider ID, addresses and
//! topology labels) and *node lifecycle* (the `shutdown` taint while the instance is down, and
//! deletion of the Node once its instance no longer exists).
//!
//! The rules that make it safe, checked by property tests:
//! - a Node is deleted only when the API answered 404 for the instance its provider ID names,
//!   in a site the API knows; never on a 5xx, a timeout, an auth failure or a missing match;
//! - the `uninitialized` taint goes only in the same change that leaves every field set
//!   (provider ID, at least one IP address, region, zone and instance type);
//! - deciding again on the Node as the changes left it changes nothing (initialization is
//!   idempotent).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::ProviderId;
use crate::cloud::CloudInstance;

/// `topology.kubernetes.io/region`: the site's name.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// `topology.kubernetes.io/zone`: the zone configured for the site, else its name.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// `node.kubernetes.io/instance-type`: the instance type's name.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// The taint a kubelet started with `--cloud-provider=external` registers its Node with.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The taint a Node carries while its instance is powered off or rebooting.
pub const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// The effect of [`SHUTDOWN_TAINT`], as the upstream node-lifecycle controller sets it.
pub const SHUTDOWN_EFFECT: &str = "NoSchedule";

/// A Node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Taint {
    /// Its key.
    pub key: String,
    /// Its value, if any.
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A Node address (`InternalIP`, `ExternalIP`, `Hostname`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeAddress {
    /// Its type.
    pub type_: String,
    /// The address.
    pub address: String,
}

impl NodeAddress {
    fn new(type_: &str, address: impl Into<String>) -> NodeAddress {
        NodeAddress {
            type_: type_.to_string(),
            address: address.into(),
        }
    }

    fn is_ip(&self) -> bool {
        self.type_ == "InternalIP" || self.type_ == "ExternalIP"
    }
}

/// The parts of a Node these decisions read and write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.addresses`.
    pub addresses: Vec<NodeAddress>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
}

impl NodeView {
    /// Whether it carries the `uninitialized` taint.
    pub fn uninitialized(&self) -> bool {
        self.taints.iter().any(|t| t.key == UNINITIALIZED_TAINT)
    }
}

/// What a Node's provider ID says about where to look for its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeTarget {
    /// A `nvidia-bmm://` ID: look the instance up by id.
    ById(ProviderId),
    /// No provider ID on an uninitialized Node: find its instance by name or address.
    Search,
    /// Another provider's ID, or an initialized Node without one: not ours, no API call.
    NotOurs,
    /// A `nvidia-bmm` scheme with a shape that cannot be read: leave it, say why once.
    Malformed(String),
}

/// Where to look for a Node's instance.
pub fn node_target(node: &NodeView) -> NodeTarget {
    match node.provider_id.as_deref().map(str::trim) {
        None | Some("") if node.uninitialized() => NodeTarget::Search,
        None | Some("") => NodeTarget::NotOurs,
        Some(id) => match id.parse::<ProviderId>() {
            Ok(id) => NodeTarget::ById(id),
            Err(crate::ProviderIdError::Shape(_)) => NodeTarget::Malformed(format!(
                "provider ID {id:?} is not {}://<site-id>/<instance-id>",
                crate::provider_id::SCHEME
            )),
            Err(crate::ProviderIdError::Scheme(_)) => NodeTarget::NotOurs,
        },
    }
}

/// The instance of a Node that has no provider ID: the one named like the Node, else the one
/// sole instance holding one of the Node's IP addresses. Several candidates by address match
/// none (guessing could take another Node's instance).
pub fn match_instance<'a>(
    node: &NodeView,
    instances: &'a [CloudInstance],
) -> Option<&'a CloudInstance> {
    if let Some(named) = instances.iter().find(|i| i.name == node.name) {
        return Some(named);
    }
    let ips: Vec<&str> = node
        .addresses
        .iter()
        .filter(|a| a.is_ip())
        .map(|a| a.address.as_str())
        .collect();
    let mut by_address = instances
        .iter()
        .filter(|i| i.addresses.iter().any(|a| ips.contains(&a.as_str())));
    match (by_address.next(), by_address.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// Whether the instance's machine is powered, as far as the API let us see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// Powered on.
    On,
    /// Powered off.
    Off,
    /// Not known (no tray listed, or the caller may not read trays).
    Unknown,
}

/// The site an instance is in, as the Node's topology labels name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteView<'a> {
    /// Its id (in the provider ID).
    pub id: &'a str,
    /// Its name (the region).
    pub name: &'a str,
    /// The zone configured for it; its name when none is.
    pub zone: Option<&'a str>,
}

/// What looking for a Node's instance gave.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeLookup<'a> {
    /// The instance.
    Found {
        /// The instance.
        instance: &'a CloudInstance,
        /// Its site.
        site: SiteView<'a>,
        /// Its instance type's name, when known.
        instance_type: Option<&'a str>,
        /// Its machine's power.
        power: Power,
    },
    /// The API answered 404 for the instance the provider ID names, in a site it knows.
    NotFound,
    /// The provider ID names a site the API does not know (or not the instance's site).
    OtherSite {
        /// The site the provider ID names.
        named: &'a str,
    },
    /// No provider ID, and no instance of the tenant has the Node's name or addresses.
    NoMatch,
    /// The API could not say (5xx, timeout, auth failure, …), with why.
    Unavailable(&'a str),
}

/// An Event to record on the Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEvent {
    /// Its reason (CamelCase).
    pub reason: &'static str,
    /// What happened, for a person.
    pub message: String,
}

/// Changes to write to a Node; empty fields change nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeChanges {
    /// `spec.providerID` to set.
    pub provider_id: Option<String>,
    /// Labels to set (others are left alone).
    pub labels: BTreeMap<String, String>,
    /// `status.addresses` to write.
    pub addresses: Option<Vec<NodeAddress>>,
    /// `spec.taints` to write (the whole list).
    pub taints: Option<Vec<Taint>>,
}

impl NodeChanges {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.provider_id.is_none()
            && self.labels.is_empty()
            && self.addresses.is_none()
            && self.taints.is_none()
    }

    /// The Node as these changes leave it.
    pub fn apply_to(&self, node: &mut NodeView) {
        if let Some(id) = &self.provider_id {
            node.provider_id = Some(id.clone());
        }
        node.labels
            .extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(a) = &self.addresses {
            node.addresses = a.clone();
        }
        if let Some(t) = &self.taints {
            node.taints = t.clone();
        }
    }
}

/// How the Node stands after the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOutcome {
    /// Everything is set (or the Node goes): look again at the resync.
    Steady,
    /// Something is not known yet (no addresses, no match): look again soon.
    Pending,
    /// The API failed: look again after a backoff.
    Unreachable,
    /// Not ours or unreadable: look again only when the Node changes.
    Ignored,
}

/// What to do with one Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudNodeDecision {
    /// What to write.
    pub changes: NodeChanges,
    /// Delete the Node (its instance is gone).
    pub delete: bool,
    /// An Event to record.
    pub event: Option<NodeEvent>,
    /// What comes next.
    pub outcome: NodeOutcome,
}

impl CloudNodeDecision {
    fn leave(outcome: NodeOutcome, event: Option<NodeEvent>) -> CloudNodeDecision {
        CloudNodeDecision {
            changes: NodeChanges::default(),
            delete: false,
            event,
            outcome,
        }
    }
}

/// Event reasons.
pub mod event_reason {
    /// No instance matched an uninitialized Node without a provider ID.
    pub const INSTANCE_NOT_FOUND: &str = "InstanceNotFound";
    /// The provider ID cannot be read.
    pub const MALFORMED_PROVIDER_ID: &str = "MalformedProviderID";
    /// The provider ID names a site the API does not know.
    pub const OTHER_SITE: &str = "ProviderIDInOtherSite";
    /// The instance is found but some field is not known yet.
    pub const WAITING_FOR_INSTANCE: &str = "WaitingForInstance";
    /// The API failed.
    pub const LOOKUP_FAILED: &str = "InstanceLookupFailed";
    /// The Node is deleted because its instance is gone.
    pub const DELETING_NODE: &str = "DeletingNode";
}

/// Whether an address is private (RFC 1918, shared CGNAT space, unique local or link-local).
fn is_private(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_private() || v4.is_link_local() || (o[0] == 100 && (o[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
    }
}

/// A Node's addresses from its instance: each interface address as `InternalIP` (private)
/// or `ExternalIP` (anything else), then the instance name as `Hostname`. Text that is not
/// an IP address is skipped.
pub fn node_addresses(instance: &CloudInstance) -> Vec<NodeAddress> {
    let mut out: Vec<NodeAddress> = Vec::new();
    for a in &instance.addresses {
        let Ok(ip) = a.trim().parse::<IpAddr>() else {
            continue;
        };
        let type_ = if is_private(&ip) {
            "InternalIP"
        } else {
            "ExternalIP"
        };
        let address = NodeAddress::new(type_, ip.to_string());
        if !out.contains(&address) {
            out.push(address);
        }
    }
    out.push(NodeAddress::new("Hostname", instance.name.clone()));
    out
}

/// Whether an instance in this state and power is down (the Node gets the shutdown taint).
pub fn is_down(status: &str, power: Power) -> bool {
    power == Power::Off || status == "Rebooting"
}

/// Decides what to do with one Node from what looking for its instance gave.
pub fn decide_cloud_node(node: &NodeView, lookup: &NodeLookup<'_>) -> CloudNodeDecision {
    let event = |reason, message: String| Some(NodeEvent { reason, message });
    match lookup {
        NodeLookup::NotFound => CloudNodeDecision {
            changes: NodeChanges::default(),
            delete: true,
            event: event(
                event_reason::DELETING_NODE,
                format!("the instance of Node {} no longer exists", node.name),
            ),
            outcome: NodeOutcome::Steady,
        },
        NodeLookup::OtherSite { named } => CloudNodeDecision::leave(
            NodeOutcome::Ignored,
            event(
                event_reason::OTHER_SITE,
                format!(
                    "the provider ID names site {named}, which this org's API does not know or the instance is not in"
                ),
            ),
        ),
        NodeLookup::NoMatch => CloudNodeDecision::leave(
            NodeOutcome::Pending,
            event(
                event_reason::INSTANCE_NOT_FOUND,
                format!(
                    "no instance of the tenant is named {} or holds one of its addresses",
                    node.name
                ),
            ),
        ),
        NodeLookup::Unavailable(why) => CloudNodeDecision::leave(
            NodeOutcome::Unreachable,
            event(event_reason::LOOKUP_FAILED, why.to_string()),
        ),
        NodeLookup::Found {
            instance,
            site,
            instance_type,
            power,
        } => initialize(node, instance, *site, *instance_type, *power),
    }
}

fn initialize(
    node: &NodeView,
    instance: &CloudInstance,
    site: SiteView<'_>,
    instance_type: Option<&str>,
    power: Power,
) -> CloudNodeDecision {
    let mut changes = NodeChanges::default();
    let provider_id = ProviderId::new(site.id, instance.id.clone());
    let has_id = node
        .provider_id
        .as_deref()
        .and_then(|p| p.parse::<ProviderId>().ok())
        .is_some_and(|p| p == provider_id);
    if !has_id {
        changes.provider_id = Some(provider_id.to_string());
    }
    let mut labels = vec![
        (REGION_LABEL, site.name),
        (ZONE_LABEL, site.zone.unwrap_or(site.name)),
    ];
    if let Some(t) = instance_type {
        labels.push((INSTANCE_TYPE_LABEL, t));
    }
    for (k, v) in labels {
        if node.labels.get(k).map(String::as_str) != Some(v) {
            changes.labels.insert(k.to_string(), v.to_string());
        }
    }
    let addresses = node_addresses(instance);
    let has_ip = addresses.iter().any(NodeAddress::is_ip);
    if has_ip && addresses != node.addresses {
        changes.addresses = Some(addresses);
    }
    let complete = has_ip && instance_type.is_some();
    let down = is_down(&instance.status, power);
    let mut taints: Vec<Taint> = node
        .taints
        .iter()
        .filter(|t| !(complete && t.key == UNINITIALIZED_TAINT))
        .filter(|t| down || t.key != SHUTDOWN_TAINT)
        .cloned()
        .collect();
    if down && !taints.iter().any(|t| t.key == SHUTDOWN_TAINT) {
        taints.push(Taint {
            key: SHUTDOWN_TAINT.to_string(),
            value: None,
            effect: SHUTDOWN_EFFECT.to_string(),
        });
    }
    if taints != node.taints {
        changes.taints = Some(taints);
    }
    let (outcome, event) = if complete {
        (NodeOutcome::Steady, None)
    } else {
        let missing = match (has_ip, instance_type.is_some()) {
            (false, false) => "addresses and instance type",
            (false, true) => "addresses",
            _ => "instance type",
        };
        (
            NodeOutcome::Pending,
            node.uninitialized().then(|| NodeEvent {
                reason: event_reason::WAITING_FOR_INSTANCE,
                message: format!(
                    "instance {} ({}) has no {missing} yet; the Node stays uninitialized",
                    instance.id, instance.status
                ),
            }),
        )
    };
    CloudNodeDecision {
        changes,
        delete: false,
        event,
        outcome,
    }
}

#[cfg(test)]
mod tests;
