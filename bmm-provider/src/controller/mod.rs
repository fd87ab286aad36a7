//! `bmm-provider serve`: the NvidiaBMMCluster and NvidiaBMMMachine controllers (kube-runtime) on top of the same
//! executor and decisions as standalone mode.
//!
//! Per reconcile: nothing before the owner `Cluster` reference exists; objects labelled
//! `cluster.x-k8s.io/managed-by` are skipped; pause (`Cluster.spec.paused`, the
//! `cluster.x-k8s.io/paused` annotation) sets the `Paused` condition and does nothing else;
//! the finalizer is persisted before anything is created; the credentials Secret (`endpoint`,
//! `orgName`, `token`) is re-read every time, so a rotated token is used without a restart,
//! and a missing or malformed Secret gives a condition and no API call; an API 400 gives a
//! terminal condition with the API's message and no hot loop, a 401/403 `AuthFailed` which is
//! retried only once the Secret holds another token.
//!
//! Both controllers also watch the Cluster API objects they depend on (`Cluster` for pause
//! and for the machines, `Machine` for bootstrap data), so unpausing or a new bootstrap
//! Secret name is acted on at once.

mod backoff;
mod cluster;
mod credentials;
mod machine;
mod machine_api_controller;
mod node;
mod node_link;
mod pacing;
mod provisioning;
mod related;
mod token_file;

use std::time::Duration;

use kube::api::{ApiResource, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Client};
use nephrite_bmm::conditions::{self, reason};
use nephrite_bmm::decide::Wait;
use nephrite_krm::condition::set_condition;
use nephrite_krm::{Condition, ConditionStatus, Gvk};
use nephrite_runtime::watch_backoff;
use serde_json::json;

use crate::client::{ApiError, RetryPolicy};
use crate::observe::ReconcileError;

pub use cluster::run_cluster_controller;
pub use credentials::RejectedTokens;
pub use machine::run_machine_controller;
pub use machine_api_controller::{machine_resource, run_machine_api_controller};
pub use node::run_node_controller;
pub use token_file::{NodeCredentials, TokenFileError};

use pacing::Next;

/// Runs the cluster and machine controllers (and the node-lifecycle controller when
/// configured) until one of them stops.
pub async fn run_controllers(client: Client, config: ControllerConfig) {
    let nodes = {
        let (client, config) = (client.clone(), config.clone());
        async move {
            if config.node_lifecycle {
                run_node_controller(client, config).await;
            } else {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = run_cluster_controller(client.clone(), config.clone()) => {}
        _ = run_machine_controller(client, config) => {}
        _ = nodes => {}
    }
}

/// Which controllers a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `serve`: the NvidiaBMMCluster and NvidiaBMMMachine controllers (and the node
    /// controller with `node_lifecycle`).
    Provider,
    /// `ccm`: the node controller alone, in the workload cluster.
    CloudControllerManager,
    /// `machine-api`: the OpenShift Machine API Machine controller.
    MachineApi,
}

/// Runs the controllers of `role` until one of them stops.
pub async fn run_role(client: Client, config: ControllerConfig, role: Role) {
    match role {
        Role::Provider => run_controllers(client, config).await,
        Role::CloudControllerManager => run_node_controller(client, config).await,
        Role::MachineApi => run_machine_api_controller(client, config).await,
    }
}

/// Runs the controllers only while `leading` says this replica holds the Lease (see
/// `nephrite_runtime::leader`): they start when leadership is gained and stop — in the middle
/// of a reconcile if need be, which the decisions tolerate — as soon as it is lost. Returns
/// when the election ends.
pub async fn run_while_leading(
    client: Client,
    config: ControllerConfig,
    role: Role,
    mut leading: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let ended = leading.wait_for(|l| *l).await.is_err();
        if ended {
            return;
        }
        tracing::info!("leading: starting the controllers");
        tokio::select! {
            _ = run_role(client.clone(), config.clone(), role) => return,
            ended = async { leading.wait_for(|l| !*l).await.is_err() } => {
                tracing::warn!("leadership lost: stopping the controllers");
                if ended {
                    return;
                }
            }
        }
    }
}

/// How the controllers behave.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Watch only this namespace (all namespaces when `None`).
    pub namespace: Option<String>,
    /// The Secret used when an object names none (`namespace/name` or `name`).
    pub default_credentials: Option<String>,
    /// Poll interval while cloud objects are in progress (the first poll of an instance; later
    /// ones are spaced by a quarter of its age, up to `poll_max`).
    pub poll: Duration,
    /// The longest interval between polls of an instance in progress.
    pub poll_max: Duration,
    /// Poll interval while waiting for another object (and for a rotated token after a 401).
    pub dependency_poll: Duration,
    /// Per-request timeout of the BMM client.
    pub request_timeout: Duration,
    /// Re-check of objects at rest (an instance that failed or vanished out of band).
    pub resync: Duration,
    /// Retries of transient BMM failures within one reconcile.
    pub retry: RetryPolicy,
    /// Also run the node controller (with the default credentials).
    pub node_lifecycle: bool,
    /// The node controller's BMM client when the credentials come from the environment
    /// (`BMM_ENDPOINT`, `BMM_ORG`, `BMM_TOKEN_FILE`, the file re-read when it changes)
    /// instead of the default Secret.
    pub node_credentials: Option<NodeCredentials>,
    /// The `topology.kubernetes.io/zone` of Nodes per site name (the site's name otherwise).
    pub zones: std::collections::BTreeMap<String, String>,
    /// The first wait after a failed reconcile; it doubles per failure of the same object.
    pub error_backoff: Duration,
    /// The longest wait after failed reconciles.
    pub error_backoff_max: Duration,
    /// Where reconciles and API calls are counted.
    pub metrics: crate::metrics::ProviderMetrics,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            namespace: None,
            default_credentials: None,
            poll: Duration::from_secs(10),
            poll_max: Duration::from_secs(30),
            dependency_poll: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            resync: Duration::from_secs(300),
            retry: RetryPolicy::default(),
            node_lifecycle: false,
            node_credentials: None,
            zones: Default::default(),
            error_backoff: Duration::from_secs(1),
            error_backoff_max: Duration::from_secs(300),
            metrics: crate::metrics::ProviderMetrics::default(),
        }
    }
}

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A Kubernetes call failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// BMM could not be asked (credentials unusable, API failing).
    #[error("bmm: {0}")]
    Cloud(String),
}

/// What a controller keeps between reconciles.
struct Ctx {
    client: Client,
    config: ControllerConfig,
    rejected: RejectedTokens,
    /// BMM clients per credentials Secret.
    clients: credentials::ClientCache,
    /// When each object is due again (see [`pacing`]).
    pacing: pacing::Pacing,
    /// The objects reconciles depend on, as their watches delivered them.
    related: related::Related,
    /// What the machine controller's writes answered, used while the watch lags behind them
    /// (a status just written with the instance id must not make it create again).
    own_machines: related::OwnWrites<nephrite_bmm::crd::NvidiaBMMMachine>,
    /// How long instances take to provision (see [`provisioning`]).
    provisioning: provisioning::ProvisioningTimes,
    /// Failures in a row per object, for the wait after the next one.
    backoff: backoff::ErrorBackoff,
    /// Where Events are recorded.
    events: kube::runtime::events::Recorder,
    /// Names of sites and instance types, and the tenant id, as the node controller read them.
    names: node::Names,
    /// Nodes and Machine API Machines by provider ID (the Machine API controller's nodeRef).
    node_links: node_link::NodeLinks,
}

impl Ctx {
    fn shared(client: Client, config: ControllerConfig) -> std::sync::Arc<Ctx> {
        Ctx::learning(client, config).0
    }

    /// A context, and the stream that yields when a provisioning time is learnt.
    fn learning(
        client: Client,
        config: ControllerConfig,
    ) -> (
        std::sync::Arc<Ctx>,
        futures::channel::mpsc::UnboundedReceiver<()>,
    ) {
        let (provisioning, learnt) = provisioning::ProvisioningTimes::new();
        let events = kube::runtime::events::Recorder::new(
            client.clone(),
            kube::runtime::events::Reporter {
                controller: "bmm-provider".into(),
                instance: None,
            },
        );
        let backoff = backoff::ErrorBackoff::new(config.error_backoff, config.error_backoff_max);
        let ctx = std::sync::Arc::new(Ctx {
            client,
            config,
            backoff,
            events,
            names: node::Names::default(),
            node_links: node_link::NodeLinks::default(),
            rejected: RejectedTokens::default(),
            clients: credentials::ClientCache::default(),
            pacing: pacing::Pacing::default(),
            related: related::Related::default(),
            own_machines: Default::default(),
            provisioning,
        });
        (ctx, learnt)
    }
}

/// A status with conditions.
trait Conditions {
    /// Its conditions.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

impl Conditions for nephrite_bmm::crd::NvidiaBMMClusterStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

impl Conditions for nephrite_bmm::crd::NvidiaBMMMachineStatus {
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
}

/// Writes `status` unless it is what the object already has (`written`); the object as the
/// write left it, when there was one.
async fn report<K, S>(
    api: &Api<K>,
    name: &str,
    status: &S,
    written: Option<&S>,
) -> Result<Option<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: PartialEq + serde::Serialize,
{
    if Some(status) != written {
        return patch_status(api, name, status).await.map(Some);
    }
    Ok(None)
}

/// The key an object's failures are counted under.
fn object_key(meta: &kube::api::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The key an object's BMM failures are counted under, apart from its failed reconciles
/// ([`object_key`]): a BMM call that succeeds must not reset the wait after a Kubernetes write
/// that keeps failing (a 403 from RBAC), or the object would be retried, and BMM called, about
/// once a second for ever. Each count is reset by its own success: BMM's in [`settle`], the
/// reconcile's in [`paced`].
fn bmm_failures_key(key: &str) -> String {
    format!("{key}@bmm")
}

/// After a failed reconcile: try the object again after its backoff.
fn requeue_after_error<K: kube::Resource>(
    obj: std::sync::Arc<K>,
    _: &ControllerError,
    ctx: std::sync::Arc<Ctx>,
) -> Action {
    Action::requeue(ctx.backoff.failed(&object_key(obj.meta())))
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// A Cluster API (`cluster.x-k8s.io/v1beta2`) resource.
fn capi_resource(kind: &str, plural: &str) -> ApiResource {
    Gvk::new("cluster.x-k8s.io", "v1beta2", kind).api_resource(plural)
}

/// Merge-patches `status` of a namespaced object; the object as patched.
async fn patch_status<K>(
    api: &Api<K>,
    name: &str,
    status: &impl serde::Serialize,
) -> Result<K, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
}

/// Replaces `metadata.finalizers` of a namespaced object; the object as patched.
async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    finalizers: Vec<String>,
) -> Result<K, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
    )
    .await
}

/// Sets `Ready=False` with a reason and a message.
fn set_not_ready(
    conditions: &mut Vec<Condition>,
    why: &str,
    message: impl Into<String>,
    now: &str,
) {
    set_condition(
        conditions,
        Condition::new(conditions::READY, ConditionStatus::False)
            .with_reason(why)
            .with_message(message),
        now,
    );
}

/// Sets `Paused=True`.
fn set_paused(conditions: &mut Vec<Condition>, now: &str) {
    set_condition(
        conditions,
        Condition::new(conditions::PAUSED, ConditionStatus::True).with_reason(reason::PAUSED),
        now,
    );
}

/// How a failed reconcile is reported: the condition reason, and whether to retry on a timer.
fn classify(e: &ReconcileError) -> (&'static str, bool) {
    match e {
        ReconcileError::Api {
            source: ApiError::Rejected { .. },
            ..
        } => (reason::API_REJECTED, false),
        ReconcileError::Api {
            source: ApiError::Auth { .. },
            ..
        } => (reason::AUTH_FAILED, false),
        ReconcileError::SiteNotFound { .. } => (reason::SITE_NOT_FOUND, false),
        ReconcileError::Api { .. } => (reason::CLOUD_ERROR, true),
    }
}

/// Whether a Cluster API `Cluster` has `spec.paused: true`.
fn cluster_paused(cluster: Option<&kube::api::DynamicObject>) -> bool {
    cluster
        .and_then(|c| c.data.pointer("/spec/paused"))
        .and_then(|p| p.as_bool())
        .unwrap_or(false)
}

/// Turns the outcome of a reconcile into what comes next, recording a failure as
/// `Ready=False`: a 401/403 remembers the token so the API is called again only with another
/// one; a transient failure comes back after the object's backoff (its BMM failures, counted
/// under [`bmm_failures_key`] of `key`); a terminal one waits for a change.
///
/// `poll` is the wait when something is in progress.
fn settle(
    ctx: &Ctx,
    key: &str,
    credentials: &credentials::Credentials,
    outcome: Result<Wait, ReconcileError>,
    poll: Duration,
    conditions: &mut Vec<Condition>,
    now: &str,
) -> Next {
    let bmm_key = bmm_failures_key(key);
    match outcome {
        Ok(wait) => {
            ctx.rejected.accept(credentials);
            ctx.backoff.succeeded(&bmm_key);
            match wait {
                Wait::Poll => Next::After(poll),
                Wait::Dependency => Next::After(ctx.config.dependency_poll),
                Wait::Steady => Next::After(ctx.config.resync),
                Wait::Blocked => Next::Change,
            }
        }
        Err(e) => {
            let (why, retry) = classify(&e);
            set_not_ready(conditions, why, e.to_string(), now);
            if why == reason::AUTH_FAILED {
                ctx.rejected.reject(credentials);
                Next::After(ctx.config.dependency_poll)
            } else if retry {
                Next::After(ctx.backoff.failed(&bmm_key))
            } else {
                Next::Change
            }
        }
    }
}

/// Runs `reconcile` unless the object's inputs (`inputs`, a [`pacing::fingerprint`]) are
/// those of its last reconcile and its requeue is not due (nor `sooner`, when something is
/// expected earlier); records what it asked for and counts it (`controller` names the
/// controller in the metrics).
async fn paced<F>(
    ctx: &Ctx,
    controller: &str,
    key: &str,
    (inputs, sooner): (u64, Option<std::time::Instant>),
    reconcile: F,
) -> Result<Action, ControllerError>
where
    F: std::future::Future<Output = Result<Next, ControllerError>>,
{
    let metrics = &ctx.config.metrics;
    let started = std::time::Instant::now();
    if let Some(next) = ctx.pacing.unchanged(key, inputs, started, sooner) {
        metrics.reconciled(controller, "skipped", None);
        return Ok(next.into());
    }
    let running = metrics.reconciling(controller);
    let outcome = reconcile.await;
    drop(running);
    let seconds = Some(started.elapsed().as_secs_f64());
    let next = match outcome {
        Ok(next) => next,
        Err(e) => {
            metrics.reconciled(controller, "error", seconds);
            return Err(e);
        }
    };
    metrics.reconciled(controller, "ok", seconds);
    ctx.backoff.succeeded(key);
    ctx.pacing
        .record(key, inputs, next, std::time::Instant::now());
    Ok(next.into())
}

/// Drives a controller's result stream, logging failed reconciles.
async fn log_failures<T, E: std::fmt::Display>(
    what: &'static str,
    results: impl futures::Stream<Item = Result<T, E>>,
) {
    use futures::StreamExt;
    results
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::warn!(error = %e, "{what} reconcile failed");
            }
        })
        .await;
}

#[cfg(test)]
mod tests;
