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

use super::{
    ControllerConfig, ControllerError, Ctx, capi_resource, cluster_paused, log_failures, now,
    patch_status, requeue_after_error, set_finalizers, set_paused, settle, usable_credentials,
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
    let controller = Controller::new(api, watcher::Config::default()).watches_with(
        capi,
        capi_resource("Cluster", "clusters"),
        watcher::Config::default(),
        |c| infrastructure_of(&c),
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
        let clusters: Api<DynamicObject> = Api::namespaced_with(
            ctx.client.clone(),
            &namespace,
            &capi_resource("Cluster", "clusters"),
        );
        paused |= cluster_paused(clusters.get_opt(&owner.name).await?.as_ref());
    }
    if paused {
        set_paused(&mut status.conditions, &now);
        if Some(&status) != obj.status.as_ref() {
            patch_status(&api, &name, &status).await?;
        }
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
    let credentials = match usable_credentials(
        &ctx,
        &namespace,
        obj.spec.authentication.as_ref().map(|a| &a.secret_ref),
        &mut status.conditions,
        &now,
    )
    .await
    {
        Ok(c) => c,
        Err(action) => {
            if Some(&status) != obj.status.as_ref() {
                patch_status(&api, &name, &status).await?;
            }
            return Ok(action);
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
    let outcome = reconcile_cluster(&credentials.client, &mut record, deleting, None).await;
    tracing::debug!(%namespace, %name, ?outcome, ready = record.status.ready, "NvidiaBMMCluster reconciled");
    let action = settle(
        &ctx,
        &credentials,
        outcome,
        &mut record.status.conditions,
        &now,
    );
    if record.status != obj.status.clone().unwrap_or_default() {
        patch_status(&api, &name, &record.status).await?;
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
