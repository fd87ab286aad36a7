//! Protobuf ⇄ CNI domain types. Wire to domain is `TryFrom` with a typed
//! [`WireError`] naming the field that did not parse; domain to wire cannot
//! fail. Empty strings on the wire stand for absent values (proto3 has no
//! optional scalars here).

use std::net::Ipv4Addr;

use nephrite_pipeline::{Ipv4Cidr, Mac};
use nephrite_proto::nimbess::cni::v1 as pb;
use serde_json::Value;

use crate::cni::{
    Attachment, CniError, CniRequest, CniResult, Dns, ErrorCode, Interface, IpConfig, Route,
    UnknownErrorCode,
};

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

pub(crate) fn parse<T: std::str::FromStr>(field: &'static str, text: &str) -> Result<T, WireError>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e: T::Err| WireError::Value {
        field,
        value: text.to_string(),
        why: e.to_string(),
    })
}

pub(crate) fn parse_optional<T: std::str::FromStr>(
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
            vif: req.vif.map(|v| crate::vif::VifRef {
                pod_uid: v.pod_uid,
                key: v.key,
            }),
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
            vif: req.vif.as_ref().map(|v| pb::VifRef {
                pod_uid: v.pod_uid.clone(),
                key: v.key.clone(),
            }),
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
                    address: parse::<Ipv4Cidr>("ips.address", &ip.address)?,
                    gateway: parse_optional::<Ipv4Addr>("ips.gateway", &ip.gateway)?,
                    interface: u32::try_from(ip.interface).ok(),
                })
            })
            .collect::<Result<_, WireError>>()?;
        let routes = r
            .routes
            .into_iter()
            .map(|route| {
                Ok(Route {
                    dst: parse::<Ipv4Cidr>("routes.dst", &route.dst)?,
                    gw: parse_optional::<Ipv4Addr>("routes.gw", &route.gw)?,
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

/// What a reply says, as [`reply`] built it.
///
/// # Errors
/// A field of the reply does not parse.
pub fn outcome(reply: pb::CniReply) -> Result<Result<Option<CniResult>, CniError>, WireError> {
    if let Some(error) = reply.error {
        return Ok(Err(error.try_into()?));
    }
    Ok(Ok(reply.result.map(CniResult::try_from).transpose()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> CniResult {
        CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: Some("02:00:00:00:00:01".parse().expect("mac")),
                mtu: Some(1450),
                sandbox: Some("/run/netns/a".into()),
            }],
            ips: vec![IpConfig {
                address: "10.0.0.2/24".parse().expect("cidr"),
                gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
                interface: Some(0),
            }],
            routes: vec![Route {
                dst: "0.0.0.0/0".parse().expect("cidr"),
                gw: Some(Ipv4Addr::new(10, 0, 0, 1)),
            }],
            dns: Dns::default(),
        }
    }

    #[test]
    fn results_and_errors_round_trip_through_the_reply() {
        let ok = Ok(Some(result()));
        assert_eq!(outcome(reply(&ok)).expect("parses"), ok);
        let none = Ok(None);
        assert_eq!(outcome(reply(&none)).expect("parses"), none);
        let err = Err(CniError::new(ErrorCode::DriverFailure, "veth").with_details("gone"));
        assert_eq!(outcome(reply(&err)).expect("parses"), err);
    }

    #[test]
    fn requests_round_trip() {
        let req = CniRequest {
            cni_version: "1.0.0".into(),
            container_id: "c".into(),
            netns: "/run/netns/c".into(),
            ifname: "eth0".into(),
            args: [("K8S_POD_NAME".to_string(), "web".to_string())].into(),
            network: "blue".into(),
            network_config: serde_json::json!({"name": "blue"}),
            prev_result: Some(serde_json::json!({"ips": []})),
            pod_name: Some("web".into()),
            pod_namespace: None,
            valid_attachments: vec![Attachment {
                container_id: "c".into(),
                ifname: "eth0".into(),
            }],
            vif: Some(crate::vif::VifRef {
                pod_uid: "u".into(),
                key: "network/ns/a/0".into(),
            }),
        };
        let back = CniRequest::try_from(pb::CniRequest::from(&req)).expect("parses");
        assert_eq!(back, req);
    }

    #[test]
    fn a_bad_field_is_named() {
        let mut wire = pb::CniResult::from(&result());
        wire.ips[0].address = "10.0.0.300/24".into();
        let e = CniResult::try_from(wire).expect_err("bad address");
        assert!(e.to_string().contains("ips.address"), "{e}");
        let wire = pb::CniRequest {
            prev_result_json: "{".into(),
            ..Default::default()
        };
        let e = CniRequest::try_from(wire).expect_err("bad json");
        assert!(e.to_string().contains("prev_result_json"), "{e}");
        let e = CniError::try_from(pb::CniError {
            code: 42,
            ..Default::default()
        })
        .expect_err("unknown code");
        assert!(e.to_string().contains("42"), "{e}");
    }
}
