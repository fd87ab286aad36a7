//! The `nimbess-cni` plugin: what the container runtime executes. It reads
//! the CNI environment and the network configuration on stdin, forwards the
//! command to the agent over its Unix socket, and prints the CNI result or
//! error on stdout (its only output; logs go to stderr).
//!
//! The plugin is its own crate so that what the runtime executes on every pod start links the
//! agent's client (`nephrite-nimbess-client`) and a Kubernetes client, not the agent's data
//! plane (netlink, etcd).
//!
//! Parsing ([`Invocation::from_env`], [`NetConf::parse`]) and the request
//! built from them ([`request`]) are plain functions so they are tested
//! without a process; [`run`] wires them to the agent through
//! [`AgentConnection`] and prints the [`nimbess_client::cni`] documents.
//!
//! The credentials it presents to the agent come from the network configuration or the
//! environment ([`credentials`]).
//!
//! ADD and DEL of a Kubernetes pod with VIFs (kuryr-l7's `openstack.org/kuryr-vif` record)
//! plug and unplug every interface the record lists ([`vif_plug`]): the additional
//! VIFs first and the main interface last (so the pod's default route is the main
//! interface's), all of them unplugged again when one fails.

use std::collections::BTreeMap;
use std::time::Duration;

use nimbess_client::AgentConnection;
use nimbess_client::cni::{
    Attachment, CniError, CniRequest, CniResult, Command, ErrorCode, SUPPORTED_VERSIONS,
    valid_ifname, version_json,
};
use serde_json::Value;

use crate::vif_plug::{Plug, PodRef};

pub mod credentials;
#[cfg(test)]
mod tests;
pub mod vif_plug;

/// Where the agent listens unless the config says `agentSocket`.
pub const DEFAULT_AGENT_SOCKET: &str = "/run/nimbess/agent.sock";
/// How long the plugin waits for the agent's socket before answering 11.
pub const AGENT_WAIT: Duration = Duration::from_secs(10);

/// The most the plugin reads from stdin. A network configuration is a few
/// hundred bytes, a chained `prevResult` a few kilobytes; more is refused
/// rather than buffered.
pub const MAX_STDIN: usize = 1 << 20;

/// Read the network configuration from `input`, at most `limit` bytes.
///
/// # Errors
/// 6 when there is more than `limit`; 5 when reading fails.
pub fn read_config(input: impl std::io::Read, limit: usize) -> Result<Vec<u8>, CniError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    input
        .take(cap)
        .read_to_end(&mut bytes)
        .map_err(|e| CniError::new(ErrorCode::Io, "cannot read stdin").with_details(e))?;
    if bytes.len() > limit {
        return Err(CniError::new(
            ErrorCode::Decode,
            format!("the network configuration on stdin is larger than {limit} bytes"),
        ));
    }
    Ok(bytes)
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
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Self, CniError> {
        let get = |k: &str| env.get(k).map(String::as_str).unwrap_or("");
        let invalid = |msg: String| CniError::new(ErrorCode::InvalidEnvironment, msg);
        let command = match get("CNI_COMMAND") {
            "" => return Err(invalid("CNI_COMMAND is not set".into())),
            text => Command::parse(text).ok_or_else(|| {
                invalid(format!(
                    "CNI_COMMAND {text:?} is not one of ADD, DEL, CHECK, STATUS, GC, VERSION"
                ))
            })?,
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
                return Err(invalid(format!("{var} is not set")));
            }
        }
        let ifname = get("CNI_IFNAME");
        if needs_container && !valid_ifname(ifname) {
            return Err(invalid(format!(
                "CNI_IFNAME {ifname:?} is not a valid interface name (1–15 bytes, no '/', ':' or whitespace)"
            )));
        }
        let mut args = BTreeMap::new();
        for pair in get("CNI_ARGS").split(';').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| invalid(format!("CNI_ARGS entry {pair:?} is not KEY=VALUE")))?;
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
    pub valid_attachments: Option<Vec<Attachment>>,
    /// The whole document.
    pub raw: Value,
}

impl NetConf {
    /// Parse stdin.
    ///
    /// # Errors
    /// 6 when it is not a JSON object; 7 when `name`, `type` or
    /// `cniVersion` is missing or of the wrong type; 1 for an unsupported version.
    pub fn parse(stdin: &[u8]) -> Result<Self, CniError> {
        let raw: Value = serde_json::from_slice(stdin).map_err(|e| {
            CniError::new(ErrorCode::Decode, "network configuration is not valid JSON")
                .with_details(e)
        })?;
        let Some(obj) = raw.as_object() else {
            return Err(CniError::new(
                ErrorCode::Decode,
                "network configuration is not a JSON object",
            ));
        };
        let invalid = |msg: String| CniError::new(ErrorCode::InvalidConfig, msg);
        let string = |key: &str| -> Result<String, CniError> {
            match obj.get(key) {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                Some(_) => Err(invalid(format!(
                    "network configuration field {key:?} must be a non-empty string"
                ))),
                None => Err(invalid(format!("network configuration has no {key:?}"))),
            }
        };
        let cni_version = string("cniVersion")?;
        let name = string("name")?;
        string("type")?;
        if !SUPPORTED_VERSIONS.contains(&cni_version.as_str()) {
            return Err(CniError::new(
                ErrorCode::IncompatibleVersion,
                format!("cniVersion {cni_version} is not supported"),
            )
            .with_details(format!("supported: {}", SUPPORTED_VERSIONS.join(", "))));
        }
        let agent_socket = match obj.get("agentSocket") {
            None => DEFAULT_AGENT_SOCKET.to_string(),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => return Err(invalid("agentSocket must be a non-empty string".into())),
        };
        let valid_attachments = obj
            .get("cni.dev/valid-attachments")
            .or_else(|| obj.get("cni.dev/attachments"))
            .map(|list| {
                serde_json::from_value::<Vec<Attachment>>(list.clone()).map_err(|e| {
                    invalid(
                        "cni.dev/valid-attachments must be a list of {containerID, ifname}".into(),
                    )
                    .with_details(e)
                })
            })
            .transpose()?;
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

/// What the plugin prints and its exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The document for stdout, if any (DEL, GC succeed silently).
    pub stdout: Option<Value>,
    /// Process exit code.
    pub exit_code: i32,
}

impl Outcome {
    fn failure(f: &CniError, version: &str) -> Self {
        Outcome {
            stdout: Some(f.to_json(version)),
            exit_code: 1,
        }
    }
}

/// The agent's request from the environment and the config.
pub fn request(inv: &Invocation, conf: &NetConf) -> CniRequest {
    CniRequest {
        cni_version: conf.cni_version.clone(),
        container_id: inv.container_id.clone(),
        netns: inv.netns.clone(),
        ifname: inv.ifname.clone(),
        args: inv.args.clone(),
        network: conf.name.clone(),
        network_config: conf.raw.clone(),
        prev_result: conf.prev_result.clone(),
        pod_name: inv.args.get("K8S_POD_NAME").cloned(),
        pod_namespace: inv.args.get("K8S_POD_NAMESPACE").cloned(),
        valid_attachments: conf.valid_attachments.clone().unwrap_or_default(),
        vif: None,
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
            &CniError::new(
                ErrorCode::InvalidConfig,
                "GC needs cni.dev/valid-attachments (an empty list removes every attachment)",
            ),
            &version,
        );
    }
    let credentials = match credentials::agent_credentials(&conf.raw, env) {
        Ok(c) => c,
        Err(f) => return Outcome::failure(&f, &version),
    };
    let mut agent = match AgentConnection::connect(&conf.agent_socket, &credentials, wait).await {
        Ok(c) => c,
        Err(f) => return Outcome::failure(&f, &version),
    };
    let outcome = match inv.command {
        Command::Add => add(&mut agent, &inv, &conf, env).await.map(Some),
        Command::Del => del(&mut agent, &inv, &conf, env).await.map(|()| None),
        command => agent.call(command, &request(&inv, &conf)).await,
    };
    match outcome {
        Err(f) => Outcome::failure(&f, &version),
        Ok(result) => Outcome {
            stdout: result.map(|r| r.to_json(&version)),
            exit_code: 0,
        },
    }
}

/// The request plugging `plug`.
fn plug_request(inv: &Invocation, conf: &NetConf, plug: &Plug) -> CniRequest {
    let mut req = request(inv, conf);
    req.ifname.clone_from(&plug.ifname);
    req.network.clone_from(&plug.network);
    req.vif.clone_from(&plug.vif);
    req
}

/// What to plug: the pod's recorded VIFs when the runtime names a pod and a cluster is
/// configured, else the one interface of the configuration.
async fn plugs(
    inv: &Invocation,
    conf: &NetConf,
    env: &BTreeMap<String, String>,
) -> Result<Vec<Plug>, CniError> {
    let plain = Plug {
        ifname: inv.ifname.clone(),
        network: conf.name.clone(),
        vif: None,
    };
    let (Some(pod), Some(kubeconfig)) = (
        PodRef::from_args(&inv.args),
        vif_plug::kubeconfig_path(&conf.raw, env),
    ) else {
        return Ok(vec![plain]);
    };
    let timeout = vif_plug::vif_timeout(&conf.raw)?;
    let client = vif_plug::client(&kubeconfig).await?;
    vif_plug::wait_for_record(&client, &pod, &inv.ifname, &conf.name, timeout).await
}

/// ADD: every interface of the pod, additional VIFs first, the main one last; one failure
/// unplugs what this ADD plugged.
async fn add(
    agent: &mut AgentConnection,
    inv: &Invocation,
    conf: &NetConf,
    env: &BTreeMap<String, String>,
) -> Result<CniResult, CniError> {
    let plugs = plugs(inv, conf, env).await?;
    let order: Vec<usize> = (1..plugs.len()).chain([0]).collect();
    let mut results: Vec<(usize, CniResult)> = Vec::new();
    for i in order {
        let plug = &plugs[i];
        let outcome = agent
            .call(Command::Add, &plug_request(inv, conf, plug))
            .await
            .and_then(|r| {
                r.ok_or_else(|| CniError::new(ErrorCode::Decode, "the agent's ADD had no result"))
            });
        match outcome {
            Ok(result) => results.push((i, result)),
            Err(e) => {
                for (j, _) in results.iter().rev() {
                    let undo = plug_request(inv, conf, &plugs[*j]);
                    if let Err(undo_error) = agent.call(Command::Del, &undo).await {
                        tracing::warn!(ifname = %plugs[*j].ifname, error = %undo_error.msg, "unplugging after a failed ADD");
                    }
                }
                if plugs.len() == 1 {
                    return Err(e);
                }
                return Err(CniError {
                    msg: format!(
                        "interface {} on network {}: {}",
                        plug.ifname, plug.network, e.msg
                    ),
                    ..e
                });
            }
        }
    }
    results.sort_by_key(|(i, _)| *i);
    Ok(vif_plug::merge(
        results.into_iter().map(|(_, r)| r).collect(),
    ))
}

/// DEL: the main interface, and the pod's recorded VIFs when the pod can still be read (when
/// it cannot, releasing the VIFs unplugs them, and the agent reaps ports whose namespace is
/// gone).
async fn del(
    agent: &mut AgentConnection,
    inv: &Invocation,
    conf: &NetConf,
    env: &BTreeMap<String, String>,
) -> Result<(), CniError> {
    let mut first_error = None;
    if let (Some(pod), Some(kubeconfig)) = (
        PodRef::from_args(&inv.args),
        vif_plug::kubeconfig_path(&conf.raw, env),
    ) {
        let found = async {
            let client = vif_plug::client(&kubeconfig).await?;
            let facts = vif_plug::read_pod(&client, &pod).await?;
            vif_plug::plan(&pod, &facts, &inv.ifname, &conf.name)
        }
        .await;
        let extra = match found {
            Ok(vif_plug::Decision::Plug(plugs)) => plugs.into_iter().skip(1).collect(),
            Ok(vif_plug::Decision::Wait { .. }) => Vec::new(),
            Err(e) => {
                tracing::info!(%pod, error = %e.msg, "DEL: the pod's VIFs are not readable; releasing them unplugs them");
                Vec::new()
            }
        };
        for plug in extra {
            if let Err(e) = agent
                .call(Command::Del, &plug_request(inv, conf, &plug))
                .await
            {
                first_error.get_or_insert(e);
            }
        }
    }
    agent.call(Command::Del, &request(inv, conf)).await?;
    first_error.map_or(Ok(()), Err)
}
