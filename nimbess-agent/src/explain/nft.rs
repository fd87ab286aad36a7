//! The kernel's nftables rules as `explain --live` compares them: `nft -j
//! list table ip NAME` read into one [`KernelRule`] per rule, keeping what
//! the agent's renderers put in a rule (the peer address matched, the
//! addresses excepted, protocol and destination ports, interface names, the
//! verdict) and its handle and counter. `nft` prints one rule several
//! ways (`ip saddr 10.0.0.3`, a prefix object, `tcp dport` or `th dport`
//! after `meta l4proto`); each spelling lands in the same fields.

use std::net::Ipv4Addr;
use std::process::Command;

use nephrite_pipeline::{Ipv4Cidr, Protocol};
use serde::Serialize;
use serde_json::Value;

/// Which address of the packet a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressField {
    /// `ip saddr`.
    Source,
    /// `ip daddr`.
    Destination,
}

/// What a rule does with what it matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleVerdict {
    /// `accept`.
    Accept,
    /// `drop`.
    Drop,
    /// `return`.
    Return,
    /// `goto CHAIN`.
    Goto(String),
    /// `jump CHAIN`.
    Jump(String),
    /// `dnat …` (a Service's translation).
    Dnat,
}

/// One rule of a table, as far as `explain --live` reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KernelRule {
    /// Its chain.
    pub chain: String,
    /// Its handle (`nft delete rule ip TABLE CHAIN handle H`).
    pub handle: u64,
    /// The address matched (`==`), and which.
    pub peer: Option<(AddressField, Ipv4Cidr)>,
    /// Addresses of the peer excluded (`!=`).
    pub except: Vec<Ipv4Cidr>,
    /// The transport protocol matched.
    pub protocol: Option<Protocol>,
    /// The destination ports matched (one port: both ends equal).
    pub ports: Option<(u16, u16)>,
    /// `iifname ==`.
    pub iifname: Option<String>,
    /// `oifname ==`.
    pub oifname: Vec<String>,
    /// `oifname !=`.
    pub not_oifname: Vec<String>,
    /// The verdict.
    pub verdict: Option<RuleVerdict>,
    /// Packets its counter counted, when it has one.
    pub packets: Option<u64>,
}

/// A table's rules and chains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelTable {
    /// Its chains' names.
    pub chains: Vec<String>,
    /// Every rule, in order.
    pub rules: Vec<KernelRule>,
    /// Every map's or set's elements, `(map, key, value)` as JSON text.
    pub elements: Vec<(String, String, String)>,
}

impl KernelTable {
    /// The rules of `chain`, in order.
    pub fn chain(&self, chain: &str) -> impl Iterator<Item = &KernelRule> {
        let chain = chain.to_string();
        self.rules.iter().filter(move |r| r.chain == chain)
    }
}

/// Why the kernel's table cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NftError {
    /// `nft` did not run.
    #[error("running nft -j list table ip {table}: {source}")]
    Run {
        /// The table.
        table: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Its output is not nftables JSON.
    #[error("nft -j list table ip {table} printed no nftables JSON: {reason}")]
    Json {
        /// The table.
        table: String,
        /// What was wrong.
        reason: String,
    },
}

/// The `ip` table `name` of this network namespace (`None`: there is none).
///
/// # Errors
/// `nft` cannot run, or prints something else than nftables JSON.
pub fn list_table(name: &str) -> Result<Option<KernelTable>, NftError> {
    let out = Command::new("nft")
        .args(["-j", "list", "table", "ip", name])
        .output()
        .map_err(|source| NftError::Run {
            table: name.to_string(),
            source,
        })?;
    if !out.status.success() {
        // "No such file or directory": the table is not there
        return Ok(None);
    }
    parse_table(&String::from_utf8_lossy(&out.stdout))
        .map(Some)
        .map_err(|reason| NftError::Json {
            table: name.to_string(),
            reason,
        })
}

/// Read `nft -j` output.
///
/// # Errors
/// Not nftables JSON.
pub fn parse_table(json: &str) -> Result<KernelTable, String> {
    let doc: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let items = doc["nftables"]
        .as_array()
        .ok_or("no \"nftables\" array at the top")?;
    let mut table = KernelTable::default();
    for item in items {
        if let Some(chain) = item.get("chain") {
            if let Some(name) = chain["name"].as_str() {
                table.chains.push(name.to_string());
            }
        } else if let Some(rule) = item.get("rule") {
            table.rules.push(parse_rule(rule));
        } else if let Some(set) = item.get("map").or_else(|| item.get("set")) {
            let name = set["name"].as_str().unwrap_or_default().to_string();
            for elem in set["elem"].as_array().into_iter().flatten() {
                let (key, value) = match elem.as_array() {
                    Some(pair) if pair.len() == 2 => (pair[0].to_string(), pair[1].to_string()),
                    _ => (elem.to_string(), String::new()),
                };
                table.elements.push((name.clone(), key, value));
            }
        }
    }
    Ok(table)
}

fn parse_rule(rule: &Value) -> KernelRule {
    let mut out = KernelRule {
        chain: rule["chain"].as_str().unwrap_or_default().to_string(),
        handle: rule["handle"].as_u64().unwrap_or_default(),
        ..KernelRule::default()
    };
    for e in rule["expr"].as_array().into_iter().flatten() {
        if let Some(m) = e.get("match") {
            read_match(&mut out, m);
        } else if let Some(c) = e.get("counter") {
            out.packets = c["packets"].as_u64();
        } else if e.get("drop").is_some() {
            out.verdict = Some(RuleVerdict::Drop);
        } else if e.get("accept").is_some() {
            out.verdict = Some(RuleVerdict::Accept);
        } else if e.get("return").is_some() {
            out.verdict = Some(RuleVerdict::Return);
        } else if let Some(t) = e.pointer("/goto/target").and_then(Value::as_str) {
            out.verdict = Some(RuleVerdict::Goto(t.to_string()));
        } else if let Some(t) = e.pointer("/jump/target").and_then(Value::as_str) {
            out.verdict = Some(RuleVerdict::Jump(t.to_string()));
        } else if e.get("dnat").is_some() {
            out.verdict = Some(RuleVerdict::Dnat);
        }
    }
    out
}

fn protocol_named(v: &Value) -> Option<Protocol> {
    match v {
        Value::String(s) => match s.as_str() {
            "tcp" => Some(Protocol::Tcp),
            "udp" => Some(Protocol::Udp),
            "sctp" => Some(Protocol::Sctp),
            _ => None,
        },
        Value::Number(n) => match n.as_u64() {
            Some(6) => Some(Protocol::Tcp),
            Some(17) => Some(Protocol::Udp),
            Some(132) => Some(Protocol::Sctp),
            _ => None,
        },
        _ => None,
    }
}

fn cidr(v: &Value) -> Option<Ipv4Cidr> {
    if let Some(s) = v.as_str() {
        let addr: Ipv4Addr = s.parse().ok()?;
        return Some(Ipv4Cidr { addr, prefix: 32 });
    }
    let p = v.get("prefix")?;
    Some(Ipv4Cidr {
        addr: p["addr"].as_str()?.parse().ok()?,
        prefix: u8::try_from(p["len"].as_u64()?).ok()?,
    })
}

fn port_range(v: &Value) -> Option<(u16, u16)> {
    if let Some(n) = v.as_u64() {
        let n = u16::try_from(n).ok()?;
        return Some((n, n));
    }
    let r = v.get("range")?.as_array()?;
    let lo = u16::try_from(r.first()?.as_u64()?).ok()?;
    let hi = u16::try_from(r.get(1)?.as_u64()?).ok()?;
    Some((lo, hi))
}

fn read_match(out: &mut KernelRule, m: &Value) {
    let equal = m["op"].as_str().is_none_or(|op| op == "==" || op == "in");
    let (left, right) = (&m["left"], &m["right"]);
    if let Some(payload) = left.get("payload") {
        let field = payload["field"].as_str().unwrap_or_default();
        let protocol = payload["protocol"].as_str().unwrap_or_default();
        match (protocol, field) {
            ("ip", "saddr" | "daddr") => {
                let which = if field == "saddr" {
                    AddressField::Source
                } else {
                    AddressField::Destination
                };
                if let Some(c) = cidr(right) {
                    if equal {
                        out.peer = Some((which, c));
                    } else {
                        out.except.push(c);
                    }
                }
            }
            (_, "dport") => {
                if let Some(p) = protocol_named(&Value::String(protocol.to_string())) {
                    out.protocol = Some(p);
                }
                out.ports = port_range(right);
            }
            _ => {}
        }
    } else if let Some(key) = left.pointer("/meta/key").and_then(Value::as_str) {
        let name = right.as_str().map(str::to_string);
        match key {
            "l4proto" | "protocol" => out.protocol = protocol_named(right).or(out.protocol),
            "iifname" => out.iifname = name,
            "oifname" => match (equal, name) {
                (true, Some(n)) => out.oifname.push(n),
                (false, Some(n)) => out.not_oifname.push(n),
                _ => {}
            },
            _ => {}
        }
    }
}
