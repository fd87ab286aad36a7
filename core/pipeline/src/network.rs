//! Networks (the meta key) and their meta pipelines.
//!
//! A network is what a port joins: an L2 domain (optionally a VLAN) or an
//! L3 routed domain (a VRF). Its meta pipeline is the chain of network
//! functions every port pipeline of the network copies.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::addr::Ipv4Cidr;
use crate::family::Ipv6Cidr;

#[cfg(test)]
mod tests;
mod text;

/// What happens to a pod's IPv6 packet leaving the pod networks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Egress6 {
    /// Source-NAT to the host's address, as IPv4 (the default: a pod
    /// prefix of unique-local addresses is not routed outside).
    #[default]
    Masquerade,
    /// Forwarded with the pod's own address (the prefix is routed to the
    /// host by the operator's network).
    Routed,
}

/// How a network forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NetworkKind {
    /// One broadcast domain switched by MAC.
    #[default]
    L2,
    /// A routed domain (a VRF): forwarded by destination IP.
    L3,
}

/// What an ACL rule does to a matching packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AclAction {
    /// Let it through.
    Allow,
    /// Drop it.
    Deny,
}

/// The IP protocols an ACL rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AclProtocol {
    /// ICMP.
    Icmp,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// One ACL rule. Rules are evaluated in order; the first match decides; a
/// packet no rule matches is allowed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclRule {
    /// Allow or deny.
    pub action: AclAction,
    /// Source prefix to match (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<Ipv4Cidr>,
    /// Destination prefix to match (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<Ipv4Cidr>,
    /// Protocol to match (any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<AclProtocol>,
    /// Destination port to match (TCP/UDP only; any when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

impl AclRule {
    /// True when the rule matches a packet with these fields.
    pub fn matches(
        &self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: AclProtocol,
        port: Option<u16>,
    ) -> bool {
        self.src.is_none_or(|p| p.contains(src))
            && self.dst.is_none_or(|p| p.contains(dst))
            && self.protocol.is_none_or(|p| p == protocol)
            && self.port.is_none_or(|p| Some(p) == port)
    }
}

/// The verdict of a rule list for one packet: first match wins, default allow.
pub fn acl_verdict(
    rules: &[AclRule],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: AclProtocol,
    port: Option<u16>,
) -> AclAction {
    rules
        .iter()
        .find(|r| r.matches(src, dst, protocol, port))
        .map_or(AclAction::Allow, |r| r.action)
}

/// A network as declared by the operator (the agent's config file).
///
/// Its subnets are given as `subnet: <v4>` (IPv4 only, as before), or
/// `subnets: [<v4>, <v6>]` in either order (dual-stack), or `subnet` plus
/// `subnet6` (the form it serializes to). An IPv6-only network (no IPv4
/// subnet) is refused with an error naming the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "text::NetworkText")]
pub struct NetworkSpec {
    /// The meta key: the CNI network name.
    pub name: String,
    /// The IPv4 subnet pods are addressed from.
    pub subnet: Ipv4Cidr,
    /// The IPv6 subnet pods are also addressed from (dual-stack), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet6: Option<Ipv6Cidr>,
    /// The IPv6 gateway; defaults to the IPv6 subnet's first address after
    /// the subnet-router anycast. Never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway6: Option<Ipv6Addr>,
    /// IPv6 traffic leaving the pod networks: masquerade (default) or routed.
    #[serde(default, skip_serializing_if = "is_default_egress6")]
    pub egress6: Egress6,
    /// L2 (default) or L3.
    #[serde(default)]
    pub kind: NetworkKind,
    /// VLAN id for an L2 network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// The gateway; defaults to the subnet's first host. Never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Ipv4Addr>,
    /// MTU of the pod interfaces (default 1500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// ACL rules applied in every port pipeline of the network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<AclRule>,
}

/// Default pod MTU.
pub const DEFAULT_MTU: u32 = 1500;

fn is_default_egress6(e: &Egress6) -> bool {
    *e == Egress6::default()
}

impl NetworkSpec {
    /// A plain L2 network with defaults.
    pub fn l2(name: &str, subnet: Ipv4Cidr) -> Self {
        NetworkSpec {
            name: name.to_string(),
            subnet,
            subnet6: None,
            gateway6: None,
            egress6: Egress6::default(),
            kind: NetworkKind::L2,
            vlan: None,
            gateway: None,
            mtu: None,
            acl: Vec::new(),
        }
    }

    /// The gateway address: the declared one or the subnet's first host.
    pub fn gateway(&self) -> Option<Ipv4Addr> {
        self.gateway.or_else(|| self.subnet.first_host())
    }

    /// The same network with an IPv6 subnet too (dual-stack).
    pub fn with_v6(mut self, subnet6: Ipv6Cidr) -> Self {
        self.subnet6 = Some(subnet6);
        self
    }

    /// The IPv6 gateway: the declared one or the IPv6 subnet's first host;
    /// `None` without an IPv6 subnet.
    pub fn gateway6(&self) -> Option<Ipv6Addr> {
        let subnet6 = self.subnet6?;
        self.gateway6.or_else(|| subnet6.first_host())
    }

    /// The families the network's pods are addressed in.
    pub fn families(&self) -> Vec<crate::family::AddressFamily> {
        let mut out = vec![crate::family::AddressFamily::IPv4];
        if self.subnet6.is_some() {
            out.push(crate::family::AddressFamily::IPv6);
        }
        out
    }

    /// The MTU of pod interfaces.
    pub fn mtu(&self) -> u32 {
        self.mtu.unwrap_or(DEFAULT_MTU)
    }

    /// Check the declaration.
    ///
    /// # Errors
    /// [`Error::InvalidNetwork`] naming the network and the problem.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: String| Error::InvalidNetwork {
            network: self.name.clone(),
            why,
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(bad("name must be non-empty [A-Za-z0-9._-]".into()));
        }
        if self.subnet.host_range().is_none() {
            return Err(bad(format!("subnet {} has no room for hosts", self.subnet)));
        }
        let host = |ip| {
            self.subnet.contains(ip) && ip != self.subnet.network() && ip != self.subnet.broadcast()
        };
        if let Some(gw) = self.gateway.filter(|gw| !host(*gw)) {
            return Err(bad(format!(
                "gateway {gw} is not a host of {}",
                self.subnet
            )));
        }
        self.validate_v6()?;
        if let Some(vlan) = self.vlan {
            if self.kind == NetworkKind::L3 {
                return Err(bad("vlan is for l2 networks".into()));
            }
            if !(1..=4094).contains(&vlan) {
                return Err(bad(format!("vlan {vlan} is outside 1..=4094")));
            }
        }
        if let Some(mtu) = self.mtu
            && !(576..=65535).contains(&mtu)
        {
            return Err(bad(format!("mtu {mtu} is outside 576..=65535")));
        }
        Ok(())
    }
}

impl NetworkSpec {
    fn validate_v6(&self) -> Result<(), Error> {
        let bad = |why: String| Error::InvalidNetwork {
            network: self.name.clone(),
            why,
        };
        let Some(subnet6) = self.subnet6 else {
            if let Some(gw) = self.gateway6 {
                return Err(bad(format!("gateway6 {gw} without an IPv6 subnet")));
            }
            return Ok(());
        };
        if self.kind == NetworkKind::L3 {
            return Err(bad(format!(
                "IPv6 subnet {subnet6} on an l3 network: dual-stack networks are l2 for now"
            )));
        }
        // Room for the subnet-router anycast, a gateway and one pod.
        if subnet6.prefix > 126 {
            return Err(bad(format!(
                "IPv6 subnet {subnet6} has no room for hosts (at most /126)"
            )));
        }
        if subnet6.addr != subnet6.network() {
            return Err(bad(format!(
                "IPv6 subnet {subnet6} has host bits set (its prefix is {}/{})",
                subnet6.network(),
                subnet6.prefix
            )));
        }
        if let Some(gw) = self.gateway6
            && (!subnet6.contains(gw) || gw == subnet6.network())
        {
            return Err(bad(format!("gateway6 {gw} is not a host of {subnet6}")));
        }
        Ok(())
    }
}

/// What a meta module does. Port pipelines instantiate these per port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MetaFunction {
    /// Access control with the network's rules.
    Acl,
    /// An L2 switch forwarding by its FIB (MAC → gate).
    L2Switch,
    /// An L3 router forwarding by its FIB (host IP → gate).
    L3Router,
}

/// A module of a meta pipeline: a name and where its egress gates lead
/// (to other meta modules). The last module's unconnected gates are
/// filled per port with the other ports' egress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaModule {
    /// Name, unique in its meta pipeline.
    pub name: String,
    /// The network function.
    pub function: MetaFunction,
    /// Egress gate → next meta module's name.
    #[serde(default)]
    pub egress: BTreeMap<u32, String>,
}

/// The network-function core shared by every port pipeline of a network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaPipeline {
    /// The meta key (network name).
    pub key: String,
    /// The modules; the first is where a port's ingress connects.
    pub modules: Vec<MetaModule>,
}

impl MetaPipeline {
    /// The default meta pipeline of a network: ACL then switch (L2) or router (L3).
    pub fn default_for(spec: &NetworkSpec) -> Self {
        let forwarder = match spec.kind {
            NetworkKind::L2 => MetaModule {
                name: "switch".into(),
                function: MetaFunction::L2Switch,
                egress: BTreeMap::new(),
            },
            NetworkKind::L3 => MetaModule {
                name: "router".into(),
                function: MetaFunction::L3Router,
                egress: BTreeMap::new(),
            },
        };
        MetaPipeline {
            key: spec.name.clone(),
            modules: vec![
                MetaModule {
                    name: "acl".into(),
                    function: MetaFunction::Acl,
                    egress: BTreeMap::from([(0, forwarder.name.clone())]),
                },
                forwarder,
            ],
        }
    }

    /// The module whose free gates lead to egress ports: the forwarder
    /// (switch or router), the last one in the chain.
    pub fn forwarder(&self) -> Option<&MetaModule> {
        self.modules
            .iter()
            .rev()
            .find(|m| matches!(m.function, MetaFunction::L2Switch | MetaFunction::L3Router))
    }

    /// Check names are unique, gates name existing modules, the graph is a
    /// chain without cycles reachable from the first module, and there is
    /// exactly one forwarder and it is last with no egress of its own.
    ///
    /// # Errors
    /// [`Error::InvalidMetaPipeline`] naming the key and the problem.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |why: String| Error::InvalidMetaPipeline {
            key: self.key.clone(),
            why,
        };
        if self.modules.is_empty() {
            return Err(bad("no modules".into()));
        }
        let mut names = BTreeSet::new();
        for m in &self.modules {
            if m.name.is_empty() || m.name.contains(['.', ' ']) {
                return Err(bad(format!("bad module name {:?}", m.name)));
            }
            if !names.insert(m.name.as_str()) {
                return Err(bad(format!("duplicate module {}", m.name)));
            }
        }
        for m in &self.modules {
            for next in m.egress.values() {
                if !names.contains(next.as_str()) {
                    return Err(bad(format!("{} leads to unknown module {next}", m.name)));
                }
            }
        }
        let forwarders: Vec<_> = self
            .modules
            .iter()
            .filter(|m| matches!(m.function, MetaFunction::L2Switch | MetaFunction::L3Router))
            .collect();
        if forwarders.len() != 1 {
            return Err(bad(format!(
                "{} forwarders, need exactly one",
                forwarders.len()
            )));
        }
        if !forwarders[0].egress.is_empty() {
            return Err(bad(
                "the forwarder's gates are reserved for egress ports".into()
            ));
        }
        // Walk from the first module: every module reached once, no cycle.
        let by_name: BTreeMap<&str, &MetaModule> =
            self.modules.iter().map(|m| (m.name.as_str(), m)).collect();
        let mut seen = BTreeSet::new();
        let mut stack = vec![(self.modules[0].name.as_str(), BTreeSet::new())];
        while let Some((name, path)) = stack.pop() {
            if path.contains(name) {
                return Err(bad(format!("cycle through {name}")));
            }
            seen.insert(name);
            let mut path = path.clone();
            path.insert(name);
            if let Some(m) = by_name.get(name) {
                for next in m.egress.values() {
                    stack.push((next.as_str(), path.clone()));
                }
            }
        }
        if seen.len() != self.modules.len() {
            return Err(bad("some modules are unreachable from the first".into()));
        }
        Ok(())
    }
}
