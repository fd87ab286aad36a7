//! The Kubernetes source: a kube-runtime `Controller` over Pods with the `finalizer` helper,
//! and a [`KubeWatch`] over NetworkAttachmentDefinitions (every change re-runs every pod, since
//! any pod may name the changed attachment). Every watch, the Controller's included, is
//! restarted after failures with [`nephrite_runtime::watch_backoff`]'s pauses.
//!
//! The finalizer [`FINALIZER`] is added before the first VIF is allocated, so a pod deleted
//! while the handler is down waits for it to release its ports. Each pod's record is written
//! as the annotation [`VIF_ANNOTATION`] with a merge patch. A pod whose request is wrong gets
//! a Warning Event (`VifRequestInvalid`) naming the annotation and the error, and is tried
//! again when it changes; a port still `DOWN` after activation gets `VifNotActive` and is
//! tried again after [`RECHECK`].
//!
//! SR-IOV VFs are counted on the pod's Node: a third watch holds the Nodes (their
//! `status.allocatable`), and the VFs held are the records of the pods the Controller's own
//! store lists on that node. A pod whose VFs are not free gets `NoFreeVf` (naming node,
//! physnet, resources, free and wanted) and is looked at again every [`VF_RETRY`], so it gets
//! its VFs soon after another pod releases them or the node advertises more. Events are
//! published when the pod's recorded failure changes, not on every pass.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod as KubePod};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use nephrite_krm::Gvk;
use nephrite_runtime::{KubeWatch, WatchEvent};
use nephrite_vif::vfs::{Node, VfShortage};
use nephrite_vif::{ContainerResources, NetworkAttachment, Pod, VIF_ANNOTATION, VifRecord};
use serde_json::json;

use super::handler::{Handler, HandlerError, NodeVfs};
use super::neutron::{Activation, PodIdentity};

/// The pod finalizer that holds a pod until its VIFs are released.
pub const FINALIZER: &str = "kuryr.openstack.org/vif";
/// When a pod with a port still `DOWN` is looked at again.
pub const RECHECK: Duration = Duration::from_secs(30);
/// When a pod the backend refused (unknown subnet or port, port taken) is tried again.
const REFUSED_RETRY: Duration = Duration::from_secs(60);
/// When a pod is tried again after a transient failure.
const TRANSIENT_RETRY: Duration = Duration::from_secs(5);
/// When a pod whose VFs were not free looks again.
pub const VF_RETRY: Duration = Duration::from_secs(3);
/// How long counting VFs waits for the first listing of Pods and Nodes.
const LISTED_WITHIN: Duration = Duration::from_secs(30);

struct Context {
    handler: Handler,
    client: kube::Client,
    recorder: Recorder,
    attachments: Store<DynamicObject>,
    pods: Store<KubePod>,
    nodes: Store<KubeNode>,
}

/// Why a reconcile failed (for the controller's log and retry).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The finalizer helper or a step of the pod's handling failed.
    #[error(transparent)]
    Finalizer(#[from] Box<finalizer::Error<HandlerError>>),
}

/// The NetworkAttachmentDefinition API resource.
pub fn attachment_resource() -> ApiResource {
    Gvk::new("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition")
        .api_resource("network-attachment-definitions")
}

/// What the drivers read of a Kubernetes pod.
pub fn pod_view(pod: &KubePod) -> Pod {
    let spec = pod.spec.as_ref();
    let containers = spec
        .into_iter()
        .flat_map(|s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
        })
        .map(|c| {
            let resources = c.resources.as_ref();
            let quantities = |m: Option<
                &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >| {
                m.map(|m| m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                    .unwrap_or_default()
            };
            ContainerResources {
                name: c.name.clone(),
                requests: quantities(resources.and_then(|r| r.requests.as_ref())),
                limits: quantities(resources.and_then(|r| r.limits.as_ref())),
            }
        })
        .collect();
    Pod {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        annotations: pod.annotations().clone(),
        containers,
    }
}

/// Who a Kubernetes pod is.
pub fn pod_identity(pod: &KubePod) -> PodIdentity {
    PodIdentity {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
    }
}

/// A NetworkAttachmentDefinition as the drivers read it.
pub fn attachment_view(object: &DynamicObject) -> NetworkAttachment {
    NetworkAttachment {
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        annotations: object.annotations().clone(),
        config: object.data["spec"]["config"].as_str().map(str::to_owned),
    }
}

/// What the VF count reads of a Node.
pub fn node_view(node: &KubeNode) -> Node {
    Node {
        name: node.name_any(),
        allocatable: node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| a.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
            .unwrap_or_default(),
    }
}

/// The pod's node and the records of the other pods on it, once both stores are listed.
async fn node_vfs(
    pods: Store<KubePod>,
    nodes: Store<KubeNode>,
    node: Option<String>,
) -> Result<NodeVfs, String> {
    let Some(name) = node else {
        return Ok(NodeVfs::default());
    };
    let listed = async {
        pods.wait_until_ready().await.map_err(|e| e.to_string())?;
        nodes.wait_until_ready().await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(LISTED_WITHIN, listed)
        .await
        .map_err(|_| {
            format!(
                "Pods and Nodes not listed within {}s",
                LISTED_WITHIN.as_secs()
            )
        })??;
    let node = nodes
        .get(&ObjectRef::new(&name))
        .map(|n| node_view(&n))
        .unwrap_or(Node {
            name: name.clone(),
            allocatable: BTreeMap::new(),
        });
    let on_node = pods
        .state()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
        .map(|p| (p.uid().unwrap_or_default(), current_record(&p).vifs))
        .collect();
    Ok(NodeVfs {
        node: Some(node),
        pods: on_node,
    })
}

/// The pod's record; an unreadable one is logged and read as empty (cleanup sweeps the
/// backend anyway).
fn current_record(pod: &KubePod) -> VifRecord {
    match pod.annotations().get(VIF_ANNOTATION) {
        None => VifRecord::default(),
        Some(value) => VifRecord::parse(value).unwrap_or_else(|e| {
            tracing::warn!(pod = %pod.name_any(), "{e}");
            VifRecord::default()
        }),
    }
}

async fn warn(ctx: &Context, pod: &KubePod, reason: &str, note: String) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_owned(),
        note: Some(crate::kubernetes::event_note(&note)),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &pod.object_ref(&())).await {
        tracing::warn!(pod = %pod.name_any(), "publishing an Event: {e}");
    }
}

async fn apply(ctx: &Context, api: &Api<KubePod>, pod: &KubePod) -> Result<Action, HandlerError> {
    let identity = pod_identity(pod);
    let attachments: Vec<NetworkAttachment> = ctx
        .attachments
        .state()
        .iter()
        .map(|a| attachment_view(a))
        .collect();
    let name = pod.name_any();
    let api = api.clone();
    let persist = move |record: VifRecord| -> BoxFuture<'static, Result<(), String>> {
        let api = api.clone();
        let name = name.clone();
        Box::pin(async move {
            let patch = json!({"metadata": {"annotations": {VIF_ANNOTATION: record.to_json()}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    };
    let (pods, nodes, node) = (ctx.pods.clone(), ctx.nodes.clone(), identity.node.clone());
    let lookup = move || -> BoxFuture<'static, Result<NodeVfs, String>> {
        Box::pin(node_vfs(pods.clone(), nodes.clone(), node.clone()))
    };
    let current = current_record(pod);
    let result = ctx
        .handler
        .apply(
            &identity,
            &pod_view(pod),
            &attachments,
            &current,
            &lookup,
            &persist,
        )
        .await;
    match result {
        Ok(applied) if applied.still_down.is_empty() => Ok(Action::await_change()),
        Ok(applied) => {
            for down in applied.still_down {
                if let Activation::StillDown {
                    port,
                    status,
                    vif_type,
                } = down
                {
                    warn(ctx, pod, "VifNotActive", format!(
                        "port {port} is still {status} (binding:vif_type {vif_type:?}): no agent has bound it"
                    ))
                    .await;
                }
            }
            Ok(Action::requeue(RECHECK))
        }
        Err(e) if e.is_retryable() => Err(e),
        // Scheduling the pod changes it.
        Err(HandlerError::Vfs(VfShortage::Unscheduled { .. })) => Ok(Action::await_change()),
        Err(e) => {
            let reason = match e {
                HandlerError::Plan(_) | HandlerError::Update(_) => "VifRequestInvalid",
                HandlerError::Vfs(_) => "NoFreeVf",
                _ => "VifAllocationFailed",
            };
            let note = e.to_string();
            // Once per failure: the record written with it brings the pod back here.
            if current.failure.as_ref().is_none_or(|f| f.message != note) {
                warn(ctx, pod, reason, note).await;
            }
            Ok(match e {
                HandlerError::Plan(_) | HandlerError::Update(_) => Action::await_change(),
                HandlerError::Vfs(_) => Action::requeue(VF_RETRY),
                _ => Action::requeue(REFUSED_RETRY),
            })
        }
    }
}

async fn reconcile(pod: Arc<KubePod>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
        return Ok(Action::await_change());
    }
    let api: Api<KubePod> =
        Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, pod, |event| async {
        match event {
            finalizer::Event::Apply(pod) => apply(&ctx, &api, &pod).await,
            finalizer::Event::Cleanup(pod) => {
                ctx.handler
                    .cleanup(&pod_identity(&pod), &current_record(&pod))
                    .await?;
                Ok(Action::await_change())
            }
        }
    })
    .await
    .or_else(|e| match e {
        // A second look at a pod already released and gone.
        finalizer::Error::RemoveFinalizer(kube::Error::Api(status)) if status.code == 404 => {
            Ok(Action::await_change())
        }
        e => Err(ReconcileError::Finalizer(Box::new(e))),
    })
}

fn error_policy(pod: Arc<KubePod>, error: &ReconcileError, _: Arc<Context>) -> Action {
    tracing::warn!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), "{error}");
    Action::requeue(TRANSIENT_RETRY)
}

/// Run the handler on the cluster of `client` until the controller's streams end: on the pods
/// scheduled on `node` (and that Node), or on every pod when `None`.
pub async fn run(handler: Handler, client: kube::Client, identity: String, node: Option<String>) {
    let narrowed = |field: &str| match &node {
        Some(name) => watcher::Config::default().fields(&format!("{field}={name}")),
        None => watcher::Config::default(),
    };
    let resource = attachment_resource();
    let attachment_watch = KubeWatch::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        watcher::Config::default(),
        resource,
    );
    let attachments = attachment_watch.store();
    // Every listing and change re-runs every pod: any pod may name the attachment.
    let attachment_changes = attachment_watch.events().filter_map(|event| async move {
        match event {
            WatchEvent::Listed { objects, first } => {
                if first {
                    tracing::info!(objects, "NetworkAttachmentDefinitions listed");
                }
                Some(())
            }
            WatchEvent::Changed => Some(()),
            WatchEvent::Failed(e) => {
                tracing::debug!("NetworkAttachmentDefinitions: {e}");
                None
            }
        }
    });
    let node_watch = KubeWatch::new(
        Api::<KubeNode>::all(client.clone()),
        narrowed("metadata.name"),
    );
    let nodes = node_watch.store();
    let node_events = node_watch.events().for_each(|event| async move {
        if let WatchEvent::Failed(e) = event {
            tracing::debug!("Nodes: {e}");
        }
    });
    let pods: Api<KubePod> = Api::all(client.clone());
    let controller = Controller::new(pods, narrowed("spec.nodeName"))
        .trigger_backoff(nephrite_runtime::watch_backoff());
    let context = Arc::new(Context {
        handler,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "kuryr-l7-vif-handler".to_owned(),
                instance: Some(identity),
            },
        ),
        client,
        attachments,
        pods: controller.store(),
        nodes,
    });
    let reconciling = controller
        .reconcile_all_on(attachment_changes)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((pod, _)) => tracing::debug!(pod = %pod, "reconciled"),
                Err(e) => tracing::debug!("{e}"),
            }
        });
    futures::future::select(Box::pin(reconciling), Box::pin(node_events)).await;
}
