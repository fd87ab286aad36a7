//! The cloud-controller-manager's node controller (`bmm-provider ccm`, and `serve
//! --node-lifecycle`): for each Node, finds its instance — by the `nvidia-bmm://` provider ID,
//! or, for a Node still tainted `uninitialized` without one, by its name or addresses among
//! the tenant's instances — and carries out what [`decide_cloud_node`] says: provider ID,
//! addresses, topology and instance-type labels, the `uninitialized` taint removed once all
//! are set, the `shutdown` taint while the instance is powered off or rebooting, and deletion
//! of the Node only when the API answers 404 for its instance. Events on the Node say why it
//! was left alone. A failed lookup is a reconcile error, retried with per-Node backoff.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use nephrite_bmm::ProviderId;
use nephrite_bmm::cloud::CloudInstance;
use nephrite_bmm::decide::cloud_node::{
    CloudNodeDecision, NodeAddress, NodeEvent, NodeLookup, NodeOutcome, NodeTarget, NodeView,
    Power, SiteView, Taint, decide_cloud_node, event_reason, match_instance, node_target,
};
use serde_json::{Map, Value, json};

use super::{
    ControllerConfig, ControllerError, Ctx, credentials, log_failures, requeue_after_error,
    watch_backoff,
};
use crate::client::{ApiError, BmmClient};
use crate::observe::instance_view;

/// Runs the node controller until the stream ends.
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

/// Names read once and remembered: `site/<id>`, `type/<id>`, `tenant`.
#[derive(Debug, Default)]
pub(super) struct Names(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl Names {
    fn get(&self, key: &str) -> Option<String> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: &str, value: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key.to_string(), value.to_string());
        }
    }
}

/// The parts of a Node the decisions read.
fn node_view(node: &Node) -> NodeView {
    let spec = node.spec.as_ref();
    NodeView {
        name: node.name_any(),
        provider_id: spec.and_then(|s| s.provider_id.clone()),
        labels: node.labels().clone(),
        addresses: node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .map(|a| NodeAddress {
                type_: a.type_.clone(),
                address: a.address.clone(),
            })
            .collect(),
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
    }
}

/// What looking for a Node's instance found, owning what [`NodeLookup`] borrows.
enum Observed {
    Found {
        instance: Box<CloudInstance>,
        site_id: String,
        site_name: String,
        instance_type: Option<String>,
        power: Power,
    },
    NotFound,
    OtherSite(String),
    NoMatch,
    Unavailable(String),
}

impl Observed {
    fn lookup<'a>(&'a self, config: &'a ControllerConfig) -> NodeLookup<'a> {
        match self {
            Observed::Found {
                instance,
                site_id,
                site_name,
                instance_type,
                power,
            } => NodeLookup::Found {
                instance,
                site: SiteView {
                    id: site_id,
                    name: site_name,
                    zone: config.zones.get(site_name).map(String::as_str),
                },
                instance_type: instance_type.as_deref(),
                power: *power,
            },
            Observed::NotFound => NodeLookup::NotFound,
            Observed::OtherSite(named) => NodeLookup::OtherSite { named },
            Observed::NoMatch => NodeLookup::NoMatch,
            Observed::Unavailable(why) => NodeLookup::Unavailable(why),
        }
    }
}

fn unavailable(e: &ApiError) -> Observed {
    Observed::Unavailable(e.to_string())
}

/// The instance a provider ID names, or why there is none.
async fn by_id(
    client: &BmmClient,
    id: &ProviderId,
) -> Result<crate::client::types::Instance, Observed> {
    match client.instance(&id.instance_id).await {
        Ok(Some(i)) if i.site_id.as_deref().is_some_and(|s| s != id.site_id) => {
            Err(Observed::OtherSite(id.site_id.clone()))
        }
        Ok(Some(i)) => Ok(i),
        // A 404 is authoritative only in a site the API knows.
        Ok(None) => Err(match client.site(&id.site_id).await {
            Ok(Some(_)) => Observed::NotFound,
            Ok(None) => Observed::OtherSite(id.site_id.clone()),
            Err(e) => unavailable(&e),
        }),
        Err(e) => Err(unavailable(&e)),
    }
}

/// The tenant's instance matching a Node without a provider ID.
async fn by_match(
    client: &BmmClient,
    ctx: &Ctx,
    node: &NodeView,
) -> Result<crate::client::types::Instance, Observed> {
    let tenant = match ctx.names.get("tenant") {
        Some(t) => t,
        None => {
            let t = client.current_tenant().await.map_err(|e| unavailable(&e))?;
            ctx.names.put("tenant", &t.id);
            t.id
        }
    };
    let all = client
        .instances_of_tenant(&tenant)
        .await
        .map_err(|e| unavailable(&e))?;
    let views: Vec<CloudInstance> = all.iter().map(instance_view).collect();
    let found = match_instance(node, &views).map(|v| v.id.clone());
    found
        .and_then(|id| all.into_iter().find(|i| i.id == id))
        .ok_or(Observed::NoMatch)
}

/// The power of the instance's machine: its compute tray's `powerState`. A caller that may
/// not read trays (401/403) does not know it; any other failure is a failed lookup.
async fn power(client: &BmmClient, site: &str, machine: Option<&str>) -> Result<Power, Observed> {
    let Some(machine) = machine else {
        return Ok(Power::Unknown);
    };
    match client.machine_tray(site, machine).await {
        Ok(tray) => Ok(match tray.and_then(|t| t.power_state).as_deref() {
            Some("on") => Power::On,
            Some("off") => Power::Off,
            _ => Power::Unknown,
        }),
        Err(ApiError::Auth { .. }) => Ok(Power::Unknown),
        Err(e) => Err(unavailable(&e)),
    }
}

/// A site's name or an instance type's name by id, read once and remembered.
async fn name_of(
    ctx: &Ctx,
    key: String,
    read: impl std::future::Future<Output = Result<Option<String>, ApiError>>,
) -> Result<Option<String>, Observed> {
    if let Some(name) = ctx.names.get(&key) {
        return Ok(Some(name));
    }
    let name = read.await.map_err(|e| unavailable(&e))?;
    if let Some(n) = &name {
        ctx.names.put(&key, n);
    }
    Ok(name)
}

async fn observe(client: &BmmClient, ctx: &Ctx, node: &NodeView, target: &NodeTarget) -> Observed {
    let found = match target {
        NodeTarget::ById(id) => by_id(client, id).await,
        _ => by_match(client, ctx, node).await,
    };
    let instance = match found {
        Ok(i) => i,
        Err(observed) => return observed,
    };
    let site_id = match (&instance.site_id, target) {
        (Some(s), _) => s.clone(),
        (None, NodeTarget::ById(id)) => id.site_id.clone(),
        (None, _) => {
            return Observed::Unavailable(format!("instance {} names no site", instance.id));
        }
    };
    let details = async {
        let site_name = name_of(ctx, format!("site/{site_id}"), async {
            Ok(client.site(&site_id).await?.map(|s| s.name))
        })
        .await?
        .ok_or_else(|| Observed::OtherSite(site_id.clone()))?;
        let instance_type = match &instance.instance_type_id {
            Some(type_id) => {
                name_of(ctx, format!("type/{type_id}"), async {
                    Ok(client
                        .instance_types(&site_id)
                        .await?
                        .into_iter()
                        .find(|t| &t.id == type_id)
                        .map(|t| t.name))
                })
                .await?
            }
            None => None,
        };
        let power = power(client, &site_id, instance.machine_id.as_deref()).await?;
        Ok::<_, Observed>((site_name, instance_type, power))
    };
    match details.await {
        Ok((site_name, instance_type, power)) => Observed::Found {
            instance: Box::new(instance_view(&instance)),
            site_id,
            site_name,
            instance_type,
            power,
        },
        Err(observed) => observed,
    }
}

/// Records an Event on the Node (failures to record are logged, never fatal).
async fn record(ctx: &Ctx, node: &Node, event: &NodeEvent) {
    let type_ = if event.reason == event_reason::DELETING_NODE {
        EventType::Normal
    } else {
        EventType::Warning
    };
    let published = ctx
        .events
        .publish(
            &Event {
                type_,
                reason: event.reason.to_string(),
                note: Some(event.message.clone()),
                action: "CloudNodeSync".into(),
                secondary: None,
            },
            &node.object_ref(&()),
        )
        .await;
    if let Err(e) = published {
        tracing::warn!(node = %node.name_any(), error = %e, "could not record an Event");
    }
}

/// Writes what the decision changes, deletes the Node when it says so.
async fn act(api: &Api<Node>, name: &str, d: &CloudNodeDecision) -> Result<(), kube::Error> {
    if d.delete {
        tracing::info!(node = %name, "the instance is gone (404): deleting the Node");
        return match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(e),
        };
    }
    let c = &d.changes;
    let mut spec = Map::new();
    if let Some(id) = &c.provider_id {
        spec.insert("providerID".into(), json!(id));
    }
    if let Some(taints) = &c.taints {
        let taints: Vec<Value> = taints
            .iter()
            .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
            .collect();
        spec.insert("taints".into(), Value::Array(taints));
    }
    let mut patch = Map::new();
    if !spec.is_empty() {
        patch.insert("spec".into(), Value::Object(spec));
    }
    if !c.labels.is_empty() {
        patch.insert("metadata".into(), json!({"labels": c.labels}));
    }
    // Addresses first: a Node loses the uninitialized taint only once they are written.
    if let Some(addresses) = &c.addresses {
        let addresses: Vec<Value> = addresses
            .iter()
            .map(|a| json!({"type": a.type_, "address": a.address}))
            .collect();
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"addresses": addresses}})),
        )
        .await?;
    }
    if !patch.is_empty() {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(Value::Object(patch)),
        )
        .await?;
    }
    Ok(())
}

async fn reconcile_node(node: Arc<Node>, ctx: Arc<Ctx>) -> Result<Action, ControllerError> {
    let view = node_view(&node);
    let target = node_target(&view);
    match &target {
        NodeTarget::NotOurs => return Ok(Action::await_change()),
        NodeTarget::Malformed(message) => {
            let event = NodeEvent {
                reason: event_reason::MALFORMED_PROVIDER_ID,
                message: message.clone(),
            };
            record(&ctx, &node, &event).await;
            return Ok(Action::await_change());
        }
        NodeTarget::ById(_) | NodeTarget::Search => {}
    }
    let metrics = &ctx.config.metrics;
    let started = std::time::Instant::now();
    let running = metrics.reconciling("node");
    let outcome = reconcile_ours(&node, &view, &target, &ctx).await;
    drop(running);
    let seconds = Some(started.elapsed().as_secs_f64());
    metrics.reconciled(
        "node",
        if outcome.is_ok() { "ok" } else { "error" },
        seconds,
    );
    if outcome.is_ok() {
        ctx.backoff.succeeded(&super::object_key(&node.metadata));
    }
    outcome
}

async fn reconcile_ours(
    node: &Node,
    view: &NodeView,
    target: &NodeTarget,
    ctx: &Ctx,
) -> Result<Action, ControllerError> {
    let (client, source) = match &ctx.config.node_credentials {
        Some(credentials) => (credentials.client(), credentials.describe()),
        None => {
            let namespace = ctx.config.namespace.as_deref().unwrap_or("default");
            match credentials::read(&ctx.client, &ctx.config, &ctx.clients, namespace, None).await {
                Ok(c) => (c.client, format!("Secret {}", c.secret)),
                Err(message) => {
                    let event = NodeEvent {
                        reason: "CredentialsInvalid",
                        message: message.clone(),
                    };
                    record(ctx, node, &event).await;
                    return Err(ControllerError::Cloud(message));
                }
            }
        }
    };
    let observed = match observe(&client, ctx, view, target).await {
        // Say which credentials failed, so a wrong or expired token points at its Secret.
        Observed::Unavailable(why) => Observed::Unavailable(format!("with {source}: {why}")),
        observed => observed,
    };
    let decision = decide_cloud_node(view, &observed.lookup(&ctx.config));
    if let Some(event) = &decision.event {
        record(ctx, node, event).await;
    }
    let api: Api<Node> = Api::all(ctx.client.clone());
    act(&api, &view.name, &decision).await?;
    match decision.outcome {
        NodeOutcome::Unreachable => Err(ControllerError::Cloud(match observed {
            Observed::Unavailable(why) => why,
            _ => "the BMM API did not answer".into(),
        })),
        NodeOutcome::Steady if decision.delete => Ok(Action::await_change()),
        NodeOutcome::Steady => Ok(Action::requeue(ctx.config.resync)),
        NodeOutcome::Pending => Ok(Action::requeue(ctx.config.dependency_poll)),
        NodeOutcome::Ignored => Ok(Action::await_change()),
    }
}
