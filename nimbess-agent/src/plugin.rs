//! The `nimbess-cni` plugin: what the container runtime executes. It reads
//! the CNI environment and the network configuration on stdin, forwards the
//! command to the agent over its Unix socket, and prints the CNI result or
//! error on stdout (its only output; logs go to stderr).
//!
//! Parsing ([`Invocation::from_env`], [`NetConf::parse`]) and printing
//! ([`result_json`], [`CniFailure::to_json`]) are plain functions so they are
//! tested without a process; [`run`] wires them to the agent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nephrite_proto::nimbess::cni::v1::{self as pb, cni_client::CniClient};
use nephrite_runtime::{DialOptions, Endpoint, dial_with};
use serde_json::{Map, Value, json};

#[cfg(test)]
mod tests;

/// CNI versions this plugin speaks.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["0.4.0", "1.0.0", "1.1.0"];
/// Where the agent listens unless the config says `agentSocket`.
pub const DEFAULT_AGENT_SOCKET: &str = "/run/nimbess/agent.sock";
/// How long the plugin waits for the agent's socket before answering 11.
pub const AGENT_WAIT: Duration = Duration::from_secs(10);

/// CNI error codes used here (the spec's numbers).
pub mod code {
    /// Incompatible CNI version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unknown container (CHECK).
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid environment variables.
    pub const INVALID_ENVIRONMENT: u32 = 4;
    /// Failed to decode content.
    pub const DECODE: u32 = 6;
    /// Invalid network config.
    pub const INVALID_CONFIG: u32 = 7;
    /// Try again later.
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// The plugin is not available (STATUS).
    pub const NOT_AVAILABLE: u32 = 50;
    /// Driver failure (plugin-specific).
    pub const DRIVER_FAILURE: u32 = 101;
}

/// A CNI error to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniFailure {
    /// The code.
    pub code: u32,
    /// Short message.
    pub msg: String,
    /// Details.
    pub details: String,
}

impl CniFailure {
    /// An error with a code and message.
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        CniFailure {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// The spec's error object.
    pub fn to_json(&self, cni_version: &str) -> Value {
        json!({
            "cniVersion": cni_version,
            "code": self.code,
            "msg": self.msg,
            "details": self.details,
        })
    }
}

impl From<pb::CniError> for CniFailure {
    fn from(e: pb::CniError) -> Self {
        CniFailure {
            code: e.code,
            msg: e.msg,
            details: e.details,
        }
    }
}

/// The CNI commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// STATUS.
    Status,
    /// GC.
    Gc,
    /// VERSION.
    Version,
}

/// What the environment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// CNI_COMMAND.
    pub command: Command,
    /// CNI_CONTAINERID (empty for STATUS, GC, VERSION).
    pub container_id: String,
    /// CNI_NETNS (may be empty for DEL).
    pub netns: String,
    /// CNI_IFNAME.
    pub ifname: String,
    /// CNI_ARGS parsed.
    pub args: BTreeMap<String, String>,
}

impl Invocation {
    /// Read the CNI variables from `env` (an injected environment).
    ///
    /// # Errors
    /// Code 4 naming the missing or invalid variable.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Self, CniFailure> {
        let get = |k: &str| env.get(k).map(String::as_str).unwrap_or("");
        let command = match get("CNI_COMMAND") {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            "VERSION" => Command::Version,
            "" => {
                return Err(CniFailure::new(
                    code::INVALID_ENVIRONMENT,
                    "CNI_COMMAND is not set",
                ));
            }
            other => {
                return Err(CniFailure::new(
                    code::INVALID_ENVIRONMENT,
                    format!(
                        "CNI_COMMAND {other:?} is not one of ADD, DEL, CHECK, STATUS, GC, VERSION"
                    ),
                ));
            }
        };
        let needs_container = matches!(command, Command::Add | Command::Del | Command::Check);
        let needs_netns = matches!(command, Command::Add | Command::Check);
        let mut required = Vec::new();
        if needs_container {
            required.extend(["CNI_CONTAINERID", "CNI_IFNAME"]);
        }
        if needs_netns {
            required.push("CNI_NETNS");
        }
        for var in required {
            if get(var).is_empty() {
                return Err(CniFailure::new(
                    code::INVALID_ENVIRONMENT,
                    format!("{var} is not set"),
                ));
            }
        }
        let ifname = get("CNI_IFNAME");
        if needs_container && !valid_ifname(ifname) {
            return Err(CniFailure::new(
                code::INVALID_ENVIRONMENT,
                format!(
                    "CNI_IFNAME {ifname:?} is not a valid interface name (1–15 bytes, no '/', ':' or whitespace)"
                ),
            ));
        }
        let mut args = BTreeMap::new();
        for pair in get("CNI_ARGS").split(';').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                CniFailure::new(
                    code::INVALID_ENVIRONMENT,
                    format!("CNI_ARGS entry {pair:?} is not KEY=VALUE"),
                )
            })?;
            args.insert(k.to_string(), v.to_string());
        }
        Ok(Invocation {
            command,
            container_id: get("CNI_CONTAINERID").to_string(),
            netns: get("CNI_NETNS").to_string(),
            ifname: ifname.to_string(),
            args,
        })
    }
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

/// The network configuration on stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConf {
    /// cniVersion.
    pub cni_version: String,
    /// name: the agent's network.
    pub name: String,
    /// agentSocket, or the default.
    pub agent_socket: String,
    /// prevResult, when chained.
    pub prev_result: Option<Value>,
    /// GC: the attachments to keep.
    pub valid_attachments: Option<Vec<(String, String)>>,
    /// The whole document.
    pub raw: Value,
}

impl NetConf {
    /// Parse stdin.
    ///
    /// # Errors
    /// 6 when it is not a JSON object; 7 when `name`, `type` or
    /// `cniVersion` is missing or of the wrong type; 1 for an unsupported version.
    pub fn parse(stdin: &[u8]) -> Result<Self, CniFailure> {
        let raw: Value = serde_json::from_slice(stdin).map_err(|e| CniFailure {
            code: code::DECODE,
            msg: "network configuration is not valid JSON".into(),
            details: e.to_string(),
        })?;
        let Some(obj) = raw.as_object() else {
            return Err(CniFailure::new(
                code::DECODE,
                "network configuration is not a JSON object",
            ));
        };
        let string = |key: &str| -> Result<String, CniFailure> {
            match obj.get(key) {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                Some(_) => Err(CniFailure::new(
                    code::INVALID_CONFIG,
                    format!("network configuration field {key:?} must be a non-empty string"),
                )),
                None => Err(CniFailure::new(
                    code::INVALID_CONFIG,
                    format!("network configuration has no {key:?}"),
                )),
            }
        };
        let cni_version = string("cniVersion")?;
        let name = string("name")?;
        string("type")?;
        if !SUPPORTED_VERSIONS.contains(&cni_version.as_str()) {
            return Err(CniFailure {
                code: code::INCOMPATIBLE_VERSION,
                msg: format!("cniVersion {cni_version} is not supported"),
                details: format!("supported: {}", SUPPORTED_VERSIONS.join(", ")),
            });
        }
        let agent_socket = match obj.get("agentSocket") {
            None => DEFAULT_AGENT_SOCKET.to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => {
                return Err(CniFailure::new(
                    code::INVALID_CONFIG,
                    "agentSocket must be a non-empty string",
                ));
            }
        };
        let attachments = obj
            .get("cni.dev/valid-attachments")
            .or_else(|| obj.get("cni.dev/attachments"));
        let valid_attachments = match attachments {
            None => None,
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for item in items {
                    let c = item.get("containerID").and_then(Value::as_str);
                    let i = item.get("ifname").and_then(Value::as_str);
                    match (c, i) {
                        (Some(c), Some(i)) => out.push((c.to_string(), i.to_string())),
                        _ => {
                            return Err(CniFailure::new(
                                code::INVALID_CONFIG,
                                format!("attachment {item} needs containerID and ifname"),
                            ));
                        }
                    }
                }
                Some(out)
            }
            Some(_) => {
                return Err(CniFailure::new(
                    code::INVALID_CONFIG,
                    "cni.dev/valid-attachments must be a list",
                ));
            }
        };
        Ok(NetConf {
            cni_version,
            name,
            agent_socket,
            prev_result: obj.get("prevResult").cloned(),
            valid_attachments,
            raw,
        })
    }
}

/// The CNI result document for `version` (0.4.0 adds `version: "4"` to each IP).
pub fn result_json(result: &pb::CniResult, version: &str) -> Value {
    let legacy = version.starts_with("0.");
    let interfaces: Vec<Value> = result
        .interfaces
        .iter()
        .map(|i| {
            let mut o = Map::new();
            o.insert("name".into(), json!(i.name));
            if !i.mac.is_empty() {
                o.insert("mac".into(), json!(i.mac));
            }
            if i.mtu != 0 && !legacy {
                o.insert("mtu".into(), json!(i.mtu));
            }
            if !i.sandbox.is_empty() {
                o.insert("sandbox".into(), json!(i.sandbox));
            }
            Value::Object(o)
        })
        .collect();
    let ips: Vec<Value> = result
        .ips
        .iter()
        .map(|ip| {
            let mut o = Map::new();
            if legacy {
                o.insert("version".into(), json!("4"));
            }
            o.insert("address".into(), json!(ip.address));
            if !ip.gateway.is_empty() {
                o.insert("gateway".into(), json!(ip.gateway));
            }
            if ip.interface >= 0 {
                o.insert("interface".into(), json!(ip.interface));
            }
            Value::Object(o)
        })
        .collect();
    let routes: Vec<Value> = result
        .routes
        .iter()
        .map(|r| {
            let mut o = Map::new();
            o.insert("dst".into(), json!(r.dst));
            if !r.gw.is_empty() {
                o.insert("gw".into(), json!(r.gw));
            }
            Value::Object(o)
        })
        .collect();
    let dns = result.dns.clone().unwrap_or_default();
    let mut dns_obj = Map::new();
    if !dns.nameservers.is_empty() {
        dns_obj.insert("nameservers".into(), json!(dns.nameservers));
    }
    if !dns.domain.is_empty() {
        dns_obj.insert("domain".into(), json!(dns.domain));
    }
    if !dns.search.is_empty() {
        dns_obj.insert("search".into(), json!(dns.search));
    }
    if !dns.options.is_empty() {
        dns_obj.insert("options".into(), json!(dns.options));
    }
    json!({
        "cniVersion": version,
        "interfaces": interfaces,
        "ips": ips,
        "routes": routes,
        "dns": Value::Object(dns_obj),
    })
}

/// The VERSION answer.
pub fn version_json(request_version: &str) -> Value {
    json!({"cniVersion": request_version, "supportedVersions": SUPPORTED_VERSIONS})
}

/// What the plugin prints and its exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The document for stdout, if any (DEL, GC succeed silently).
    pub stdout: Option<Value>,
    /// Process exit code.
    pub exit_code: i32,
}

impl Outcome {
    fn failure(f: &CniFailure, version: &str) -> Self {
        Outcome {
            stdout: Some(f.to_json(version)),
            exit_code: 1,
        }
    }
}

/// Build the gRPC request from the environment and the config.
pub fn request(inv: &Invocation, conf: &NetConf) -> pb::CniRequest {
    pb::CniRequest {
        cni_version: conf.cni_version.clone(),
        container_id: inv.container_id.clone(),
        netns: inv.netns.clone(),
        ifname: inv.ifname.clone(),
        args: inv.args.clone().into_iter().collect(),
        network: conf.name.clone(),
        network_config_json: conf.raw.to_string(),
        prev_result_json: conf
            .prev_result
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default(),
        pod_name: inv.args.get("K8S_POD_NAME").cloned().unwrap_or_default(),
        pod_namespace: inv
            .args
            .get("K8S_POD_NAMESPACE")
            .cloned()
            .unwrap_or_default(),
        valid_attachments: conf
            .valid_attachments
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(container_id, ifname)| pb::Attachment {
                container_id,
                ifname,
            })
            .collect(),
    }
}

async fn connect(
    socket: &str,
    wait: Duration,
) -> Result<CniClient<tonic::transport::Channel>, CniFailure> {
    let endpoint = Endpoint::unix(socket);
    let options = DialOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Some(Duration::from_secs(120)),
        ..DialOptions::default()
    };
    let started = Instant::now();
    loop {
        match dial_with(&endpoint, &options).await {
            Ok(channel) => return Ok(CniClient::new(channel)),
            Err(e) if started.elapsed() >= wait => {
                return Err(CniFailure {
                    code: code::TRY_AGAIN_LATER,
                    msg: format!("the nimbess agent is unreachable at {socket}"),
                    details: e.to_string(),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Run one plugin invocation: `env` is the process environment, `stdin` the config.
pub async fn run(env: &BTreeMap<String, String>, stdin: &[u8]) -> Outcome {
    run_with_wait(env, stdin, AGENT_WAIT).await
}

/// [`run`] with a chosen wait for the agent's socket.
pub async fn run_with_wait(
    env: &BTreeMap<String, String>,
    stdin: &[u8],
    wait: Duration,
) -> Outcome {
    // Best effort at the request's version for error documents.
    let fallback_version = serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|v| {
            v.get("cniVersion")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .filter(|v| SUPPORTED_VERSIONS.contains(&v.as_str()))
        .unwrap_or_else(|| "1.1.0".to_string());
    let inv = match Invocation::from_env(env) {
        Ok(inv) => inv,
        Err(f) => return Outcome::failure(&f, &fallback_version),
    };
    if inv.command == Command::Version {
        return Outcome {
            stdout: Some(version_json(&fallback_version)),
            exit_code: 0,
        };
    }
    let conf = match NetConf::parse(stdin) {
        Ok(c) => c,
        Err(f) => return Outcome::failure(&f, &fallback_version),
    };
    let version = conf.cni_version.clone();
    if inv.command == Command::Gc && conf.valid_attachments.is_none() {
        return Outcome::failure(
            &CniFailure::new(
                code::INVALID_CONFIG,
                "GC needs cni.dev/valid-attachments (an empty list removes every attachment)",
            ),
            &version,
        );
    }
    let mut client = match connect(&conf.agent_socket, wait).await {
        Ok(c) => c,
        Err(f) => return Outcome::failure(&f, &version),
    };
    let req = request(&inv, &conf);
    let reply = match inv.command {
        Command::Add => client.add(req).await,
        Command::Del => client.del(req).await,
        Command::Check => client.check(req).await,
        Command::Status => client.status(req).await,
        Command::Gc => client.gc(req).await,
        Command::Version => unreachable_version(),
    };
    match reply {
        Err(status) => Outcome::failure(
            &CniFailure {
                code: code::TRY_AGAIN_LATER,
                msg: "the nimbess agent did not answer".into(),
                details: status.to_string(),
            },
            &version,
        ),
        Ok(reply) => {
            let reply = reply.into_inner();
            if let Some(err) = reply.error {
                return Outcome::failure(&err.into(), &version);
            }
            Outcome {
                stdout: reply.result.map(|r| result_json(&r, &version)),
                exit_code: 0,
            }
        }
    }
}

fn unreachable_version() -> Result<tonic::Response<pb::CniReply>, tonic::Status> {
    // VERSION is answered before dialing; kept total without a panic.
    Ok(tonic::Response::new(pb::CniReply::default()))
}
