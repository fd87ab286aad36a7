//! `bmm-provider serve`: the NvidiaBMMCluster and NvidiaBMMMachine controllers (kube-runtime) on top of the same
//! executor and decisions as standalone mode.
//!
//! Per reconcile: nothing before the owner `Cluster` reference exists; objects labelled
//! `cluster.x-k8s.io/managed-by` are skipped; pause (`Cluster.spec.paused`, the
//! `cluster.x-k8s.io/paused` annotation) sets the `Paused` condition and does nothing else;
//! the finalizer is persisted before anything is created; the credentials Secret (`endpoint`,
//! `orgName`, `token`) is re-read every time, so a rotated token is used without a restart,
//! and a missing or malformed Secret gives a condition and no API call; an API 400 gives a
//! terminal condition with the API's message and no hot loop, a 401/403 `AuthFailed`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use nephrite_bmm::conditions::{self, reason};
use nephrite_bmm::crd::{NvidiaBMMCluster, NvidiaBMMClusterStatus, NvidiaBMMMachine};
use nephrite_bmm::decide::Wait;
use nephrite_bmm::{
    CLUSTER_FINALIZER, CLUSTER_NAME_LABEL, MACHINE_FINALIZER, MANAGED_BY_LABEL, PAUSED_ANNOTATION,
};
use nephrite_krm::condition::set_condition;
use nephrite_krm::{Condition, ConditionStatus};
use serde_json::json;

use crate::client::{ApiError, BmmClient, ClientConfig, Token};
use crate::observe::{
    ClusterRecord, MachineRecord, ReconcileError, reconcile_cluster, reconcile_machine,
};

/// How the controllers behave.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Watch only this namespace (all namespaces when `None`).
    pub namespace: Option<String>,
    /// The Secret used when an object names none (`namespace/name` or `name`).
    pub default_credentials: Option<String>,
    /// Poll interval while cloud objects are in progress.
    pub poll: Duration,
    /// Poll interval while waiting for another object.
    pub dependency_poll: Duration,
    /// Per-request timeout of the BMM client.
    pub request_timeout: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            namespace: None,
            default_credentials: None,
            poll: Duration::from_secs(10),
            dependency_poll: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A Kubernetes call failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
}

struct Ctx {
    client: Client,
    config: ControllerConfig,
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// Runs the cluster controller until the stream ends.
pub async fn run_cluster_controller(client: Client, config: ControllerConfig) {
    let api: Api<NvidiaBMMCluster> = match &config.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let ctx = Arc::new(Ctx { client, config });
    Controller::new(api, watcher::Config::default())
        .run(reconcile_cluster_object, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::warn!(error = %e, "cluster reconcile failed");
            }
        })
        .await;
}

fn error_policy(_: Arc<NvidiaBMMCluster>, _: &ControllerError, ctx: Arc<Ctx>) -> Action {
    Action::requeue(ctx.config.poll)
}

fn capi_cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Cluster"),
        "clusters",
    )
}

/// Reads the credentials Secret; `Err` carries the condition message.
async fn credentials(
    ctx: &Ctx,
    namespace: &str,
    obj: &NvidiaBMMCluster,
) -> Result<BmmClient, String> {
    let (ns, name) = match (&obj.spec.authentication, &ctx.config.default_credentials) {
        (Some(a), _) => (a.secret_ref.namespace.clone().unwrap_or_else(|| namespace.to_string()), a.secret_ref.name.clone()),
        (None, Some(default)) => match default.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => (namespace.to_string(), default.clone()),
        },
        (None, None) => return Err("spec.authentication.secretRef is not set and the controller has no default credentials".into()),
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let secret = match secrets.get_opt(&name).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(format!("Secret {ns}/{name} does not exist")),
        Err(e) => return Err(format!("reading Secret {ns}/{name}: {e}")),
    };
    let data = secret.data.unwrap_or_default();
    let string_data = secret.string_data.unwrap_or_default();
    let field = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .or_else(|| string_data.get(key).cloned())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("Secret {ns}/{name} has no key {key:?}"))
    };
    let mut config = ClientConfig::new(
        field("endpoint")?,
        field("orgName")?,
        Token::new(field("token")?),
    );
    config.timeout = ctx.config.request_timeout;
    BmmClient::new(config).map_err(|e| format!("Secret {ns}/{name}: {e}"))
}

async fn write_status(
    api: &Api<NvidiaBMMCluster>,
    name: &str,
    status: &NvidiaBMMClusterStatus,
) -> Result<(), kube::Error> {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .map(|_| ())
}

async fn set_finalizers(
    api: &Api<NvidiaBMMCluster>,
    name: &str,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
    )
    .await
    .map(|_| ())
}

async fn reconcile_cluster_object(
    obj: Arc<NvidiaBMMCluster>,
    ctx: Arc<Ctx>,
) -> Result<Action, ControllerError> {
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let api: Api<NvidiaBMMCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    tracing::debug!(%namespace, %name, "reconciling NvidiaBMMCluster");
    if obj.labels().contains_key(MANAGED_BY_LABEL) {
        return Ok(Action::await_change());
    }
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let has_finalizer = obj.finalizers().iter().any(|f| f == CLUSTER_FINALIZER);
    let mut status = obj.status.clone().unwrap_or_default();
    let now = now();

    // The owner Cluster and pause.
    let owner = obj
        .owner_references()
        .iter()
        .find(|o| o.kind == "Cluster" && o.api_version.starts_with("cluster.x-k8s.io/"))
        .cloned();
    if owner.is_none() && !deleting {
        return Ok(Action::await_change());
    }
    let mut paused = obj.annotations().contains_key(PAUSED_ANNOTATION);
    if let Some(owner) = &owner {
        let clusters: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &namespace, &capi_cluster_resource());
        if let Ok(Some(c)) = clusters.get_opt(&owner.name).await {
            paused |= c
                .data
                .pointer("/spec/paused")
                .and_then(|p| p.as_bool())
                .unwrap_or(false);
        }
    }
    if paused {
        set_condition(
            &mut status.conditions,
            Condition::new(conditions::PAUSED, ConditionStatus::True).with_reason(reason::PAUSED),
            &now,
        );
        write_status(&api, &name, &status).await?;
        return Ok(Action::await_change());
    }
    if deleting && !has_finalizer {
        return Ok(Action::await_change());
    }
    // Finalizer first, persisted before anything is created.
    if !deleting && !has_finalizer {
        let mut finalizers = obj.finalizers().to_vec();
        finalizers.push(CLUSTER_FINALIZER.to_string());
        set_finalizers(&api, &name, finalizers).await?;
        return Ok(Action::requeue(Duration::from_millis(10)));
    }
    let client = match credentials(&ctx, &namespace, &obj).await {
        Ok(c) => c,
        Err(message) => {
            set_condition(
                &mut status.conditions,
                Condition::new(conditions::READY, ConditionStatus::False)
                    .with_reason(reason::CREDENTIALS_INVALID)
                    .with_message(message),
                &now,
            );
            write_status(&api, &name, &status).await?;
            return Ok(Action::await_change());
        }
    };
    let mut record = ClusterRecord {
        namespace: namespace.clone(),
        name: name.clone(),
        spec: obj.spec.clone(),
        status: status.clone(),
        finalizer: true,
        control_plane_endpoint: None,
    };
    let outcome = reconcile_cluster(&client, &mut record, deleting, None).await;
    tracing::debug!(%namespace, %name, ?outcome, ready = record.status.ready, "NvidiaBMMCluster reconciled");
    let action = match outcome {
        Ok(wait) => match wait {
            Wait::Poll => Action::requeue(ctx.config.poll),
            Wait::Dependency => Action::requeue(ctx.config.dependency_poll),
            Wait::Steady | Wait::Blocked => Action::await_change(),
        },
        Err(e) => {
            let (why, requeue) = match &e {
                ReconcileError::Api {
                    source: ApiError::Rejected { .. },
                    ..
                } => (reason::API_REJECTED, None),
                ReconcileError::Api {
                    source: ApiError::Auth { .. },
                    ..
                } => (reason::AUTH_FAILED, None),
                ReconcileError::SiteNotFound { .. } => (reason::SITE_NOT_FOUND, None),
                ReconcileError::Api { .. } => (reason::CLOUD_ERROR, Some(ctx.config.poll)),
            };
            set_condition(
                &mut record.status.conditions,
                Condition::new(conditions::READY, ConditionStatus::False)
                    .with_reason(why)
                    .with_message(e.to_string()),
                &now,
            );
            match requeue {
                Some(after) => Action::requeue(after),
                None => Action::await_change(),
            }
        }
    };
    if record.status != obj.status.clone().unwrap_or_default() {
        write_status(&api, &name, &record.status).await?;
    }
    if deleting && !record.finalizer {
        let finalizers: Vec<String> = obj
            .finalizers()
            .iter()
            .filter(|f| *f != CLUSTER_FINALIZER)
            .cloned()
            .collect();
        set_finalizers(&api, &name, finalizers).await?;
    }
    Ok(action)
}

// ---- the NvidiaBMMMachine controller -------------------------------------------------------

fn capi_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", kind),
        plural,
    )
}

/// Runs the machine controller until the stream ends.
pub async fn run_machine_controller(client: Client, config: ControllerConfig) {
    let api: Api<NvidiaBMMMachine> = match &config.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let ctx = Arc::new(Ctx { client, config });
    Controller::new(api, watcher::Config::default())
        .run(reconcile_machine_object, machine_error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::warn!(error = %e, "machine reconcile failed");
            }
        })
        .await;
}

fn machine_error_policy(_: Arc<NvidiaBMMMachine>, _: &ControllerError, ctx: Arc<Ctx>) -> Action {
    Action::requeue(ctx.config.poll)
}

async fn reconcile_machine_object(
    obj: Arc<NvidiaBMMMachine>,
    ctx: Arc<Ctx>,
) -> Result<Action, ControllerError> {
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let api: Api<NvidiaBMMMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let has_finalizer = obj.finalizers().iter().any(|f| f == MACHINE_FINALIZER);
    let now = now();
    let mut status = obj.status.clone().unwrap_or_default();
    let Some(owner) = obj
        .owner_references()
        .iter()
        .find(|o| o.kind == "Machine" && o.api_version.starts_with("cluster.x-k8s.io/"))
        .cloned()
    else {
        return Ok(Action::await_change());
    };
    let Some(cluster_name) = obj.labels().get(CLUSTER_NAME_LABEL).cloned() else {
        return Ok(Action::await_change());
    };
    let machines: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &namespace,
        &capi_resource("Machine", "machines"),
    );
    let machine = machines.get_opt(&owner.name).await?;
    let capi_clusters: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &capi_cluster_resource());
    let capi_cluster = capi_clusters.get_opt(&cluster_name).await?;
    let paused = obj.annotations().contains_key(PAUSED_ANNOTATION)
        || capi_cluster
            .as_ref()
            .and_then(|c| c.data.pointer("/spec/paused"))
            .and_then(|p| p.as_bool())
            .unwrap_or(false);
    if paused {
        set_condition(
            &mut status.conditions,
            Condition::new(conditions::PAUSED, ConditionStatus::True).with_reason(reason::PAUSED),
            &now,
        );
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
        return Ok(Action::await_change());
    }
    if deleting && !has_finalizer {
        return Ok(Action::await_change());
    }
    // The infrastructure cluster: Cluster.spec.infrastructureRef, else the same name.
    let infra_name = capi_cluster
        .as_ref()
        .and_then(|c| c.data.pointer("/spec/infrastructureRef/name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| cluster_name.clone());
    let clusters: Api<NvidiaBMMCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(infra) = clusters.get_opt(&infra_name).await? else {
        set_condition(
            &mut status.conditions,
            Condition::new(conditions::READY, ConditionStatus::False)
                .with_reason(reason::WAITING_FOR_CLUSTER)
                .with_message(format!("NvidiaBMMCluster {infra_name} not found")),
            &now,
        );
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
        return Ok(Action::requeue(ctx.config.dependency_poll));
    };
    if !deleting && !has_finalizer {
        let mut finalizers = obj.finalizers().to_vec();
        finalizers.push(MACHINE_FINALIZER.to_string());
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
        )
        .await?;
        return Ok(Action::requeue(Duration::from_millis(10)));
    }
    // Bootstrap data: Machine.spec.bootstrap.dataSecretName, key `value`.
    let mut bootstrap = None;
    if let Some(secret_name) = machine
        .as_ref()
        .and_then(|m| m.data.pointer("/spec/bootstrap/dataSecretName"))
        .and_then(|v| v.as_str())
    {
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
        if let Some(secret) = secrets.get_opt(secret_name).await? {
            bootstrap = secret.data.and_then(|d| {
                d.get("value")
                    .and_then(|v| String::from_utf8(v.0.clone()).ok())
            });
        }
    }
    let client = match credentials(&ctx, &namespace, &infra).await {
        Ok(c) => c,
        Err(message) => {
            set_condition(
                &mut status.conditions,
                Condition::new(conditions::READY, ConditionStatus::False)
                    .with_reason(reason::CREDENTIALS_INVALID)
                    .with_message(message),
                &now,
            );
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
            return Ok(Action::await_change());
        }
    };
    let cluster_record = ClusterRecord {
        namespace: namespace.clone(),
        name: infra_name,
        spec: infra.spec.clone(),
        status: infra.status.clone().unwrap_or_default(),
        finalizer: true,
        control_plane_endpoint: None,
    };
    let mut record = MachineRecord {
        namespace: namespace.clone(),
        name: name.clone(),
        cluster: cluster_name,
        control_plane: obj.labels().contains_key(nephrite_bmm::CONTROL_PLANE_LABEL),
        spec: obj.spec.clone(),
        status,
        finalizer: true,
        bootstrap,
        bootstrap_required: true,
    };
    let action = match reconcile_machine(&client, &cluster_record, &mut record, deleting).await {
        Ok(Wait::Poll) => Action::requeue(ctx.config.poll),
        Ok(Wait::Dependency) => Action::requeue(ctx.config.dependency_poll),
        Ok(Wait::Steady | Wait::Blocked) => Action::await_change(),
        Err(e) => {
            let why = match &e {
                ReconcileError::Api {
                    source: ApiError::Rejected { .. },
                    ..
                } => reason::API_REJECTED,
                ReconcileError::Api {
                    source: ApiError::Auth { .. },
                    ..
                } => reason::AUTH_FAILED,
                _ => reason::CLOUD_ERROR,
            };
            set_condition(
                &mut record.status.conditions,
                Condition::new(conditions::READY, ConditionStatus::False)
                    .with_reason(why)
                    .with_message(e.to_string()),
                &now,
            );
            if why == reason::CLOUD_ERROR {
                Action::requeue(ctx.config.poll)
            } else {
                Action::await_change()
            }
        }
    };
    if record.spec.provider_id != obj.spec.provider_id && record.spec.provider_id.is_some() {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": record.spec.provider_id}})),
        )
        .await?;
    }
    if Some(&record.status) != obj.status.as_ref() {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": record.status})),
        )
        .await?;
    }
    if deleting && !record.finalizer {
        let finalizers: Vec<String> = obj
            .finalizers()
            .iter()
            .filter(|f| *f != MACHINE_FINALIZER)
            .cloned()
            .collect();
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
        )
        .await?;
    }
    Ok(action)
}
