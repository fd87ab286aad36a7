//! Protobuf ⇄ the domain types of [`crate::cni`] and [`crate::vif`], in one place for both
//! ends of the socket: the clients of this crate and the agent's services. Wire to domain is
//! `TryFrom` with a typed [`WireError`] naming the field that did not parse; domain to wire
//! cannot fail. Empty strings on the wire stand for absent values (proto3 has no optional
//! scalars here).
//!
//! Callers of the clients never need this module; the agent's server uses [`reply`] and the
//! conversions' trait impls.

use std::net::IpAddr;

use nephrite_pipeline::{IpCidr, Mac};
use nephrite_proto::nimbess::cni::v1 as pb;
use serde_json::Value;

use crate::cni::{
    Attachment, CniError, CniRequest, CniResult, Dns, ErrorCode, Interface, IpConfig, Route,
    UnknownErrorCode,
};
use crate::vif::VifRef;

#[cfg(test)]
mod tests;
mod vif;

/// A wire message the domain cannot take, naming the field.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A JSON field that does not parse.
    #[error("{field} is not valid JSON: {source}")]
    Json {
        /// The message field.
        field: &'static str,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// An address, prefix or MAC that does not parse.
    #[error("{field} {value:?}: {why}")]
    Value {
        /// The message field.
        field: &'static str,
        /// What it held.
        value: String,
        /// The parser's verdict.
        why: String,
    },
    /// An error code the domain does not know.
    #[error(transparent)]
    Code(#[from] UnknownErrorCode),
}

fn optional(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn parse<T: std::str::FromStr>(field: &'static str, text: &str) -> Result<T, WireError>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e: T::Err| WireError::Value {
        field,
        value: text.to_string(),
        why: e.to_string(),
    })
}

fn parse_optional<T: std::str::FromStr>(
    field: &'static str,
    text: &str,
) -> Result<Option<T>, WireError>
where
    T::Err: std::fmt::Display,
{
    if text.is_empty() {
        Ok(None)
    } else {
        parse(field, text).map(Some)
    }
}

fn json(field: &'static str, text: &str) -> Result<Option<Value>, WireError> {
    if text.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|source| WireError::Json { field, source })
}

impl TryFrom<pb::CniRequest> for CniRequest {
    type Error = WireError;

    fn try_from(req: pb::CniRequest) -> Result<Self, WireError> {
        Ok(CniRequest {
            network_config: json("network_config_json", &req.network_config_json)?
                .unwrap_or(Value::Null),
            prev_result: json("prev_result_json", &req.prev_result_json)?,
            cni_version: req.cni_version,
            container_id: req.container_id,
            netns: req.netns,
            ifname: req.ifname,
            args: req.args.into_iter().collect(),
            network: req.network,
            pod_name: optional(req.pod_name),
            pod_namespace: optional(req.pod_namespace),
            valid_attachments: req
                .valid_attachments
                .into_iter()
                .map(|a| Attachment {
                    container_id: a.container_id,
                    ifname: a.ifname,
                })
                .collect(),
            vif: req.vif.map(VifRef::from),
        })
    }
}

impl From<&CniRequest> for pb::CniRequest {
    fn from(req: &CniRequest) -> Self {
        pb::CniRequest {
            cni_version: req.cni_version.clone(),
            container_id: req.container_id.clone(),
            netns: req.netns.clone(),
            ifname: req.ifname.clone(),
            args: req.args.clone().into_iter().collect(),
            network: req.network.clone(),
            network_config_json: match &req.network_config {
                Value::Null => String::new(),
                v => v.to_string(),
            },
            prev_result_json: req
                .prev_result
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default(),
            pod_name: req.pod_name.clone().unwrap_or_default(),
            pod_namespace: req.pod_namespace.clone().unwrap_or_default(),
            valid_attachments: req
                .valid_attachments
                .iter()
                .map(|a| pb::Attachment {
                    container_id: a.container_id.clone(),
                    ifname: a.ifname.clone(),
                })
                .collect(),
            vif: req.vif.as_ref().map(pb::VifRef::from),
        }
    }
}

impl From<&CniResult> for pb::CniResult {
    fn from(r: &CniResult) -> Self {
        pb::CniResult {
            interfaces: r
                .interfaces
                .iter()
                .map(|i| pb::Interface {
                    name: i.name.clone(),
                    mac: i.mac.map(|m| m.to_string()).unwrap_or_default(),
                    mtu: i.mtu.unwrap_or(0),
                    sandbox: i.sandbox.clone().unwrap_or_default(),
                })
                .collect(),
            ips: r
                .ips
                .iter()
                .map(|ip| pb::IpConfig {
                    address: ip.address.to_string(),
                    gateway: ip.gateway.map(|g| g.to_string()).unwrap_or_default(),
                    interface: ip
                        .interface
                        .and_then(|i| i32::try_from(i).ok())
                        .unwrap_or(-1),
                })
                .collect(),
            routes: r
                .routes
                .iter()
                .map(|route| pb::Route {
                    dst: route.dst.to_string(),
                    gw: route.gw.map(|g| g.to_string()).unwrap_or_default(),
                })
                .collect(),
            dns: Some(pb::Dns {
                nameservers: r.dns.nameservers.clone(),
                domain: r.dns.domain.clone().unwrap_or_default(),
                search: r.dns.search.clone(),
                options: r.dns.options.clone(),
            }),
        }
    }
}

impl TryFrom<pb::CniResult> for CniResult {
    type Error = WireError;

    fn try_from(r: pb::CniResult) -> Result<Self, WireError> {
        let interfaces = r
            .interfaces
            .into_iter()
            .map(|i| {
                Ok(Interface {
                    mac: parse_optional::<Mac>("interfaces.mac", &i.mac)?,
                    mtu: (i.mtu != 0).then_some(i.mtu),
                    sandbox: optional(i.sandbox),
                    name: i.name,
                })
            })
            .collect::<Result<_, WireError>>()?;
        let ips = r
            .ips
            .into_iter()
            .map(|ip| {
                Ok(IpConfig {
                    address: parse::<IpCidr>("ips.address", &ip.address)?,
                    gateway: parse_optional::<IpAddr>("ips.gateway", &ip.gateway)?,
                    interface: u32::try_from(ip.interface).ok(),
                })
            })
            .collect::<Result<_, WireError>>()?;
        let routes = r
            .routes
            .into_iter()
            .map(|route| {
                Ok(Route {
                    dst: parse::<IpCidr>("routes.dst", &route.dst)?,
                    gw: parse_optional::<IpAddr>("routes.gw", &route.gw)?,
                })
            })
            .collect::<Result<_, WireError>>()?;
        let dns = r.dns.unwrap_or_default();
        Ok(CniResult {
            interfaces,
            ips,
            routes,
            dns: Dns {
                nameservers: dns.nameservers,
                domain: optional(dns.domain),
                search: dns.search,
                options: dns.options,
            },
        })
    }
}

impl From<&CniError> for pb::CniError {
    fn from(e: &CniError) -> Self {
        pb::CniError {
            code: e.code.number(),
            msg: e.msg.clone(),
            details: e.details.clone(),
        }
    }
}

impl TryFrom<pb::CniError> for CniError {
    type Error = WireError;

    fn try_from(e: pb::CniError) -> Result<Self, WireError> {
        Ok(CniError {
            code: ErrorCode::try_from(e.code)?,
            msg: e.msg,
            details: e.details,
        })
    }
}

/// The reply to a CNI command: a result (ADD), nothing (the other
/// commands) or an error.
pub fn reply(outcome: &Result<Option<CniResult>, CniError>) -> pb::CniReply {
    match outcome {
        Ok(result) => pb::CniReply {
            result: result.as_ref().map(pb::CniResult::from),
            error: None,
        },
        Err(e) => pb::CniReply {
            result: None,
            error: Some(e.into()),
        },
    }
}

/// What a reply says, as [`reply`] built it (the CNI client's side).
///
/// # Errors
/// A field of the reply does not parse.
pub(crate) fn outcome(
    reply: pb::CniReply,
) -> Result<Result<Option<CniResult>, CniError>, WireError> {
    if let Some(error) = reply.error {
        return Ok(Err(error.try_into()?));
    }
    Ok(Ok(reply.result.map(CniResult::try_from).transpose()?))
}
