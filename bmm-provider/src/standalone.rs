//! Standalone mode: provision the NvidiaBMMClusters and NvidiaBMMMachines of a YAML file
//! without a management cluster, with the same decisions the controllers run and a local state
//! file.
//!
//! The state file records the endpoint, the org and the token file's *path* (never the token),
//! and per object its spec, status and finalizer; `status` and `delete` work from it alone.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nephrite_bmm::crd::{API_VERSION, NvidiaBMMCluster, NvidiaBMMMachine};
use nephrite_bmm::decide::Wait;
use nephrite_bmm::validation::{validate_cluster, validate_machine};
use nephrite_bmm::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, conditions};
use nephrite_krm::condition::find_condition;
use nephrite_runtime::table::Table;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{BmmClient, ClientConfig, Token};
use crate::observe::{
    ClusterRecord, MachineRecord, ReconcileError, machine_ready, network_ready, reconcile_cluster,
    reconcile_machine,
};

/// Annotation naming a file whose content is the machine's bootstrap (cloud-init) data.
pub const BOOTSTRAP_FILE_ANNOTATION: &str = "nephrite.io/bootstrap-data-file";

/// What can go wrong in standalone mode.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A document is not acceptable; the message names the document and field.
    #[error("{file}: document {index}: {message}")]
    Document {
        /// The file.
        file: PathBuf,
        /// 1-based document index.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// The state file is unreadable.
    #[error("state file {path}: {message}")]
    State {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A reconcile failed.
    #[error(transparent)]
    Reconcile(Box<ReconcileError>),
    /// The client could not be built.
    #[error(transparent)]
    Client(Box<crate::client::ApiError>),
    /// Something did not get Ready in time or is blocked.
    #[error("{0}")]
    NotReady(String),
}

impl From<ReconcileError> for StandaloneError {
    fn from(e: ReconcileError) -> Self {
        StandaloneError::Reconcile(Box::new(e))
    }
}

impl From<crate::client::ApiError> for StandaloneError {
    fn from(e: crate::client::ApiError) -> Self {
        StandaloneError::Client(Box::new(e))
    }
}

/// The state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// The API's server root.
    pub endpoint: String,
    /// The org.
    pub org: String,
    /// Where the token is read from (the token itself is never stored).
    pub token_file: PathBuf,
    /// The clusters.
    #[serde(default)]
    pub clusters: Vec<ClusterRecord>,
    /// The machines.
    #[serde(default)]
    pub machines: Vec<MachineRecord>,
}

impl State {
    /// Reads a state file.
    pub fn load(path: &Path) -> Result<State, StandaloneError> {
        let text = std::fs::read_to_string(path).map_err(|source| StandaloneError::Io {
            path: path.into(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| StandaloneError::State {
            path: path.into(),
            message: e.to_string(),
        })
    }

    /// Writes it atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), StandaloneError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| StandaloneError::State {
            path: path.into(),
            message: e.to_string(),
        })?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(|source| StandaloneError::Io {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, path).map_err(|source| StandaloneError::Io {
            path: path.into(),
            source,
        })
    }

    /// A client from the recorded endpoint, org and token file.
    pub fn client(&self, timeout: Duration) -> Result<BmmClient, StandaloneError> {
        let token =
            std::fs::read_to_string(&self.token_file).map_err(|source| StandaloneError::Io {
                path: self.token_file.clone(),
                source,
            })?;
        let mut config =
            ClientConfig::new(self.endpoint.clone(), self.org.clone(), Token::new(token));
        config.timeout = timeout;
        Ok(BmmClient::new(config)?)
    }
}

/// The clusters and machines of a multi-document YAML file, validated.
pub fn read_documents(
    file: &Path,
) -> Result<(Vec<ClusterRecord>, Vec<MachineRecord>), StandaloneError> {
    let text = std::fs::read_to_string(file).map_err(|source| StandaloneError::Io {
        path: file.into(),
        source,
    })?;
    let doc_err = |index: usize, message: String| StandaloneError::Document {
        file: file.into(),
        index,
        message,
    };
    let mut clusters = Vec::new();
    let mut machines: Vec<(usize, MachineRecord)> = Vec::new();
    for (i, document) in serde_norway::Deserializer::from_str(&text).enumerate() {
        let index = i + 1;
        let value = Value::deserialize(document).map_err(|e| doc_err(index, e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if api_version != API_VERSION {
            return Err(doc_err(
                index,
                format!("apiVersion: {api_version:?} is not {API_VERSION}"),
            ));
        }
        match kind {
            "NvidiaBMMCluster" => {
                let c: NvidiaBMMCluster = serde_json::from_value(value)
                    .map_err(|e| doc_err(index, format!("NvidiaBMMCluster: {e}")))?;
                let name = c
                    .metadata
                    .name
                    .clone()
                    .ok_or_else(|| doc_err(index, "metadata.name is required".into()))?;
                if let Some(problem) = validate_cluster(&c.spec).into_iter().next() {
                    return Err(doc_err(
                        index,
                        format!("NvidiaBMMCluster {name}: {problem}"),
                    ));
                }
                clusters.push(ClusterRecord {
                    namespace: c
                        .metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into()),
                    name,
                    spec: c.spec,
                    status: Default::default(),
                    finalizer: false,
                    control_plane_endpoint: None,
                    labels: c.metadata.labels.clone().unwrap_or_default(),
                });
            }
            "NvidiaBMMMachine" => {
                let m: NvidiaBMMMachine = serde_json::from_value(value)
                    .map_err(|e| doc_err(index, format!("NvidiaBMMMachine: {e}")))?;
                let name = m
                    .metadata
                    .name
                    .clone()
                    .ok_or_else(|| doc_err(index, "metadata.name is required".into()))?;
                let labels = m.metadata.labels.clone().unwrap_or_default();
                let cluster = labels.get(CLUSTER_NAME_LABEL).cloned().ok_or_else(|| doc_err(index, format!("NvidiaBMMMachine {name}: metadata.labels[{CLUSTER_NAME_LABEL}] is required")))?;
                let bootstrap = match m
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(BOOTSTRAP_FILE_ANNOTATION))
                {
                    Some(path) => {
                        let path = file.parent().unwrap_or(Path::new(".")).join(path);
                        Some(
                            std::fs::read_to_string(&path)
                                .map_err(|source| StandaloneError::Io { path, source })?,
                        )
                    }
                    None => None,
                };
                machines.push((
                    index,
                    MachineRecord {
                        namespace: m
                            .metadata
                            .namespace
                            .clone()
                            .unwrap_or_else(|| "default".into()),
                        name,
                        cluster,
                        control_plane: labels.contains_key(CONTROL_PLANE_LABEL),
                        spec: m.spec,
                        status: Default::default(),
                        finalizer: false,
                        bootstrap,
                        bootstrap_required: false,
                        failure_domain: None,
                        provisioned_in: None,
                    },
                ));
            }
            other => {
                return Err(doc_err(
                    index,
                    format!("kind: {other:?} is not NvidiaBMMCluster or NvidiaBMMMachine"),
                ));
            }
        }
    }
    let mut out = Vec::new();
    for (index, m) in machines {
        let cluster = clusters
            .iter()
            .find(|c| c.name == m.cluster && c.namespace == m.namespace)
            .ok_or_else(|| {
                doc_err(
                    index,
                    format!(
                        "NvidiaBMMMachine {}: cluster {:?} is not in the file",
                        m.name, m.cluster
                    ),
                )
            })?;
        let subnets: Vec<&str> = cluster
            .spec
            .subnets
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        if let Some(problem) = validate_machine(&m.spec, &subnets).into_iter().next() {
            return Err(doc_err(
                index,
                format!("NvidiaBMMMachine {}: {problem}", m.name),
            ));
        }
        out.push(m);
    }
    Ok((clusters, out))
}

/// How `apply` and `delete` wait.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Between polls while something is in progress.
    pub poll: Duration,
    /// Give up after this long.
    pub timeout: Duration,
}

/// Progress lines: overwritten in place on a terminal, one per change otherwise.
struct Progress {
    terminal: bool,
    last: String,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            terminal: std::io::stderr().is_terminal(),
            last: String::new(),
        }
    }

    fn show(&mut self, line: String) {
        if line == self.last {
            return;
        }
        let mut err = std::io::stderr();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.last = line;
    }

    fn done(&mut self) {
        if self.terminal && !self.last.is_empty() {
            let _ = writeln!(std::io::stderr());
        }
    }
}

fn reason_of(conditions: &[nephrite_krm::Condition]) -> String {
    find_condition(conditions, conditions::READY)
        .map(|c| {
            format!(
                "{} {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        })
        .unwrap_or_default()
}

/// Merges freshly read documents into the state: specs replace, statuses are kept.
pub fn merge_documents(
    state: &mut State,
    clusters: Vec<ClusterRecord>,
    machines: Vec<MachineRecord>,
) {
    for c in clusters {
        match state
            .clusters
            .iter_mut()
            .find(|k| k.name == c.name && k.namespace == c.namespace)
        {
            Some(k) => {
                k.spec = c.spec;
                k.labels = c.labels;
            }
            None => state.clusters.push(c),
        }
    }
    for m in machines {
        match state
            .machines
            .iter_mut()
            .find(|k| k.name == m.name && k.namespace == m.namespace)
        {
            Some(k) => {
                let provider_id = k.spec.provider_id.take();
                k.spec = m.spec;
                k.spec.provider_id = provider_id;
                k.bootstrap = m.bootstrap;
                k.control_plane = m.control_plane;
            }
            None => state.machines.push(m),
        }
    }
}

/// What one pass over the state left.
struct Pass {
    /// The progress line.
    line: String,
    /// What is still on its way.
    left: Vec<String>,
    /// What cannot get there without a change.
    blocked: Vec<String>,
}

/// Runs `pass` over the state, saving it and showing progress after each, until nothing is
/// left (Ok), something is blocked, or the deadline passes (`goal` names what was not reached).
async fn until_done(
    state: &mut State,
    state_path: &Path,
    pace: Pace,
    goal: &str,
    mut pass: impl AsyncFnMut(&mut State) -> Result<Pass, StandaloneError>,
) -> Result<(), StandaloneError> {
    let deadline = tokio::time::Instant::now() + pace.timeout;
    let mut progress = Progress::new();
    loop {
        let Pass {
            line,
            left,
            blocked,
        } = pass(state).await?;
        state.save(state_path)?;
        progress.show(line);
        let failure = if !blocked.is_empty() {
            Some(format!("blocked: {}", blocked.join("; ")))
        } else if left.is_empty() {
            None
        } else if tokio::time::Instant::now() >= deadline {
            Some(format!(
                "not {goal} after {:?}: {}",
                pace.timeout,
                left.join(", ")
            ))
        } else {
            tokio::time::sleep(pace.poll).await;
            continue;
        };
        progress.done();
        return match failure {
            Some(message) => Err(StandaloneError::NotReady(message)),
            None => Ok(()),
        };
    }
}

/// The cluster of machine `i`.
fn cluster_of(state: &State, i: usize) -> Option<ClusterRecord> {
    let machine = &state.machines[i];
    state
        .clusters
        .iter()
        .find(|c| c.name == machine.cluster && c.namespace == machine.namespace)
        .cloned()
}

/// `a, b, c`, or `nothing`.
fn listing(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".into()
    } else {
        items.join(", ")
    }
}

/// Provisions everything in the state until every machine is Ready; saves after each pass.
pub async fn apply(
    state: &mut State,
    state_path: &Path,
    client: &BmmClient,
    pace: Pace,
) -> Result<(), StandaloneError> {
    until_done(
        state,
        state_path,
        pace,
        "Ready",
        async |state: &mut State| {
            let mut waiting = Vec::new();
            let mut blocked = Vec::new();
            for i in 0..state.clusters.len() {
                let of_cluster = |m: &&MachineRecord| {
                    m.control_plane
                        && m.cluster == state.clusters[i].name
                        && m.namespace == state.clusters[i].namespace
                };
                let first_cp = state.machines.iter().filter(of_cluster).find_map(|m| {
                    m.status
                        .addresses
                        .iter()
                        .find(|a| {
                            matches!(a.type_, nephrite_bmm::crd::MachineAddressType::InternalIP)
                        })
                        .map(|a| a.address.clone())
                });
                let has_control_plane = state.machines.iter().any(|m| of_cluster(&m));
                let cluster = &mut state.clusters[i];
                let wait = reconcile_cluster(client, cluster, false, first_cp.as_deref()).await?;
                if wait == Wait::Blocked {
                    blocked.push(format!(
                        "cluster {}/{}: {}",
                        cluster.namespace,
                        cluster.name,
                        reason_of(&cluster.status.conditions)
                    ));
                } else if !network_ready(&cluster.status) {
                    waiting.push(format!("cluster {}/{}", cluster.namespace, cluster.name));
                } else if has_control_plane && cluster.control_plane_endpoint.is_none() {
                    waiting.push(format!(
                        "cluster {}/{} control-plane endpoint",
                        cluster.namespace, cluster.name
                    ));
                }
            }
            for i in 0..state.machines.len() {
                let Some(cluster) = cluster_of(state, i) else {
                    continue;
                };
                let machine = &mut state.machines[i];
                let wait = reconcile_machine(client, &cluster, machine, false).await?;
                if wait == Wait::Blocked {
                    blocked.push(format!(
                        "machine {}/{}: {}",
                        machine.namespace,
                        machine.name,
                        reason_of(&machine.status.conditions)
                    ));
                } else if !machine_ready(machine) {
                    waiting.push(format!(
                        "machine {}/{} ({})",
                        machine.namespace,
                        machine.name,
                        machine
                            .status
                            .instance_state
                            .clone()
                            .unwrap_or_else(|| "not created".into())
                    ));
                }
            }
            let ready = state.machines.iter().filter(|m| machine_ready(m)).count();
            Ok(Pass {
                line: format!(
                    "{ready}/{} machines Ready; waiting for: {}",
                    state.machines.len(),
                    listing(&waiting)
                ),
                left: waiting,
                blocked,
            })
        },
    )
    .await
}

/// Deletes every machine, then every cluster, until all objects it created answer 404.
pub async fn delete(
    state: &mut State,
    state_path: &Path,
    client: &BmmClient,
    pace: Pace,
) -> Result<(), StandaloneError> {
    until_done(
        state,
        state_path,
        pace,
        "deleted",
        async |state: &mut State| {
            for i in 0..state.machines.len() {
                let Some(cluster) = cluster_of(state, i) else {
                    continue;
                };
                reconcile_machine(client, &cluster, &mut state.machines[i], true).await?;
            }
            state.machines.retain(|m| m.finalizer);
            if state.machines.is_empty() {
                for cluster in state.clusters.iter_mut() {
                    reconcile_cluster(client, cluster, true, None).await?;
                }
                state.clusters.retain(|c| c.finalizer);
            }
            let left: Vec<String> = state
                .machines
                .iter()
                .map(|m| format!("machine {}/{}", m.namespace, m.name))
                .chain(state.clusters.iter().map(|c| {
                    format!(
                        "cluster {}/{} ({})",
                        c.namespace,
                        c.name,
                        reason_of(&c.status.conditions)
                    )
                }))
                .collect();
            Ok(Pass {
                line: format!("deleting; left: {}", listing(&left)),
                left,
                blocked: Vec::new(),
            })
        },
    )
    .await
}

/// One line per object for `status -o table`.
pub fn status_table(state: &State) -> String {
    let mut table = Table::new(["KIND", "NAME", "READY", "STATE", "DETAIL"]);
    for c in &state.clusters {
        let endpoint = c
            .control_plane_endpoint
            .as_ref()
            .map(|e| format!(" endpoint {}:{}", e.host, e.port))
            .unwrap_or_default();
        let ready = network_ready(&c.status);
        table.row([
            "cluster".to_owned(),
            format!("{}/{}", c.namespace, c.name),
            ready.to_string(),
            if ready { "Ready" } else { "Provisioning" }.to_owned(),
            format!(
                "vpc {}{endpoint}",
                c.status.vpc_id.as_deref().unwrap_or("-")
            ),
        ]);
    }
    for m in &state.machines {
        let addresses: Vec<&str> = m
            .status
            .addresses
            .iter()
            .map(|a| a.address.as_str())
            .collect();
        table.row([
            "machine".to_owned(),
            format!("{}/{}", m.namespace, m.name),
            machine_ready(m).to_string(),
            m.status
                .instance_state
                .clone()
                .unwrap_or_else(|| "-".into()),
            format!(
                "{} {}",
                m.spec.provider_id.as_deref().unwrap_or("-"),
                addresses.join(",")
            )
            .trim_end()
            .to_owned(),
        ]);
    }
    table.render()
}
