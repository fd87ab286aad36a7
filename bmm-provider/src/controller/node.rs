//! The node-lifecycle controller: for every Node whose `spec.providerID` is a `nvidia-bmm://`
//! ID, sets `topology.kubernetes.io/region` and `zone` (the site) and
//! `node.kubernetes.io/instance-type`, and `status.addresses` from the instance; deletes the
//! Node only when the API answers 404 for its instance, never on a 5xx, a timeout or any
//! other failure. Credentials come from the controller's default credentials Secret.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use nephrite_bmm::ProviderId;
use nephrite_bmm::decide::{InstanceLookup, NodeAction, decide_node};
use serde_json::json;

use super::{
    ControllerConfig, ControllerError, Ctx, credentials, log_failures, requeue_after_error,
    watch_backoff,
};
use crate::client::BmmClient;
use crate::client::types::Instance;
use crate::observe::instance_view;

/// Runs the node-lifecycle controller until the stream ends.
pub async fn run_node_controller(client: Client, config: ControllerConfig) {
    let api: Api<Node> = Api::all(client.clone());
    let ctx = Ctx::shared(client, config);
    let controller =
        Controller::new(api, watcher::Config::default()).trigger_backoff(watch_backoff());
    log_failures(
        "node",
        controller.run(reconcile_node, requeue_after_error, ctx),
    )
    .await;
}

/// What the API said about a Node's instance.
enum Answer {
    /// It exists, with its instance type's name.
    Found(Box<Instance>, Option<String>),
    /// 404.
    Gone,
    /// No answer (5xx, timeout, auth, …).
    Unavailable,
}

/// Looks the instance up; anything but an answer (found or 404) is `Unavailable`.
async fn look_up(client: &BmmClient, id: &ProviderId) -> Answer {
    match client.instance(&id.instance_id).await {
        Ok(Some(instance)) => {
            let type_name = match &instance.instance_type_id {
                Some(type_id) => client
                    .instance_types(&id.site_id)
                    .await
                    .ok()
                    .and_then(|types| types.into_iter().find(|t| &t.id == type_id))
                    .map(|t| t.name)
                    .or_else(|| Some(type_id.clone())),
                None => None,
            };
            Answer::Found(Box::new(instance), type_name)
        }
        Ok(None) => Answer::Gone,
        Err(e) => {
            tracing::warn!(instance = %id.instance_id, error = %e, "instance lookup failed; the Node is kept");
            Answer::Unavailable
        }
    }
}

async fn reconcile_node(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, ControllerError> {
    let Some(id) = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(|p| p.parse::<ProviderId>().ok())
    else {
        return Ok(Action::await_change());
    };
    let name = node.name_any();
    let namespace = ctx.config.namespace.as_deref().unwrap_or("default");
    let credentials = match credentials::read(
        &ctx.client,
        &ctx.config,
        &ctx.clients,
        namespace,
        None,
    )
    .await
    {
        Ok(c) => c,
        Err(message) => {
            tracing::warn!(node = %name, %message, "no credentials for the node-lifecycle controller");
            return Ok(Action::requeue(ctx.config.dependency_poll));
        }
    };
    let answer = look_up(&credentials.client, &id).await;
    let view = match &answer {
        Answer::Found(instance, _) => Some(instance_view(instance)),
        _ => None,
    };
    let lookup = match (&answer, &view) {
        (Answer::Found(_, instance_type), Some(instance)) => InstanceLookup::Found {
            instance,
            site_id: &id.site_id,
            instance_type: instance_type.as_deref(),
        },
        (Answer::Gone, _) => InstanceLookup::NotFound,
        _ => InstanceLookup::Unavailable,
    };
    let api: Api<Node> = Api::all(ctx.client.clone());
    match decide_node(&lookup) {
        NodeAction::Update { labels, addresses } => {
            let current = node.labels();
            if labels.iter().any(|(k, v)| current.get(k) != Some(v)) {
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await?;
            }
            let have = node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .map(|a| {
                    a.iter()
                        .map(|a| (a.type_.clone(), a.address.clone()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let want: Vec<(String, String)> = addresses
                .iter()
                .map(|a| {
                    (
                        serde_json::to_value(a.type_)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                        a.address.clone(),
                    )
                })
                .collect();
            if have != want {
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"addresses": addresses}})),
                )
                .await?;
            }
            Ok(Action::requeue(ctx.config.resync))
        }
        NodeAction::Delete => {
            tracing::info!(node = %name, instance = %id.instance_id, "the instance is gone (404): deleting the Node");
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
                Err(e) => Err(e.into()),
            }
        }
        NodeAction::Retry => Ok(Action::requeue(ctx.config.poll)),
    }
}
