//! Forwarding synthetic frames through the port pipelines: the data plane
//! of the `sim` driver and the oracle the kernel driver is compared with.
//!
//! Semantics match the kernel rendering: ACLs filter IPv4 by first match
//! (default allow) and let ARP pass; the L2 switch sends group frames
//! (broadcast, multicast) out of every gate and unicast frames by its FIB
//! only (a miss is dropped and counted: no flooding); the L3 router
//! forwards by destination host address.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addr::Mac;
use crate::build::Rendered;
use crate::module::{ModuleId, ModuleKind, PortId, ingress_id};
use crate::network::{AclAction, AclProtocol, acl_verdict};

/// The payload of a synthetic frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    /// An ARP frame (never filtered by ACLs).
    Arp,
    /// An IPv4 packet.
    Ipv4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// Protocol.
        protocol: AclProtocol,
        /// Destination port (TCP/UDP).
        port: Option<u16>,
    },
}

/// A synthetic Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// Source MAC.
    pub src_mac: Mac,
    /// Destination MAC.
    pub dst_mac: Mac,
    /// What it carries.
    pub payload: Payload,
}

/// Where a frame went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// Ports the frame left through.
    pub delivered: Vec<PortId>,
    /// Modules that dropped a copy, with the reason.
    pub dropped: Vec<(ModuleId, String)>,
    /// Modules the frame (or a copy) passed through, in order.
    pub visited: Vec<ModuleId>,
}

/// Send `frame` in through `port`'s ingress and follow the pipeline.
pub fn forward(r: &Rendered, port: &str, frame: &Frame) -> Trace {
    let mut trace = Trace::default();
    let mut queue = vec![ingress_id(port)];
    let mut steps = 0usize;
    while let Some(id) = queue.pop() {
        steps += 1;
        if steps > r.modules.len() * 4 + 16 {
            trace.dropped.push((id, "step limit".into()));
            break;
        }
        let Some(m) = r.modules.get(&id) else {
            trace.dropped.push((id, "missing module".into()));
            continue;
        };
        trace.visited.push(id.clone());
        match &m.kind {
            ModuleKind::IngressPort { .. } => queue.extend(m.egress.values().cloned()),
            ModuleKind::EgressPort { port } => trace.delivered.push(port.clone()),
            ModuleKind::Acl { rules } => {
                let verdict = match frame.payload {
                    Payload::Arp => AclAction::Allow,
                    Payload::Ipv4 {
                        src,
                        dst,
                        protocol,
                        port,
                    } => acl_verdict(rules, src, dst, protocol, port),
                };
                match verdict {
                    AclAction::Allow => queue.extend(m.egress.values().cloned()),
                    AclAction::Deny => trace.dropped.push((id.clone(), "acl deny".into())),
                }
            }
            ModuleKind::L2Switch { fib } => {
                if frame.dst_mac.is_group() {
                    queue.extend(m.egress.values().cloned());
                } else if let Some(next) = fib.get(&frame.dst_mac).and_then(|g| m.egress.get(g)) {
                    queue.push(next.clone());
                } else {
                    trace.dropped.push((id.clone(), "fib miss".into()));
                }
            }
            ModuleKind::L3Router { fib } => match frame.payload {
                Payload::Ipv4 { dst, .. } => {
                    if let Some(next) = fib.get(&dst).and_then(|g| m.egress.get(g)) {
                        queue.push(next.clone());
                    } else {
                        trace.dropped.push((id.clone(), "no route".into()));
                    }
                }
                Payload::Arp => queue.extend(m.egress.values().cloned()),
            },
        }
    }
    trace.delivered.sort();
    trace
}

/// Per-module packet counters of a simulated data plane.
pub type Counters = BTreeMap<ModuleId, u64>;

/// Add one to every module the trace visited.
pub fn count(counters: &mut Counters, trace: &Trace) {
    for id in &trace.visited {
        *counters.entry(id.clone()).or_default() += 1;
    }
}
