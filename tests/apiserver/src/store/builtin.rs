//! The spec validation Kubernetes gives the built-in kinds whose mistakes our controllers could
//! make, with its wording (each a 422 Invalid cause, in Kubernetes' order):
//!
//! | kind | field | rule |
//! |---|---|---|
//! | NetworkPolicy | `podSelector`, peers' `podSelector`/`namespaceSelector` | a valid label selector |
//! | NetworkPolicy | peers | exactly one of the selectors or `ipBlock`, not `ipBlock` with another |
//! | NetworkPolicy | `ipBlock.cidr`, `ipBlock.except[]` | a canonical CIDR; each except a strict subset of `cidr` |
//! | NetworkPolicy | `policyTypes[]` | `Ingress` or `Egress`, at most two |
//! | Ingress | `rules[].http.paths[]` | `pathType` given and known; an absolute path (`Exact`, `Prefix`: no `//`, `/./`, `/../`, `%2f`, no `/..` or `/.` end) |
//!
//! A label selector: `matchLabels` as labels, and each `matchExpressions` entry with a known
//! operator (`In`, `NotIn`, `Exists`, `DoesNotExist`), `values` for `In`/`NotIn` and none for
//! the others, and a qualified-name key. Everything else of the built-in kinds is not checked.

use std::net::IpAddr;

use serde_json::Value;

use super::qualified::{key_problems, value_problems};
use crate::error::FieldProblem;
use crate::resources::ResourceType;

/// The problems Kubernetes' validation finds in the spec of a built-in object.
pub(super) fn spec_problems(rt: &ResourceType, obj: &Value) -> Vec<FieldProblem> {
    let mut out = Vec::new();
    if rt.crd.is_some() || rt.group != "networking.k8s.io" {
        return out;
    }
    let spec = &obj["spec"];
    match rt.plural.as_str() {
        "networkpolicies" => network_policy(spec, &mut out),
        "ingresses" => ingress(spec, &mut out),
        _ => {}
    }
    out
}

fn items(v: &Value) -> impl Iterator<Item = (usize, &Value)> {
    v.as_array().into_iter().flatten().enumerate()
}

fn network_policy(spec: &Value, out: &mut Vec<FieldProblem>) {
    label_selector(&spec["podSelector"], "spec.podSelector", out);
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(&spec[direction]) {
            for (j, peer) in items(&rule[peers]) {
                network_policy_peer(peer, &format!("spec.{direction}[{i}].{peers}[{j}]"), out);
            }
        }
    }
    let types = &spec["policyTypes"];
    if types.as_array().is_some_and(|t| t.len() > 2) {
        out.push(FieldProblem::new(
            "spec.policyTypes",
            format!("Invalid value: {types}: may not specify more than two policyTypes"),
        ));
        return;
    }
    for (i, t) in items(types) {
        if !matches!(t.as_str(), Some("Ingress" | "Egress")) {
            out.push(FieldProblem::new(
                format!("spec.policyTypes[{i}]"),
                format!("Unsupported value: {t}: supported values: \"Ingress\", \"Egress\""),
            ));
        }
    }
}

fn network_policy_peer(peer: &Value, at: &str, out: &mut Vec<FieldProblem>) {
    let mut peers = 0;
    for selector in ["podSelector", "namespaceSelector"] {
        if !peer[selector].is_null() {
            peers += 1;
            label_selector(&peer[selector], &format!("{at}.{selector}"), out);
        }
    }
    let ip_block = &peer["ipBlock"];
    if !ip_block.is_null() {
        peers += 1;
        self::ip_block(ip_block, &format!("{at}.ipBlock"), out);
    }
    if peers == 0 {
        out.push(FieldProblem::new(at, "Required value: must specify a peer"));
    } else if peers > 1 && !ip_block.is_null() {
        out.push(FieldProblem::new(
            at,
            "Forbidden: may not specify both ipBlock and another peer",
        ));
    }
}

fn ip_block(block: &Value, at: &str, out: &mut Vec<FieldProblem>) {
    let cidr = block["cidr"].as_str().unwrap_or("");
    if cidr.is_empty() {
        out.push(FieldProblem::new(format!("{at}.cidr"), "Required value"));
        return;
    }
    let Some(outer) = cidr_problems(cidr, &format!("{at}.cidr"), out) else {
        return;
    };
    for (i, except) in items(&block["except"]) {
        let here = format!("{at}.except[{i}]");
        let text = except.as_str().unwrap_or("");
        let Some(inner) = cidr_problems(text, &here, out) else {
            continue;
        };
        if !(outer.contains(inner.addr) && outer.len < inner.len) {
            out.push(FieldProblem::new(
                here,
                format!("Invalid value: {text:?}: must be a strict subset of `cidr`"),
            ));
        }
    }
}

/// A CIDR as Go's sloppy parser reads it (leading zeros allowed), masked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` or `v6::/n` as Go's `ParseCIDR` does, with leading zeros allowed.
    pub fn parse_sloppy(text: &str) -> Option<(Self, bool)> {
        let (ip, len) = text.split_once('/')?;
        let exact = !(len.len() > 1 && len.starts_with('0'));
        let len: u8 = (!len.is_empty() && len.bytes().all(|b| b.is_ascii_digit()))
            .then(|| len.parse().ok())
            .flatten()?;
        let (addr, exact_ip) = if ip.contains(':') {
            (IpAddr::V6(ip.parse().ok()?), true)
        } else {
            let octets: Vec<&str> = ip.split('.').collect();
            if octets.len() != 4 || octets.iter().any(|o| o.is_empty() || o.len() > 3) {
                return None;
            }
            let parsed: Vec<u8> = octets
                .iter()
                .map(|o| o.parse().ok())
                .collect::<Option<_>>()?;
            let leading = octets.iter().any(|o| o.len() > 1 && o.starts_with('0'));
            let addr = std::net::Ipv4Addr::new(parsed[0], parsed[1], parsed[2], parsed[3]);
            (IpAddr::V4(addr), !leading)
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (len <= max).then_some((Self { addr, len }, exact && exact_ip))
    }

    fn bits(addr: IpAddr) -> (u128, u8) {
        match addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        }
    }

    fn mask(len: u8, width: u8) -> u128 {
        let full = if width == 32 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        };
        if len == 0 { 0 } else { full & !(full >> len) }
    }

    /// Whether the prefix has bits set beyond its length (`10.0.0.1/8`).
    fn has_host_bits(&self) -> bool {
        let (bits, width) = Self::bits(self.addr);
        bits & !Self::mask(self.len, width) != 0
    }

    /// Whether `addr` is in this network.
    fn contains(&self, addr: IpAddr) -> bool {
        let (net, width) = Self::bits(self.addr);
        let (other, other_width) = Self::bits(addr);
        let mask = Self::mask(self.len, width);
        width == other_width && net & mask == other & mask
    }
}

/// Kubernetes' `IsValidCIDRForLegacyField` for a new value: refused when Go cannot parse it, or
/// when it is not canonical (leading zeros, an IPv4-mapped IPv6 address, host bits set). The
/// CIDR as parsed, when it parses.
fn cidr_problems(text: &str, at: &str, out: &mut Vec<FieldProblem>) -> Option<Cidr> {
    let Some((cidr, exact)) = Cidr::parse_sloppy(text) else {
        out.push(FieldProblem::new(
            at,
            format!(
                "Invalid value: {text:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
            ),
        ));
        return None;
    };
    let mapped = matches!(cidr.addr, IpAddr::V6(a) if a.to_ipv4_mapped().is_some());
    let problem = if !exact {
        Some("must not have leading 0s in IP or prefix length")
    } else if mapped {
        Some("must not have an IPv4-mapped IPv6 address")
    } else if cidr.has_host_bits() {
        Some("must not have bits set beyond the prefix length")
    } else {
        None
    };
    if let Some(problem) = problem {
        out.push(FieldProblem::new(
            at,
            format!("Invalid value: {text:?}: {problem}"),
        ));
    }
    Some(cidr)
}

/// Kubernetes' `ValidateLabelSelector`: `matchLabels` as labels, then each expression's
/// operator and values, then its key.
pub(super) fn label_selector(selector: &Value, at: &str, out: &mut Vec<FieldProblem>) {
    let invalid = |out: &mut Vec<FieldProblem>, field: &str, value: &str, problems: Vec<String>| {
        for problem in problems {
            out.push(FieldProblem::new(
                field,
                format!("Invalid value: {value:?}: {problem}"),
            ));
        }
    };
    if let Some(labels) = selector["matchLabels"].as_object() {
        let field = format!("{at}.matchLabels");
        for (key, value) in labels {
            invalid(out, &field, key, key_problems(key));
            let value = value.as_str().unwrap_or("");
            invalid(out, &field, value, value_problems(value));
        }
    }
    for (i, expr) in items(&selector["matchExpressions"]) {
        let here = format!("{at}.matchExpressions[{i}]");
        let values = expr["values"].as_array().map_or(0, Vec::len);
        match expr["operator"].as_str().unwrap_or("") {
            "In" | "NotIn" if values == 0 => out.push(FieldProblem::new(
                format!("{here}.values"),
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if values > 0 => out.push(FieldProblem::new(
                format!("{here}.values"),
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(FieldProblem::new(
                format!("{here}.operator"),
                format!("Invalid value: {other:?}: not a valid selector operator"),
            )),
        }
        let key = expr["key"].as_str().unwrap_or("");
        invalid(out, &format!("{here}.key"), key, key_problems(key));
    }
}

/// Character sequences an `Exact` or `Prefix` Ingress path may not contain.
const INVALID_PATH_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
/// Endings an `Exact` or `Prefix` Ingress path may not have.
const INVALID_PATH_SUFFIXES: [&str; 2] = ["/..", "/."];

fn ingress(spec: &Value, out: &mut Vec<FieldProblem>) {
    for (i, rule) in items(&spec["rules"]) {
        for (j, path) in items(&rule["http"]["paths"]) {
            ingress_path(path, &format!("spec.rules[{i}].http.paths[{j}]"), out);
        }
    }
}

fn ingress_path(path: &Value, at: &str, out: &mut Vec<FieldProblem>) {
    let text = path["path"].as_str().unwrap_or("");
    let absolute = |out: &mut Vec<FieldProblem>| {
        if !text.starts_with('/') {
            out.push(FieldProblem::new(
                format!("{at}.path"),
                format!("Invalid value: {text:?}: must be an absolute path"),
            ));
        }
    };
    match path["pathType"].as_str() {
        None => out.push(FieldProblem::new(
            format!("{at}.pathType"),
            "Required value: pathType must be specified",
        )),
        Some("Exact" | "Prefix") => {
            absolute(out);
            for seq in INVALID_PATH_SEQUENCES.iter().filter(|s| text.contains(**s)) {
                out.push(FieldProblem::new(
                    format!("{at}.path"),
                    format!("Invalid value: {text:?}: must not contain '{seq}'"),
                ));
            }
            for suffix in INVALID_PATH_SUFFIXES.iter().filter(|s| text.ends_with(**s)) {
                out.push(FieldProblem::new(
                    format!("{at}.path"),
                    format!("Invalid value: {text:?}: cannot end with '{suffix}'"),
                ));
            }
        }
        Some("ImplementationSpecific") => {
            if !text.is_empty() {
                absolute(out);
            }
        }
        Some(other) => out.push(FieldProblem::new(
            format!("{at}.pathType"),
            format!(
                "Unsupported value: {other:?}: supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\""
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
