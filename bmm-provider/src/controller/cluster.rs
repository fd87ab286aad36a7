//! The NvidiaBMMCluster controller.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use nephrite_bmm::crd::NvidiaBMMCluster;
use nephrite_bmm::{CLUSTER_FINALIZER, MANAGED_BY_LABEL, PAUSED_ANNOTATION};

use super::pacing::{Next, fingerprint};
use super::{
    ControllerConfig, ControllerError, Ctx, capi_resource, cluster_paused, credentials,
    log_failures, now, paced, related, report, requeue_after_error, set_finalizers, set_paused,
    settle, watch_backoff,
};
use crate::observe::{ClusterRecord, reconcile_cluster};

/// The `NvidiaBMMCluster` a Cluster API `Cluster` points at (`spec.infrastructureRef`, else
/// the same name).
fn infrastructure_of(cluster: &DynamicObject) -> Option<ObjectRef<NvidiaBMMCluster>> {
    let name = cluster
        .data
        .pointer("/spec/infrastructureRef")
        .filter(|r| r.get("kind").and_then(|k| k.as_str()) == Some("NvidiaBMMCluster"))
        .and_then(|r| r.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .or_else(|| cluster.metadata.name.clone())?;
    Some(ObjectRef::new(&name).within(&cluster.namespace()?))
}

/// Runs the cluster controller until the stream ends.
pub async fn run_cluster_controller(client: Client, config: ControllerConfig) {
    let (api, capi): (Api<NvidiaBMMCluster>, Api<DynamicObject>) = match &config.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced_with(client.clone(), ns, &capi_resource("Cluster", "clusters")),
        ),
        None => (
            Api::all(client.clone()),
            Api::all_with(client.clone(), &capi_resource("Cluster", "clusters")),
        ),
    };
    let ctx = Ctx::shared(client, config);
    let on_cluster = ctx.clone();
    let controller = Controller::new(api, watcher::Config::default())
        .trigger_backoff(watch_backoff())
        .watches_with(
            capi,
            capi_resource("Cluster", "clusters"),
            watcher::Config::default(),
            move |c| {
                let target = infrastructure_of(&c);
                let fingerprint = related::cluster_fingerprint(&c);
                on_cluster
                    .related
                    .clusters
                    .keep(c, fingerprint)
                    .then_some(target)
                    .flatten()
            },
        );
    log_failures(
        "cluster",
        controller.run(reconcile_cluster_object, requeue_after_error, ctx),
    )
    .await;
}

async fn reconcile_cluster_object(
    obj: Arc<NvidiaBMMCluster>,
    ctx: Arc<Ctx>,
) -> Result<Action, ControllerError> {
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let key = format!("{namespace}/{}", obj.name_any());
    if obj.labels().contains_key(MANAGED_BY_LABEL) {
        return Ok(Action::await_change());
    }
    let owner = obj
        .owner_references()
        .iter()
        .find(|o| o.kind == "Cluster" && o.api_version.starts_with("cluster.x-k8s.io/"))
        .cloned();
    let deleting = obj.metadata.deletion_timestamp.is_some();
    if owner.is_none() && !deleting {
        return Ok(Action::await_change());
    }
    let cluster = match &owner {
        Some(owner) => match ctx.related.clusters.get(&namespace, &owner.name) {
            Some(c) => Some(c),
            None => {
                let clusters: Api<DynamicObject> = Api::namespaced_with(
                    ctx.client.clone(),
                    &namespace,
                    &capi_resource("Cluster", "clusters"),
                );
                clusters.get_opt(&owner.name).await?.map(|c| {
                    let f = related::cluster_fingerprint(&c);
                    ctx.related.clusters.keep_if_absent(c.clone(), f);
                    Arc::new(c)
                })
            }
        },
        None => None,
    };
    let inputs = fingerprint(&(
        related::own_inputs(&obj.metadata, &obj.spec),
        cluster.as_deref().map(related::cluster_inputs),
    ));
    let outcome = paced(
        &ctx,
        "cluster",
        &key,
        (inputs, None),
        reconcile_cluster_with(&obj, &ctx, cluster.as_deref()),
    )
    .await;
    if deleting && !obj.finalizers().iter().any(|f| f == CLUSTER_FINALIZER) {
        ctx.pacing.forget(&key);
    }
    outcome
}

async fn reconcile_cluster_with(
    obj: &NvidiaBMMCluster,
    ctx: &Ctx,
    cluster: Option<&DynamicObject>,
) -> Result<Next, ControllerError> {
    let namespace = obj.namespace().unwrap_or_else(|| "default".into());
    let name = obj.name_any();
    let api: Api<NvidiaBMMCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    tracing::debug!(%namespace, %name, "reconciling NvidiaBMMCluster");
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let has_finalizer = obj.finalizers().iter().any(|f| f == CLUSTER_FINALIZER);
    let mut status = obj.status.clone().unwrap_or_default();
    let written = obj.status.as_ref();
    let now = now();
    if obj.annotations().contains_key(PAUSED_ANNOTATION) || cluster_paused(cluster) {
        set_paused(&mut status.conditions, &now);
        report(&api, &name, &status, written).await?;
        return Ok(Next::Change);
    }
    if deleting && !has_finalizer {
        return Ok(Next::Change);
    }
    // Finalizer first, persisted before anything is created.
    if !deleting && !has_finalizer {
        let mut finalizers = obj.finalizers().to_vec();
        finalizers.push(CLUSTER_FINALIZER.to_string());
        set_finalizers(&api, &name, finalizers).await?;
        return Ok(Next::After(Duration::from_millis(10)));
    }
    let credentials = match credentials::usable_or_report(
        ctx,
        &api,
        (&namespace, &name),
        obj.spec.authentication.as_ref().map(|a| &a.secret_ref),
        &mut status,
        written,
        &now,
    )
    .await?
    {
        Ok(c) => c,
        Err(next) => return Ok(next),
    };
    let mut record = ClusterRecord {
        namespace: namespace.clone(),
        name: name.clone(),
        spec: obj.spec.clone(),
        status,
        finalizer: true,
        control_plane_endpoint: None,
        labels: Default::default(),
    };
    let outcome = reconcile_cluster(&credentials.client, &mut record, deleting, None).await;
    tracing::debug!(%namespace, %name, ?outcome, ready = record.status.ready, "NvidiaBMMCluster reconciled");
    let next = settle(
        ctx,
        &super::object_key(&obj.metadata),
        &credentials,
        outcome,
        ctx.config.poll,
        &mut record.status.conditions,
        &now,
    );
    report(&api, &name, &record.status, written).await?;
    if deleting && !record.finalizer {
        let finalizers: Vec<String> = obj
            .finalizers()
            .iter()
            .filter(|f| *f != CLUSTER_FINALIZER)
            .cloned()
            .collect();
        set_finalizers(&api, &name, finalizers).await?;
    }
    Ok(next)
}
