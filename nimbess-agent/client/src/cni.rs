//! The CNI's own vocabulary (containernetworking/cni SPEC.md), as the agent
//! and the plugin use it: commands, error codes, a request, an attachment,
//! a result. These are the types the agent's logic takes and returns and
//! [`crate::AgentConnection`] carries; [`crate::wire`] converts them to and
//! from protobuf, and the plugin prints them as the spec's JSON documents
//! through serde.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use nephrite_pipeline::{IpCidr, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vif::VifRef;

#[cfg(test)]
mod tests;

/// CNI versions the plugin and the agent speak.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["0.4.0", "1.0.0", "1.1.0"];

/// The CNI commands (`CNI_COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Command {
    /// Attach a container's interface.
    Add,
    /// Detach it (idempotent).
    Del,
    /// Check it is as ADD left it.
    Check,
    /// Can the plugin take ADDs?
    Status,
    /// Remove every attachment not in a valid list.
    Gc,
    /// Which versions the plugin speaks.
    Version,
}

impl Command {
    /// Every command, in the spec's order.
    pub const ALL: [Command; 6] = [
        Command::Add,
        Command::Del,
        Command::Check,
        Command::Status,
        Command::Gc,
        Command::Version,
    ];

    /// The spelling in `CNI_COMMAND`.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }

    /// The command spelled `text`, if any.
    pub fn parse(text: &str) -> Option<Command> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The CNI error codes this agent answers with (the spec's numbers; 100 and
/// above are the plugin's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "u32", try_from = "u32")]
pub enum ErrorCode {
    /// 1: incompatible CNI version.
    IncompatibleVersion,
    /// 3: unknown container (CHECK).
    UnknownContainer,
    /// 4: invalid environment variables.
    InvalidEnvironment,
    /// 5: I/O failure.
    Io,
    /// 6: failed to decode content.
    Decode,
    /// 7: invalid network config.
    InvalidConfig,
    /// 11: try again later.
    TryAgainLater,
    /// 50: the plugin is not available (STATUS).
    NotAvailable,
    /// 101: the data plane driver failed (Nimbess's own).
    DriverFailure,
}

impl ErrorCode {
    const NUMBERS: [(ErrorCode, u32); 9] = [
        (ErrorCode::IncompatibleVersion, 1),
        (ErrorCode::UnknownContainer, 3),
        (ErrorCode::InvalidEnvironment, 4),
        (ErrorCode::Io, 5),
        (ErrorCode::Decode, 6),
        (ErrorCode::InvalidConfig, 7),
        (ErrorCode::TryAgainLater, 11),
        (ErrorCode::NotAvailable, 50),
        (ErrorCode::DriverFailure, 101),
    ];

    /// The spec's number.
    pub fn number(self) -> u32 {
        Self::NUMBERS
            .iter()
            .find(|(c, _)| *c == self)
            .map_or(0, |(_, n)| *n)
    }
}

impl From<ErrorCode> for u32 {
    fn from(code: ErrorCode) -> u32 {
        code.number()
    }
}

/// A CNI error number this agent does not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("CNI error code {0} is not one this agent uses")]
pub struct UnknownErrorCode(pub u32);

impl TryFrom<u32> for ErrorCode {
    type Error = UnknownErrorCode;

    fn try_from(number: u32) -> Result<Self, Self::Error> {
        Self::NUMBERS
            .iter()
            .find(|(_, n)| *n == number)
            .map(|(c, _)| *c)
            .ok_or(UnknownErrorCode(number))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.number())
    }
}

/// A CNI error: what the plugin prints with a non-zero exit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("CNI error {code}: {msg}")]
pub struct CniError {
    /// The code.
    pub code: ErrorCode,
    /// Short message.
    pub msg: String,
    /// Details (empty when none).
    #[serde(default)]
    pub details: String,
}

impl CniError {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// The same error with details.
    #[must_use]
    pub fn with_details(mut self, details: impl fmt::Display) -> Self {
        self.details = details.to_string();
        self
    }

    /// The spec's error document for `cni_version`.
    pub fn to_json(&self, cni_version: &str) -> Value {
        #[derive(Serialize)]
        struct Document<'a> {
            #[serde(rename = "cniVersion")]
            cni_version: &'a str,
            #[serde(flatten)]
            error: &'a CniError,
        }
        serde_json::to_value(Document {
            cni_version,
            error: self,
        })
        .unwrap_or(Value::Null)
    }
}

/// A container's interface, as `cni.dev/valid-attachments` lists it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Attachment {
    /// Container id.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Interface name in the container.
    pub ifname: String,
}

/// One CNI invocation as the agent receives it: the environment and the
/// network configuration of the plugin's run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CniRequest {
    /// cniVersion of the network configuration.
    pub cni_version: String,
    /// CNI_CONTAINERID (empty for STATUS and GC).
    pub container_id: String,
    /// CNI_NETNS, the path of the network namespace (may be empty for DEL).
    pub netns: String,
    /// CNI_IFNAME.
    pub ifname: String,
    /// CNI_ARGS as key/value pairs.
    pub args: BTreeMap<String, String>,
    /// The configuration's `name`: the agent's network (meta key).
    pub network: String,
    /// The whole network configuration as the runtime sent it.
    pub network_config: Value,
    /// prevResult, when chained.
    pub prev_result: Option<Value>,
    /// K8S_POD_NAME from CNI_ARGS.
    pub pod_name: Option<String>,
    /// K8S_POD_NAMESPACE from CNI_ARGS.
    pub pod_namespace: Option<String>,
    /// GC only: the attachments to keep.
    pub valid_attachments: Vec<Attachment>,
    /// ADD only: plug a VIF reserved before ([`crate::vif`]) with its address.
    pub vif: Option<VifRef>,
}

/// An interface of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Name.
    pub name: String,
    /// MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<Mac>,
    /// MTU (CNI 1.0.0 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// The netns path for a container interface; none for a host interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// An address of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    /// The address with its prefix length (either family: a dual-stack
    /// network's port has one of each).
    pub address: IpCidr,
    /// The gateway (of the address's family).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
    /// Index into the result's interfaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<u32>,
}

/// A route of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// Destination prefix (either family).
    pub dst: IpCidr,
    /// Next hop (of the destination's family); none for a connected route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
}

/// DNS settings of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dns {
    /// Name servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// Resolver options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// The result of an ADD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniResult {
    /// Interfaces created.
    pub interfaces: Vec<Interface>,
    /// Addresses assigned.
    pub ips: Vec<IpConfig>,
    /// Routes installed.
    pub routes: Vec<Route>,
    /// DNS settings.
    #[serde(default)]
    pub dns: Dns,
}

impl CniResult {
    /// The result document for `cni_version`. Before 1.0.0 an interface has
    /// no `mtu` and every address says `version: "4"`.
    pub fn to_json(&self, cni_version: &str) -> Value {
        #[derive(Serialize)]
        struct LegacyIp<'a> {
            version: &'static str,
            #[serde(flatten)]
            ip: &'a IpConfig,
        }
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Ips<'a> {
            Current(&'a [IpConfig]),
            Legacy(Vec<LegacyIp<'a>>),
        }
        #[derive(Serialize)]
        struct Document<'a> {
            #[serde(rename = "cniVersion")]
            cni_version: &'a str,
            interfaces: Vec<Interface>,
            ips: Ips<'a>,
            routes: &'a [Route],
            dns: &'a Dns,
        }
        let legacy = cni_version.starts_with("0.");
        let interfaces = self
            .interfaces
            .iter()
            .map(|i| Interface {
                mtu: i.mtu.filter(|_| !legacy),
                ..i.clone()
            })
            .collect();
        let ips = if legacy {
            Ips::Legacy(
                self.ips
                    .iter()
                    .map(|ip| LegacyIp { version: "4", ip })
                    .collect(),
            )
        } else {
            Ips::Current(&self.ips)
        };
        serde_json::to_value(Document {
            cni_version,
            interfaces,
            ips,
            routes: &self.routes,
            dns: &self.dns,
        })
        .unwrap_or(Value::Null)
    }
}

/// The VERSION answer.
pub fn version_json(request_version: &str) -> Value {
    serde_json::json!({"cniVersion": request_version, "supportedVersions": SUPPORTED_VERSIONS})
}

/// A Linux interface name: 1–15 bytes, not `.`/`..`, no `/`, `:` or whitespace.
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace())
}
