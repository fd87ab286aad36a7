//! `explain --live`: does the kernel hold what the model's answer relies
//! on? For every path of an [`Explanation`] the rules a packet of that
//! connection meets are worked out from the policy tiers the agent
//! rendered (the same walk as [`nephrite_pipeline::Tiers::decide`], noting
//! the entry that decides and so the rule the kernel driver wrote for it),
//! then looked for in this network namespace's nftables tables
//! ([`super::nft`]):
//!
//! - a policy side: the `forward` chain's jump to the pod's `in.<pod>` or
//!   `out.<pod>` chain, and there the rule of the deciding entry (an
//!   AdminNetworkPolicy's, a `goto` to the `.pass` chain, a NetworkPolicy
//!   entry's `return`, the isolating `drop`, a BaselineAdminNetworkPolicy's)
//!   in table `ip nimbess-policy`;
//! - a Service: its DNAT chain (`svc.…`) and the `services` map's element
//!   pointing at it, or its element of the `noendpoints` set, in `ip
//!   nimbess-svc`;
//! - isolation between networks: the `ip nimbess` forward chain's drop of
//!   what the source network's bridge (or routed veths) sends into another
//!   network.
//!
//! A rule looked for and not found is a disagreement between the model and
//! the kernel: a bug, or a hand edit behind the agent's back.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use nephrite_pipeline::{
    AdminAction, BaselineAction, Decider, Direction, Explanation, Ipv4Cidr, LoadBalancerKey,
    NetworkKind, NetworkSpec, PodTiers, PortRange, Protocol, Reason, Tiers,
};
use serde::Serialize;

use super::nft::{AddressField, KernelRule, KernelTable, RuleVerdict};
use crate::driver::kernel::firewall::nftables::{
    EGRESS_TABLE, POLICY_TABLE, SERVICES_TABLE, VETH_PREFIX,
};
use crate::driver::kernel::firewall::{policy, services};

/// A rule the kernel should hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Expected {
    /// Its table (`ip`).
    pub table: String,
    /// Its chain.
    pub chain: String,
    /// The address it matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<(AddressField, Ipv4Cidr)>,
    /// Addresses it excepts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub except: Vec<Ipv4Cidr>,
    /// Its protocol.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Its destination ports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<(u16, u16)>,
    /// `iifname`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iifname: Option<String>,
    /// `oifname !=`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_oifname: Option<String>,
    /// Its verdict.
    pub verdict: Option<RuleVerdict>,
    /// Why the connection meets it, in words.
    pub why: String,
}

impl Expected {
    fn matches(&self, r: &KernelRule) -> bool {
        let mut except = r.except.clone();
        except.sort();
        let mut want = self.except.clone();
        want.sort();
        r.chain == self.chain
            && r.peer == self.peer
            && except == want
            && r.protocol == self.protocol
            && r.ports == self.ports
            && (self.iifname.is_none() || r.iifname == self.iifname)
            && self
                .not_oifname
                .as_ref()
                .is_none_or(|n| r.not_oifname.contains(n))
            && r.verdict == self.verdict
    }

    /// The rule as `nft list` would print it, roughly.
    pub fn rule_text(&self) -> String {
        let mut words = Vec::new();
        if let Some(i) = &self.iifname {
            words.push(format!("iifname {i:?}"));
        }
        if let Some(o) = &self.not_oifname {
            words.push(format!("oifname != {o:?}"));
        }
        if let Some((field, cidr)) = &self.peer {
            let f = match field {
                AddressField::Source => "saddr",
                AddressField::Destination => "daddr",
            };
            let cidr = if cidr.prefix == 32 {
                cidr.addr.to_string()
            } else {
                cidr.to_string()
            };
            words.push(format!("ip {f} {cidr}"));
            for e in &self.except {
                words.push(format!("ip {f} != {e}"));
            }
        }
        if let Some(p) = self.protocol {
            words.push(format!("meta l4proto {}", protocol_word(p)));
        }
        match self.ports {
            Some((lo, hi)) if lo == hi => words.push(format!("th dport {lo}")),
            Some((lo, hi)) => words.push(format!("th dport {lo}-{hi}")),
            None => {}
        }
        words.push(match &self.verdict {
            Some(RuleVerdict::Accept) => "accept".into(),
            Some(RuleVerdict::Drop) => "drop".into(),
            Some(RuleVerdict::Return) => "return".into(),
            Some(RuleVerdict::Goto(c)) => format!("goto {c}"),
            Some(RuleVerdict::Jump(c)) => format!("jump {c}"),
            Some(RuleVerdict::Dnat) => "dnat …".into(),
            None => "…".into(),
        });
        format!("ip {} {}: {}", self.table, self.chain, words.join(" "))
    }
}

fn protocol_word(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
        Protocol::Sctp => "sctp",
    }
}

/// Where a rule looked for was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// Its handle.
    pub handle: u64,
    /// Its counter's packets, when it counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
}

/// One thing looked for in the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveCheck {
    /// The path of the explanation (its index) it belongs to.
    pub path: usize,
    /// What was looked for.
    pub expected: Expected,
    /// Where it was found (`None`: missing).
    pub found: Option<Found>,
}

/// What `--live` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveReport {
    /// True when every rule looked for is there and the agent's tiers
    /// decide as the model does.
    pub agrees: bool,
    /// Every rule looked for.
    pub checks: Vec<LiveCheck>,
    /// Each disagreement, one line.
    pub disagreements: Vec<String>,
}

impl std::fmt::Display for LiveReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.agrees {
            write!(f, "live: model and kernel agree")?;
        } else {
            write!(f, "live: MODEL AND KERNEL DISAGREE (a bug, or a hand edit)")?;
        }
        for c in &self.checks {
            match &c.found {
                Some(found) => {
                    write!(
                        f,
                        "\n  found   [{}] {} (handle {}",
                        c.path,
                        c.expected.rule_text(),
                        found.handle
                    )?;
                    if let Some(p) = found.packets {
                        write!(f, ", {p} packets")?;
                    }
                    write!(f, ") — {}", c.expected.why)?;
                }
                None => write!(
                    f,
                    "\n  MISSING [{}] {} — {}",
                    c.path,
                    c.expected.rule_text(),
                    c.expected.why
                )?,
            }
        }
        for d in &self.disagreements {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

/// The kernel's tables `--live` reads, by name (a table absent: `None`).
pub type Tables = BTreeMap<String, Option<KernelTable>>;

/// The rules the kernel should hold for `explanation`, from the agent's
/// `tiers` and `networks`, plus the lines where the tiers decide otherwise
/// than the model.
pub fn expected_rules(
    explanation: &Explanation,
    tiers: &BTreeMap<Ipv4Addr, PodTiers>,
    networks: &[NetworkSpec],
) -> (Vec<(usize, Expected)>, Vec<String>) {
    let mut out = Vec::new();
    let mut disagreements = Vec::new();
    let src = explanation.source.address;
    if let Some(hop) = &explanation.service {
        let key = LoadBalancerKey {
            namespace: hop.service.namespace.clone(),
            service: hop.service.name.clone(),
            protocol: explanation.protocol,
            port: hop.port,
        };
        let chain = services::chain_name(&key);
        if !hop.backends.is_empty() {
            out.push((
                0,
                Expected {
                    table: SERVICES_TABLE.into(),
                    chain,
                    protocol: Some(explanation.protocol),
                    verdict: Some(RuleVerdict::Dnat),
                    why: format!(
                        "Service {} translates {}:{} to its backends",
                        hop.service, hop.vip, hop.port
                    ),
                    ..Expected::default()
                },
            ));
        }
    }
    for (index, path) in explanation.paths.iter().enumerate() {
        let protocol = explanation.protocol;
        for side in [&path.egress, &path.ingress].into_iter().flatten() {
            let (pod, peer) = match side.direction {
                Direction::Egress => (src, path.address),
                Direction::Ingress => (path.address, src),
            };
            let Some(pod_tiers) = tiers.get(&pod) else {
                if !matches!(side.decided_by, Decider::NoPolicy | Decider::NotAPod) {
                    disagreements.push(format!(
                        "path {index}: the model has {} of {pod} decided by {}, the agent rendered no policy for {pod}",
                        side.direction, side.decided_by
                    ));
                }
                continue;
            };
            let t = match side.direction {
                Direction::Egress => &pod_tiers.egress,
                Direction::Ingress => &pod_tiers.ingress,
            };
            if t.is_empty() {
                // no chain for this direction: nothing of the pod's decides it
                if !matches!(side.decided_by, Decider::NoPolicy | Decider::NotAPod) {
                    disagreements.push(format!(
                        "path {index}: the model has {} of {pod} decided by {}, the agent rendered no {} policy for {pod}",
                        side.direction, side.decided_by, side.direction
                    ));
                }
                continue;
            }
            let walk = walk(t, side.direction, pod, peer, protocol, path.port);
            if walk.allowed != side.allowed {
                disagreements.push(format!(
                    "path {index}: the model has {} of {pod} {}, the agent's rendered tiers {}",
                    side.direction,
                    if side.allowed { "allowed" } else { "denied" },
                    if walk.allowed { "allow it" } else { "deny it" },
                ));
            }
            out.extend(walk.rules.into_iter().map(|r| (index, r)));
        }
        if let Reason::NetworkIsolation { from, to } = &path.decided_by
            && let Some(rule) = isolation_rule(networks, from, to)
        {
            out.push((index, rule));
        }
    }
    (out, disagreements)
}

/// What a walk through one pod's chain met and decided.
struct Walk {
    rules: Vec<Expected>,
    allowed: bool,
}

/// The rules a packet meets in the chain of `pod` in `direction`, with
/// `peer` on the other end, up to the one that decides.
fn walk(
    tiers: &Tiers,
    direction: Direction,
    pod: Ipv4Addr,
    peer: Ipv4Addr,
    protocol: Protocol,
    port: u16,
) -> Walk {
    let (name, jump_on, peer_field) = match direction {
        Direction::Ingress => ("in", AddressField::Destination, AddressField::Source),
        Direction::Egress => ("out", AddressField::Source, AddressField::Destination),
    };
    let chain = policy::chain_name(name, pod);
    let mut rules = vec![Expected {
        table: POLICY_TABLE.into(),
        chain: "forward".into(),
        peer: Some((jump_on, host(pod))),
        verdict: Some(RuleVerdict::Jump(chain.clone())),
        why: format!("{direction} of {pod} is judged in chain {chain}"),
        ..Expected::default()
    }];
    let rule =
        |chain: &str, peer: Ipv4Cidr, except: &[Ipv4Cidr], ports: &[PortRange], verdict, why| {
            let matched = ports.iter().find(|p| p.allows(protocol, port));
            Expected {
                table: POLICY_TABLE.into(),
                chain: chain.to_string(),
                peer: Some((peer_field, peer)),
                except: except.to_vec(),
                protocol: matched.map(|p| p.protocol),
                ports: matched.and_then(|p| p.range),
                verdict: Some(verdict),
                why,
                ..Expected::default()
            }
        };
    let mut lower = chain.clone();
    if !tiers.admin.is_empty() {
        lower = format!("{chain}.pass");
        match tiers.admin.iter().find(|e| e.matches(peer, protocol, port)) {
            Some(e) => {
                let verdict = match e.action {
                    AdminAction::Allow => RuleVerdict::Return,
                    AdminAction::Deny => RuleVerdict::Drop,
                    AdminAction::Pass => RuleVerdict::Goto(lower.clone()),
                };
                rules.push(rule(
                    &chain,
                    host(peer),
                    &[],
                    &e.ports,
                    verdict,
                    e.rule.to_string(),
                ));
                match e.action {
                    AdminAction::Allow => {
                        return Walk {
                            rules,
                            allowed: true,
                        };
                    }
                    AdminAction::Deny => {
                        return Walk {
                            rules,
                            allowed: false,
                        };
                    }
                    AdminAction::Pass => {}
                }
            }
            None => rules.push(Expected {
                table: POLICY_TABLE.into(),
                chain: chain.clone(),
                verdict: Some(RuleVerdict::Goto(lower.clone())),
                why: "no AdminNetworkPolicy rule matches: on to the lower tiers".into(),
                ..Expected::default()
            }),
        }
    }
    if let Some(list) = &tiers.network {
        return match list.iter().find(|e| e.allows(peer, protocol, port)) {
            Some(e) => {
                rules.push(rule(
                    &lower,
                    e.peer,
                    &e.except,
                    &e.ports,
                    RuleVerdict::Return,
                    "a NetworkPolicy rule allows it".into(),
                ));
                Walk {
                    rules,
                    allowed: true,
                }
            }
            None => {
                rules.push(Expected {
                    table: POLICY_TABLE.into(),
                    chain: lower,
                    verdict: Some(RuleVerdict::Drop),
                    why: "NetworkPolicies isolate the pod and none of their rules matches".into(),
                    ..Expected::default()
                });
                Walk {
                    rules,
                    allowed: false,
                }
            }
        };
    }
    match tiers
        .baseline
        .iter()
        .find(|e| e.matches(peer, protocol, port))
    {
        Some(e) => {
            let allowed = e.action == BaselineAction::Allow;
            let verdict = if allowed {
                RuleVerdict::Return
            } else {
                RuleVerdict::Drop
            };
            rules.push(rule(
                &lower,
                host(peer),
                &[],
                &e.ports,
                verdict,
                e.rule.to_string(),
            ));
            Walk { rules, allowed }
        }
        None => Walk {
            rules,
            allowed: true,
        },
    }
}

fn host(addr: Ipv4Addr) -> Ipv4Cidr {
    Ipv4Cidr { addr, prefix: 32 }
}

/// The egress table's rule that keeps what network `from` sends out of
/// network `to`.
fn isolation_rule(networks: &[NetworkSpec], from: &str, to: &str) -> Option<Expected> {
    let spec = networks.iter().find(|n| n.name == from)?;
    let why = format!("isolation between networks {from} and {to}");
    Some(match spec.kind {
        NetworkKind::L2 => {
            let bridge = crate::naming::bridge_name(from);
            Expected {
                table: EGRESS_TABLE.into(),
                chain: "forward".into(),
                iifname: Some(bridge.clone()),
                not_oifname: Some(bridge),
                verdict: Some(RuleVerdict::Drop),
                why,
                ..Expected::default()
            }
        }
        NetworkKind::L3 => {
            let to = networks.iter().find(|n| n.name == to)?;
            Expected {
                table: EGRESS_TABLE.into(),
                chain: "forward".into(),
                iifname: Some(format!("{VETH_PREFIX}*")),
                peer: Some((AddressField::Destination, to.subnet)),
                verdict: Some(RuleVerdict::Drop),
                why,
                ..Expected::default()
            }
        }
    })
}

/// The tables [`expected_rules`] may name.
pub const TABLES: [&str; 3] = [POLICY_TABLE, SERVICES_TABLE, EGRESS_TABLE];

/// Look for every rule of `expected` in `tables`; `disagreements` (the
/// tiers' own) are carried over.
pub fn check(
    explanation: &Explanation,
    expected: Vec<(usize, Expected)>,
    mut disagreements: Vec<String>,
    tables: &Tables,
) -> LiveReport {
    let mut checks = Vec::new();
    for (path, e) in expected {
        let found = tables
            .get(&e.table)
            .and_then(Option::as_ref)
            .and_then(|t| t.rules.iter().find(|r| e.matches(r)))
            .map(|r| Found {
                handle: r.handle,
                packets: r.packets,
            });
        if found.is_none() {
            let table = match tables.get(&e.table) {
                Some(Some(_)) => String::new(),
                _ => format!(" (table ip {} is missing)", e.table),
            };
            disagreements.push(format!(
                "model and kernel disagree: {} missing{table}",
                e.rule_text()
            ));
        }
        checks.push(LiveCheck {
            path,
            expected: e,
            found,
        });
    }
    if let Some(hop) = &explanation.service {
        let svc = tables.get(SERVICES_TABLE).and_then(Option::as_ref);
        let key = LoadBalancerKey {
            namespace: hop.service.namespace.clone(),
            service: hop.service.name.clone(),
            protocol: explanation.protocol,
            port: hop.port,
        };
        let (set, needle) = if hop.backends.is_empty() {
            ("noendpoints", format!("\"{}\"", hop.vip))
        } else {
            ("services", services::chain_name(&key))
        };
        let present = svc.is_some_and(|t| {
            t.elements.iter().any(|(name, k, v)| {
                name == set
                    && k.contains(&format!("\"{}\"", hop.vip))
                    && (k.contains(&needle) || v.contains(&needle))
            })
        });
        if !present {
            disagreements.push(format!(
                "model and kernel disagree: the element {} . {} . {} of ip {SERVICES_TABLE} {set} missing",
                hop.vip,
                protocol_word(explanation.protocol),
                hop.port
            ));
        }
    }
    LiveReport {
        agrees: disagreements.is_empty(),
        checks,
        disagreements,
    }
}
