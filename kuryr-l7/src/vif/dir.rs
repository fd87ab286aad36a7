//! The directory source (`dir:PATH`): the VIF handler without a cluster.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file directly in PATH may hold Pods and
//! NetworkAttachmentDefinitions (several documents each). Each pass (every [`INTERVAL`]) brings
//! every pod's VIFs up to date. There is no Pod object to annotate, so each pod's record is a
//! file `PATH/.kuryr-vif/<namespace>_<name>.json` (written to a temporary file and renamed),
//! and that file plays the finalizer: a record whose pod is no longer in PATH is released and
//! then removed. A pass in which any file fails to read releases nothing, so a typo in a file
//! never tears down the pods it holds. A pod without `metadata.uid` is known to the backend as
//! `dir-<namespace>-<name>`.
//!
//! Nodes in PATH (`kind: Node` with `status.allocatable`) are what SR-IOV VFs are counted on:
//! a pod's node is its `spec.nodeName`, and the VFs held there are the records of the other
//! pods in PATH on that node.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod as KubePod};
use kube::ResourceExt;
use nephrite_krm::Package;
use nephrite_vif::vfs::Node;
use nephrite_vif::{NetworkAttachment, Vif, VifRecord};
use serde::{Deserialize, Serialize};

use super::handler::{Handler, HandlerError, NodeVfs};
use super::kube::{node_view, pod_identity, pod_view};

/// How often the directory is read again.
pub const INTERVAL: Duration = Duration::from_secs(2);
/// Where records are kept, under the source directory.
pub const STATE_DIR: &str = ".kuryr-vif";

/// A pod's record file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFile {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The UID its ports carry as `device_id`.
    pub uid: String,
    /// Its VIFs.
    pub record: VifRecord,
}

/// What one pass read.
#[derive(Debug, Default)]
struct Read {
    pods: Vec<KubePod>,
    attachments: Vec<NetworkAttachment>,
    nodes: Vec<Node>,
    errors: Vec<String>,
}

fn read(dir: &Path) -> Read {
    let mut out = Read::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            out.errors.push(format!("{}: {e}", dir.display()));
            return out;
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
        })
        .collect();
    files.sort();
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) => {
                out.errors.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        let package = match Package::from_yaml(&text) {
            Ok(package) => package,
            Err(e) => {
                out.errors.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        for object in package.into_objects() {
            let value = object.to_json();
            match value["kind"].as_str() {
                Some("Pod") => match serde_json::from_value::<KubePod>(value) {
                    Ok(mut pod) => {
                        if pod.metadata.namespace.is_none() {
                            pod.metadata.namespace = Some("default".to_owned());
                        }
                        out.pods.push(pod);
                    }
                    Err(e) => out.errors.push(format!("{}: Pod: {e}", file.display())),
                },
                Some("Node") => match serde_json::from_value::<KubeNode>(value) {
                    Ok(node) => out.nodes.push(node_view(&node)),
                    Err(e) => out.errors.push(format!("{}: Node: {e}", file.display())),
                },
                Some("NetworkAttachmentDefinition") => {
                    let metadata = &value["metadata"];
                    out.attachments.push(NetworkAttachment {
                        namespace: metadata["namespace"]
                            .as_str()
                            .unwrap_or("default")
                            .to_owned(),
                        name: metadata["name"].as_str().unwrap_or_default().to_owned(),
                        annotations: serde_json::from_value(metadata["annotations"].clone())
                            .unwrap_or_default(),
                        config: value["spec"]["config"].as_str().map(str::to_owned),
                    });
                }
                _ => {}
            }
        }
    }
    out
}

fn record_path(state: &Path, namespace: &str, name: &str) -> PathBuf {
    state.join(format!("{namespace}_{name}.json"))
}

fn write_record(path: &Path, file: &RecordFile) -> Result<(), String> {
    let text = serde_json::to_string_pretty(file).map_err(|e| e.to_string())?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn read_records(state: &Path) -> BTreeMap<PathBuf, RecordFile> {
    let mut records = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(state) else {
        return records;
    };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<RecordFile>(&t).map_err(|e| e.to_string()))
        {
            Ok(record) => {
                records.insert(path, record);
            }
            Err(e) => tracing::warn!("{}: {e}", path.display()),
        }
    }
    records
}

/// One pass over `dir`, on the pods scheduled on `node` (every pod when `None`; a pod of
/// another node is not this handler's, and a record of one is released as if it had gone);
/// `reported` keeps the last error of each pod so each is logged once.
pub async fn sync_once(
    handler: &Handler,
    dir: &Path,
    node: Option<&str>,
    reported: &mut BTreeMap<String, String>,
) {
    let state = dir.join(STATE_DIR);
    if let Err(e) = std::fs::create_dir_all(&state) {
        tracing::warn!("{}: {e}", state.display());
        return;
    }
    let mut read = read(dir);
    if let Some(node) = node {
        read.pods
            .retain(|pod| pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node));
    }
    for error in &read.errors {
        tracing::warn!("{error} (nothing is released in this pass)");
    }
    let mut records = read_records(&state);
    // Each pod's node and recorded VIFs as the pass starts (the handler's ledger knows what
    // it records during the pass).
    let placed: Vec<(String, String, Vec<Vif>)> = read
        .pods
        .iter()
        .filter_map(|pod| {
            let node = pod.spec.as_ref()?.node_name.clone()?;
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.name_any();
            let record = records.get(&record_path(&state, &namespace, &name))?;
            Some((node, record.uid.clone(), record.record.vifs.clone()))
        })
        .collect();
    for pod in &read.pods {
        if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            continue;
        }
        let mut identity = pod_identity(pod);
        if identity.uid.is_empty() {
            identity.uid = format!("dir-{}-{}", identity.namespace, identity.name);
        }
        let path = record_path(&state, &identity.namespace, &identity.name);
        let mut current = VifRecord::default();
        if let Some(old) = records.remove(&path) {
            if old.uid == identity.uid {
                current = old.record;
            } else if let Err(e) = handler.cleanup(&pod_identity_of(&old), &old.record).await {
                tracing::warn!(pod = %pod.name_any(), "releasing the previous pod of this name: {e}");
                continue;
            }
        }
        let file = RecordFile {
            namespace: identity.namespace.clone(),
            name: identity.name.clone(),
            uid: identity.uid.clone(),
            record: VifRecord::default(),
        };
        let target = path.clone();
        let persist =
            move |record: VifRecord| -> futures::future::BoxFuture<'static, Result<(), String>> {
                let file = RecordFile {
                    record,
                    ..file.clone()
                };
                let target = target.clone();
                Box::pin(async move { write_record(&target, &file) })
            };
        let key = format!("{}/{}", identity.namespace, identity.name);
        let seen = NodeVfs {
            node: identity.node.as_ref().map(|name| {
                read.nodes
                    .iter()
                    .find(|n| n.name == *name)
                    .cloned()
                    .unwrap_or_else(|| Node {
                        name: name.clone(),
                        allocatable: BTreeMap::new(),
                    })
            }),
            pods: placed
                .iter()
                .filter(|(node, _, _)| identity.node.as_ref() == Some(node))
                .map(|(_, uid, vifs)| (uid.clone(), vifs.clone()))
                .collect(),
        };
        let lookup = move || -> futures::future::BoxFuture<'static, Result<NodeVfs, String>> {
            let seen = seen.clone();
            Box::pin(async move { Ok(seen) })
        };
        match handler
            .apply(
                &identity,
                &pod_view(pod),
                &read.attachments,
                &current,
                &lookup,
                &persist,
            )
            .await
        {
            Ok(applied) => {
                reported.remove(&key);
                for down in applied.still_down {
                    tracing::debug!(pod = %key, "{down:?}");
                }
            }
            Err(e) => report(reported, &key, &e),
        }
    }
    if !read.errors.is_empty() {
        return;
    }
    for (path, gone) in records {
        match handler.cleanup(&pod_identity_of(&gone), &gone.record).await {
            Ok(()) => {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!("{}: {e}", path.display());
                }
                tracing::info!(pod = %format!("{}/{}", gone.namespace, gone.name), "released");
            }
            Err(e) => {
                tracing::warn!(pod = %format!("{}/{}", gone.namespace, gone.name), "releasing: {e}")
            }
        }
    }
}

fn pod_identity_of(file: &RecordFile) -> super::neutron::PodIdentity {
    super::neutron::PodIdentity {
        namespace: file.namespace.clone(),
        name: file.name.clone(),
        uid: file.uid.clone(),
        node: None,
    }
}

fn report(reported: &mut BTreeMap<String, String>, key: &str, error: &HandlerError) {
    let text = error.to_string();
    if reported.get(key) != Some(&text) {
        tracing::warn!(pod = %key, "{text}");
        reported.insert(key.to_owned(), text);
    }
}

/// Run passes over `dir` for ever, on the pods of `node` (see [`sync_once`]).
pub async fn run(handler: Handler, dir: PathBuf, node: Option<String>) {
    let mut reported = BTreeMap::new();
    loop {
        sync_once(&handler, &dir, node.as_deref(), &mut reported).await;
        tokio::time::sleep(INTERVAL).await;
    }
}
