//! `nimbess-agent explain SRC DST [PORT[/PROTO]]`: why a pod can or cannot
//! reach a pod, an address or a Service, answered by
//! [`nephrite_pipeline::explain`] on what the running agent has
//! ([`cluster`]), and with `--live` checked against the kernel's nftables
//! rules ([`live`], [`nft`]).
//!
//! The agent keeps its policies only as the tiers it renders (addresses,
//! no names), so the policies, Pods and Namespaces are read from the same
//! objects the agent reads (`--resources dir:PATH`, or `--kube`: [`kube`])
//! and placed at the
//! agent's ports; whether the agent has applied them shows in the
//! answer (`in_sync`).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use nephrite_pipeline::{
    ConnectionEnd, DEFAULT_SERVICE_CIDR, ExplainQuery, Explanation, Ipv4Cidr, PodName, Protocol,
};
use nimbess_client::InspectClient;
use serde::Serialize;

use crate::northbound::Source;

pub mod cluster;
pub mod kube;
pub mod live;
pub mod nft;
pub mod probe;

#[cfg(test)]
mod tests;

/// How `explain` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainOutput {
    /// Lines a person reads.
    Text,
    /// One JSON document.
    Json,
}

/// `explain` flags.
#[derive(Debug, clap::Args)]
#[group(skip)]
pub struct ExplainArgs {
    /// The pod opening the connection: `namespace/name`, `name` (namespace
    /// `default`) or its address.
    pub source: String,
    /// Where to: a pod (as the source), an address, `ADDRESS:PORT`, or a
    /// Service by `namespace/name`.
    pub destination: String,
    /// `PORT[/PROTO]` (protocol `tcp`, `udp` or `sctp`; default `tcp`);
    /// needed unless DST is `ADDRESS:PORT` or a Service with one port.
    pub port: Option<String>,
    /// The objects the agent reads (the policies, Pods and Namespaces),
    /// from Kubernetes YAML files: `dir:PATH`.
    #[arg(long, env = "NIMBESS_RESOURCES", required_unless_present = "kube")]
    pub resources: Option<Source>,
    /// The same objects listed from the API server (in-cluster config or
    /// KUBECONFIG).
    #[arg(long, env = "NIMBESS_KUBE", conflicts_with = "resources")]
    pub kube: bool,
    /// The cluster's Service CIDR (as the agent was given it).
    #[arg(long, env = "NIMBESS_SERVICE_CIDR", default_value_t = DEFAULT_SERVICE_CIDR)]
    pub service_cidr: Ipv4Cidr,
    /// Also check that this network namespace's nftables rules hold what
    /// the answer relies on; exit 1 when they do not.
    #[arg(long)]
    pub live: bool,
    /// With `--live`: also open one TCP connection from the source pod's
    /// network namespace (a pod of this host) and check that what it meets,
    /// and the deciding rule's counter, are what the model says.
    #[arg(long, requires = "live")]
    pub probe: bool,
    /// The agent and its credentials.
    #[command(flatten)]
    pub client: ExplainClient,
    /// Output: `text` or `json`.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: ExplainOutput,
}

/// The agent `explain` asks.
#[derive(Debug, clap::Args)]
#[group(skip)]
pub struct ExplainClient {
    /// The agent's socket.
    #[arg(long, env = "NIMBESS_SOCKET", default_value = crate::daemon::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Credentials for an agent that requires them.
    #[command(flatten)]
    pub credentials: nephrite_runtime::ClientArgs,
}

/// `explain -o json`.
#[derive(Debug, Serialize)]
pub struct ExplainReport {
    /// The answer.
    pub explanation: Explanation,
    /// True when the agent rendered the policy tiers the objects give.
    pub in_sync: bool,
    /// The pods whose rendered tiers differ from the objects'.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub out_of_sync: Vec<Ipv4Addr>,
    /// Objects (or parts) that could not be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// `--live`: what the kernel holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<live::LiveReport>,
    /// `--probe`: what a real connection met.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<probe::ProbeReport>,
}

/// Parse `PORT[/PROTO]`.
///
/// # Errors
/// Not a port, or an unknown protocol, naming the text.
pub fn parse_port(text: &str) -> anyhow::Result<(u16, Option<Protocol>)> {
    let (port, protocol) = match text.split_once('/') {
        Some((p, proto)) => (p, Some(proto)),
        None => (text, None),
    };
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .with_context(|| format!("PORT {text:?}: expected PORT[/PROTO] with PORT 1-65535"))?;
    let protocol = match protocol.map(str::to_ascii_lowercase).as_deref() {
        None => None,
        Some("tcp") => Some(Protocol::Tcp),
        Some("udp") => Some(Protocol::Udp),
        Some("sctp") => Some(Protocol::Sctp),
        Some(other) => anyhow::bail!("PORT {text:?}: protocol {other:?} is not tcp, udp or sctp"),
    };
    Ok((port, protocol))
}

/// The connection asked about, DST resolved on `cluster`: a pod by that
/// name first, else a Service by that name (its VIP).
///
/// # Errors
/// SRC or DST do not parse, DST names neither a pod nor a Service, or the
/// port is missing or ambiguous.
pub fn query(
    cluster: &cluster::Cluster,
    source: &str,
    destination: &str,
    port: Option<&str>,
) -> anyhow::Result<ExplainQuery> {
    let source: ConnectionEnd = source.parse().with_context(|| format!("SRC {source:?}"))?;
    let given = port.map(parse_port).transpose()?;
    let (mut port, mut protocol) = (given.map(|g| g.0), given.and_then(|g| g.1));
    let destination = if let Ok(at) = destination.parse::<SocketAddrV4>() {
        if port.is_some_and(|p| p != at.port()) {
            anyhow::bail!("DST {destination:?} and PORT name different ports");
        }
        port = Some(at.port());
        ConnectionEnd::Address(*at.ip())
    } else {
        let end: ConnectionEnd = destination
            .parse()
            .with_context(|| format!("DST {destination:?}"))?;
        match end {
            ConnectionEnd::Pod(name) if !has_pod(cluster, &name) => {
                let ports = cluster.service_ports(&name);
                let Some((_, lb)) = ports.first() else {
                    anyhow::bail!(
                        "DST {destination:?}: no pod and no Service {name} (with a ready port) in the agent's cluster"
                    );
                };
                let vip = lb.vip;
                if port.is_none() {
                    let [(key, _)] = ports.as_slice() else {
                        anyhow::bail!(
                            "DST {destination:?}: Service {name} has {} ports; give PORT[/PROTO]",
                            ports.len()
                        );
                    };
                    port = Some(key.port);
                    protocol = protocol.or(Some(key.protocol));
                }
                ConnectionEnd::Address(vip)
            }
            other => other,
        }
    };
    let port = port.with_context(|| {
        format!("no port for {destination:?}: give PORT[/PROTO] (e.g. 8080/tcp)")
    })?;
    Ok(ExplainQuery {
        source,
        destination,
        protocol: protocol.unwrap_or(Protocol::Tcp),
        port,
    })
}

fn has_pod(cluster: &cluster::Cluster, name: &PodName) -> bool {
    cluster
        .pods
        .iter()
        .any(|p| p.namespace == name.namespace && p.name == name.name)
}

/// Run `explain`: exit 0 with the answer, 1 when `--live` finds the kernel
/// disagreeing with the model.
///
/// # Errors
/// The agent cannot be asked, the objects cannot be read, or the query
/// names nothing known.
pub async fn run(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let json = InspectClient::connect(&args.client.socket, &args.client.credentials)
        .await?
        .cluster()
        .await?;
    let agent: cluster::AgentCluster =
        serde_json::from_str(&json).context("the agent's GetCluster answer")?;
    let (objects, mut warnings) = match &args.resources {
        Some(Source::Dir(dir)) => crate::northbound::resources::load_dir(dir)
            .with_context(|| format!("--resources dir:{}", dir.display()))?,
        Some(Source::Kube) | None => {
            let client = ::kube::Client::try_default()
                .await
                .context("--kube: no Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
            (kube::list_objects(&client).await?, Vec::new())
        }
    };
    let networks = agent.networks.clone();
    let cluster = cluster::Cluster::assemble(agent, &objects, args.service_cidr)?;
    warnings.extend(cluster.warnings.iter().cloned());
    let query = query(
        &cluster,
        &args.source,
        &args.destination,
        args.port.as_deref(),
    )?;
    let explanation = nephrite_pipeline::explain(&cluster.view(), &query)?;
    let (live, probe) = if args.live {
        let (expected, disagreements) =
            live::expected_rules(&explanation, &cluster.tiers, &networks);
        let live = live::check(
            &explanation,
            expected.clone(),
            disagreements,
            &read_tables()?,
        );
        let probe = if args.probe {
            Some(send_probe(&cluster, &explanation, &live, expected)?)
        } else {
            None
        };
        (Some(live), probe)
    } else {
        (None, None)
    };
    let report = ExplainReport {
        explanation,
        in_sync: cluster.out_of_sync.is_empty(),
        out_of_sync: cluster.out_of_sync,
        warnings,
        live,
        probe,
    };
    match args.output {
        ExplainOutput::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        ExplainOutput::Text => println!("{}", text(&report)),
    }
    let disagree = report.live.as_ref().is_some_and(|l| !l.agrees)
        || report.probe.as_ref().is_some_and(|p| !p.agrees);
    Ok(if disagree {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The tables `--live` reads, from this network namespace's kernel.
fn read_tables() -> anyhow::Result<live::Tables> {
    let mut tables = live::Tables::new();
    for name in live::TABLES {
        tables.insert(name.to_string(), nft::list_table(name)?);
    }
    Ok(tables)
}

/// `--probe`: one TCP connection from the source pod's namespace, the
/// counters of `expected` read around it.
fn send_probe(
    cluster: &cluster::Cluster,
    explanation: &Explanation,
    before: &live::LiveReport,
    expected: Vec<(usize, live::Expected)>,
) -> anyhow::Result<probe::ProbeReport> {
    anyhow::ensure!(
        explanation.protocol == Protocol::Tcp,
        "--probe sends TCP only; this connection is {:?}",
        explanation.protocol
    );
    let source = &explanation.source;
    let netns = cluster
        .ports
        .iter()
        .find(|p| p.address == source.address)
        .and_then(|p| p.netns.clone())
        .with_context(|| {
            format!(
                "--probe: {} ({}) is not a pod of this host's agent",
                source.pod, source.address
            )
        })?;
    let destination = SocketAddrV4::new(explanation.destination, explanation.port);
    let outcome = probe::connect_from(&netns, destination)?;
    let after = live::check(explanation, expected, Vec::new(), &read_tables()?);
    Ok(probe::judge(
        explanation,
        destination,
        outcome,
        &before.checks,
        &after.checks,
    ))
}

/// The text form of a report.
pub fn text(report: &ExplainReport) -> String {
    let mut out = report.explanation.to_string();
    if !report.in_sync {
        let pods: Vec<String> = report.out_of_sync.iter().map(|a| a.to_string()).collect();
        out.push_str(&format!(
            "\nnote: the agent's rendered policies for {} differ from these objects (not applied yet, or another source)",
            pods.join(", ")
        ));
    }
    for w in &report.warnings {
        out.push_str(&format!("\nwarning: {w}"));
    }
    if let Some(live) = &report.live {
        out.push('\n');
        out.push_str(&live.to_string());
    }
    if let Some(probe) = &report.probe {
        out.push('\n');
        out.push_str(&probe.to_string());
    }
    out
}
