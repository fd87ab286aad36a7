//! The NvidiaBMMMachine controller.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use nephrite_bmm::conditions::{self, reason};
use nephrite_bmm::crd::{NvidiaBMMCluster, NvidiaBMMMachine};
use nephrite_bmm::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER, PAUSED_ANNOTATION};
use nephrite_krm::condition::find_condition;
use serde_json::json;

use super::pacing::{Next, age_since, fingerprint};
use super::{
    ControllerConfig, ControllerError, Ctx, capi_resource, cluster_paused, credentials,
    log_failures, now, paced, provisioning, related, report, requeue_after_error, set_finalizers,
    set_not_ready, set_paused, settle, watch_backoff,
};
use crate::observe::{ClusterRecord, MachineRecord, reconcile_machine};
use nephrite_bmm::cloud::Lifecycle;
use nephrite_bmm::crd::NvidiaBMMMachineStatus;
use nephrite_bmm::decide::{poll_after, poll_expecting};

/// The machines of a cluster (by the `cluster.x-k8s.io/cluster-name` label).
fn machines_of(
    store: &Store<NvidiaBMMMachine>,
    namespace: Option<String>,
    cluster: &str,
) -> Vec<ObjectRef<NvidiaBMMMachine>> {
    store
        .state()
        .iter()
        .filter(|m| m.namespace() == namespace)
        .filter(|m| m.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster))
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Runs the machine controller until the stream ends.
pub async fn run_machine_controller(client: Client, config: ControllerConfig) {
    let scoped = |kind: &str, plural: &str| -> Api<DynamicObject> {
        match &config.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &capi_resource(kind, plural)),
            None => Api::all_with(client.clone(), &capi_resource(kind, plural)),
        }
    };
    let (capi_clusters, capi_machines) =
        (scoped("Cluster", "clusters"), scoped("Machine", "machines"));
    let (api, infra): (Api<NvidiaBMMMachine>, Api<NvidiaBMMCluster>) = match &config.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let (ctx, learnt) = Ctx::learning(client, config);
    // A provisioning time learnt: polls scheduled before move to when instances are due.
    let controller = Controller::new(api, watcher::Config::default())
        .trigger_backoff(watch_backoff())
        .reconcile_all_on(learnt);
    let (by_cluster, by_infra) = (controller.store(), controller.store());
    let (on_machine, on_cluster, on_infra) = (ctx.clone(), ctx.clone(), ctx.clone());
    let controller = controller
        // The owner Machine: bootstrap data, failure domain.
        .watches_with(
            capi_machines,
            capi_resource("Machine", "machines"),
            watcher::Config::default(),
            move |m: DynamicObject| {
                let name = m
                    .data
                    .pointer("/spec/infrastructureRef/name")
                    .and_then(|n| n.as_str())
                    .map(str::to_string)
                    .or_else(|| m.metadata.name.clone());
                let target = name.zip(m.namespace());
                let fingerprint = related::machine_fingerprint(&m);
                on_machine
                    .related
                    .machines
                    .keep(m, fingerprint)
                    .then(|| target.map(|(n, ns)| ObjectRef::new(&n).within(&ns)))
                    .flatten()
            },
        )
        // The Cluster: pause.
        .watches_with(
            capi_clusters,
            capi_resource("Cluster", "clusters"),
            watcher::Config::default(),
            move |c: DynamicObject| {
                let (namespace, name) = (c.namespace(), c.name_any());
                let fingerprint = related::cluster_fingerprint(&c);
                if on_cluster.related.clusters.keep(c, fingerprint) {
                    machines_of(&by_cluster, namespace, &name)
                } else {
                    Vec::new()
                }
            },
        )
        // The infrastructure cluster: its network becoming Ready.
        .watches(
            infra,
            watcher::Config::default(),
            move |c: NvidiaBMMCluster| {
                let cluster = c
                    .owner_references()
                    .iter()
                    .find(|o| o.kind == "Cluster")
                    .map(|o| o.name.clone())
                    .unwrap_or_else(|| c.name_any());
                let namespace = c.namespace();
                let fingerprint = related::infra_fingerprint(&c);
                if on_infra.related.infra.keep(c, fingerprint) {
                    machines_of(&by_infra, namespace, &cluster)
                } else {
                    Vec::new()
                }
            },
        );
    log_failures(
        "machine",
        controller.run(reconcile_machine_object, requeue_after_error, ctx),
    )
    .await;
}

/// Bootstrap data: `Machine.spec.bootstrap.dataSecretName`, key `value`.
async fn bootstrap_data(
    client: &Client,
    namespace: &str,
    machine: Option<&DynamicObject>,
) -> Result<Option<String>, kube::Error> {
    let Some(secret_name) = machine
        .and_then(|m| m.data.pointer("/spec/bootstrap/dataSecretName"))
        .and_then(|v| v.as_str())
    else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    Ok(secrets.get_opt(secret_name).await?.and_then(|secret| {
        secret.data.and_then(|d| {
            d.get("value")
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
        })
    }))
}

/// The latest copy of a Cluster API object (`Machine` or `Cluster`), fetched when the watch
/// has not delivered it yet.
async fn capi_object(
    ctx: &Ctx,
    latest: &related::Latest<DynamicObject>,
    (kind, plural): (&str, &str),
    namespace: &str,
    name: &str,
    relevant: fn(&DynamicObject) -> u64,
) -> Result<Option<Arc<DynamicObject>>, kube::Error> {
    if let Some(o) = latest.get(namespace, name) {
        return Ok(Some(o));
    }
    let api: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &capi_resource(kind, plural));
    Ok(api.get_opt(name).await?.map(|o| {
        let f = relevant(&o);
        latest.keep_if_absent(o.clone(), f);
        Arc::new(o)
    }))
}

/// The `NvidiaBMMCluster` named `name`, from the watch or fetched.
async fn infra_cluster(
    ctx: &Ctx,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<NvidiaBMMCluster>>, kube::Error> {
    if let Some(c) = ctx.related.infra.get(namespace, name) {
        return Ok(Some(c));
    }
    let api: Api<NvidiaBMMCluster> = Api::namespaced(ctx.client.clone(), namespace);
    Ok(api.get_opt(name).await?.map(|c| {
        let f = related::infra_fingerprint(&c);
        ctx.related.infra.keep_if_absent(c.clone(), f);
        Arc::new(c)
    }))
}

/// The key under which the provisioning times of `obj`'s instances are learnt.
fn provisioning_key(obj: &NvidiaBMMMachine, infra: &NvidiaBMMCluster) -> Option<String> {
    let site = infra.status.as_ref()?.site_id.as_deref()?;
    Some(provisioning::key(
        site,
        obj.spec.instance_type.id.as_deref(),
    ))
}

/// How long `obj`'s instance has been provisioning (since `InstanceProvisioned` turned True).
fn provisioning_age(status: &NvidiaBMMMachineStatus) -> Duration {
    let since = find_condition(&status.conditions, conditions::INSTANCE_PROVISIONED)
        .and_then(|c| c.last_transition_time.as_deref());
    age_since(since, jiff::Timestamp::now())
}

/// When `obj`'s instance, in progress, is expected to be Ready (by the provisioning times of
/// its kind; possibly past); `None` when that is unknown.
fn expected_ready(
    ctx: &Ctx,
    obj: &NvidiaBMMMachine,
    infra: Option<&NvidiaBMMCluster>,
) -> Option<Instant> {
    let status = obj.status.as_ref()?;
    if obj.metadata.deletion_timestamp.is_some()
        || Lifecycle::of(status.instance_state.as_deref()?) != Lifecycle::InProgress
    {
        return None;
    }
    let expected = ctx.provisioning.expected(&provisioning_key(obj, infra?)?)?;
    let age = provisioning_age(status);
    let now = Instant::now();
    match expected.checked_sub(age) {
        Some(left) => Some(now + left),
        None => Some(now.checked_sub(age - expected).unwrap_or(now)),
    }
}

/// What a machine reconcile depends on, read from the watches (or fetched once).
struct Dependencies {
    machine: Option<Arc<DynamicObject>>,
    cluster: Option<Arc<DynamicObject>>,
    infra_name: String,
    infra: Option<Arc<NvidiaBMMCluster>>,
}

async fn reconcile_machine_object(
    watched: Arc<NvidiaBMMMachine>,
    ctx: Arc<Ctx>,
) -> Result<Action, ControllerError> {
    // What this controller last wrote, while the watch has not delivered it yet.
    let obj = ctx.own_machines.newest(watched);
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let key = format!("{namespace}/{}", obj.name_any());
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
    let machine = capi_object(
        &ctx,
        &ctx.related.machines,
        ("Machine", "machines"),
        &namespace,
        &owner.name,
        related::machine_fingerprint,
    )
    .await?;
    let cluster = capi_object(
        &ctx,
        &ctx.related.clusters,
        ("Cluster", "clusters"),
        &namespace,
        &cluster_name,
        related::cluster_fingerprint,
    )
    .await?;
    // The infrastructure cluster: Cluster.spec.infrastructureRef, else the same name.
    let infra_name = cluster
        .as_ref()
        .and_then(|c| c.data.pointer("/spec/infrastructureRef/name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| cluster_name.clone());
    let infra = infra_cluster(&ctx, &namespace, &infra_name).await?;
    let inputs = fingerprint(&(
        related::own_inputs(&obj.metadata, &obj.spec),
        machine.as_deref().map(related::machine_inputs),
        cluster.as_deref().map(related::cluster_inputs),
        infra.as_deref().map(related::infra_inputs),
    ));
    let sooner = expected_ready(&ctx, &obj, infra.as_deref());
    let deps = Dependencies {
        machine,
        cluster,
        infra_name,
        infra,
    };
    let outcome = paced(
        &ctx,
        "machine",
        &key,
        (inputs, sooner),
        reconcile_machine_with(&obj, &ctx, deps),
    )
    .await;
    if obj.metadata.deletion_timestamp.is_some()
        && !obj.finalizers().iter().any(|f| f == MACHINE_FINALIZER)
    {
        ctx.pacing.forget(&key);
    }
    outcome
}

async fn reconcile_machine_with(
    obj: &NvidiaBMMMachine,
    ctx: &Ctx,
    deps: Dependencies,
) -> Result<Next, ControllerError> {
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let api: Api<NvidiaBMMMachine> = Api::namespaced(ctx.client.clone(), &namespace);
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let has_finalizer = obj.finalizers().iter().any(|f| f == MACHINE_FINALIZER);
    let now = now();
    let mut status = obj.status.clone().unwrap_or_default();
    let written = obj.status.as_ref();
    let cluster_name = obj
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .cloned()
        .unwrap_or_default();
    if obj.annotations().contains_key(PAUSED_ANNOTATION) || cluster_paused(deps.cluster.as_deref())
    {
        set_paused(&mut status.conditions, &now);
        report(&api, &name, &status, written).await?;
        return Ok(Next::Change);
    }
    if deleting && !has_finalizer {
        return Ok(Next::Change);
    }
    let Some(infra) = deps.infra else {
        set_not_ready(
            &mut status.conditions,
            reason::WAITING_FOR_CLUSTER,
            format!("NvidiaBMMCluster {} not found", deps.infra_name),
            &now,
        );
        report(&api, &name, &status, written).await?;
        return Ok(Next::After(ctx.config.dependency_poll));
    };
    if !deleting && !has_finalizer {
        let mut finalizers = obj.finalizers().to_vec();
        finalizers.push(MACHINE_FINALIZER.to_string());
        ctx.own_machines
            .wrote(set_finalizers(&api, &name, finalizers).await?);
        return Ok(Next::After(Duration::from_millis(10)));
    }
    // Bootstrap data matters only until the instance exists.
    let bootstrap = if status.instance_id.is_none() && !deleting {
        bootstrap_data(&ctx.client, &namespace, deps.machine.as_deref()).await?
    } else {
        None
    };
    let credentials = match credentials::usable_or_report(
        ctx,
        &api,
        (&namespace, &name),
        infra.spec.authentication.as_ref().map(|a| &a.secret_ref),
        &mut status,
        written,
        &now,
    )
    .await?
    {
        Ok(c) => c,
        Err(next) => return Ok(next),
    };
    let cluster_record = ClusterRecord {
        namespace: namespace.clone(),
        name: deps.infra_name,
        spec: infra.spec.clone(),
        status: infra.status.clone().unwrap_or_default(),
        finalizer: true,
        control_plane_endpoint: None,
        labels: Default::default(),
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
        failure_domain: deps
            .machine
            .as_ref()
            .and_then(|m| m.data.pointer("/spec/failureDomain"))
            .and_then(|d| d.as_str())
            .map(str::to_string),
        provisioned_in: None,
    };
    let outcome =
        reconcile_machine(&credentials.client, &cluster_record, &mut record, deleting).await;
    let learning = provisioning_key(obj, &infra);
    if let (Some(took), Some(key)) = (record.provisioned_in, &learning) {
        ctx.provisioning.record(key, took);
    }
    // An instance in progress is polled when instances of its kind are expected Ready, else
    // by its age: since InstanceProvisioned turned True (its creation) or, while deleting,
    // since Ready turned False.
    let poll = if deleting {
        let since = find_condition(&record.status.conditions, conditions::READY)
            .and_then(|c| c.last_transition_time.as_deref());
        let age = age_since(since, jiff::Timestamp::now());
        poll_after(ctx.config.poll, ctx.config.poll_max, age, fastrand::f64())
    } else {
        poll_expecting(
            ctx.config.poll,
            ctx.config.poll_max,
            provisioning_age(&record.status),
            learning.and_then(|k| ctx.provisioning.expected(&k)),
            fastrand::f64(),
        )
    };
    let next = settle(
        ctx,
        &super::object_key(&obj.metadata),
        &credentials,
        outcome,
        poll,
        &mut record.status.conditions,
        &now,
    );
    if record.spec.provider_id != obj.spec.provider_id && record.spec.provider_id.is_some() {
        let patched = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"providerID": record.spec.provider_id}})),
            )
            .await?;
        ctx.own_machines.wrote(patched);
    }
    if let Some(patched) = report(&api, &name, &record.status, written).await? {
        ctx.own_machines.wrote(patched);
    }
    if deleting && !record.finalizer {
        ctx.own_machines.forget(&namespace, &name);
        let finalizers: Vec<String> = obj
            .finalizers()
            .iter()
            .filter(|f| *f != MACHINE_FINALIZER)
            .cloned()
            .collect();
        set_finalizers(&api, &name, finalizers).await?;
    }
    Ok(next)
}
