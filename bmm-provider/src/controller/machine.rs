//! The NvidiaBMMMachine controller.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use nephrite_bmm::conditions::reason;
use nephrite_bmm::crd::{NvidiaBMMCluster, NvidiaBMMMachine};
use nephrite_bmm::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER, PAUSED_ANNOTATION};
use serde_json::json;

use super::{
    ControllerConfig, ControllerError, Ctx, capi_resource, cluster_paused, log_failures, now,
    patch_status, requeue_after_error, set_finalizers, set_not_ready, set_paused, settle,
    usable_credentials,
};
use crate::observe::{ClusterRecord, MachineRecord, reconcile_machine};

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
    let ctx = Ctx::shared(client, config);
    let controller = Controller::new(api, watcher::Config::default());
    let (by_cluster, by_infra) = (controller.store(), controller.store());
    let controller = controller
        // The owner Machine: bootstrap data, failure domain.
        .watches_with(
            capi_machines,
            capi_resource("Machine", "machines"),
            watcher::Config::default(),
            |m: DynamicObject| {
                let name = m
                    .data
                    .pointer("/spec/infrastructureRef/name")
                    .and_then(|n| n.as_str())
                    .map(str::to_string)
                    .or_else(|| m.metadata.name.clone());
                name.zip(m.namespace())
                    .map(|(n, ns)| ObjectRef::new(&n).within(&ns))
            },
        )
        // The Cluster: pause.
        .watches_with(
            capi_clusters,
            capi_resource("Cluster", "clusters"),
            watcher::Config::default(),
            move |c: DynamicObject| machines_of(&by_cluster, c.namespace(), &c.name_any()),
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
                machines_of(&by_infra, c.namespace(), &cluster)
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
    let capi_clusters: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &namespace,
        &capi_resource("Cluster", "clusters"),
    );
    let capi_cluster = capi_clusters.get_opt(&cluster_name).await?;
    if obj.annotations().contains_key(PAUSED_ANNOTATION) || cluster_paused(capi_cluster.as_ref()) {
        set_paused(&mut status.conditions, &now);
        if Some(&status) != obj.status.as_ref() {
            patch_status(&api, &name, &status).await?;
        }
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
        set_not_ready(
            &mut status.conditions,
            reason::WAITING_FOR_CLUSTER,
            format!("NvidiaBMMCluster {infra_name} not found"),
            &now,
        );
        if Some(&status) != obj.status.as_ref() {
            patch_status(&api, &name, &status).await?;
        }
        return Ok(Action::requeue(ctx.config.dependency_poll));
    };
    if !deleting && !has_finalizer {
        let mut finalizers = obj.finalizers().to_vec();
        finalizers.push(MACHINE_FINALIZER.to_string());
        set_finalizers(&api, &name, finalizers).await?;
        return Ok(Action::requeue(Duration::from_millis(10)));
    }
    let bootstrap = bootstrap_data(&ctx.client, &namespace, machine.as_ref()).await?;
    let credentials = match usable_credentials(
        &ctx,
        &namespace,
        infra.spec.authentication.as_ref().map(|a| &a.secret_ref),
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
        failure_domain: machine
            .as_ref()
            .and_then(|m| m.data.pointer("/spec/failureDomain"))
            .and_then(|d| d.as_str())
            .map(str::to_string),
    };
    let outcome =
        reconcile_machine(&credentials.client, &cluster_record, &mut record, deleting).await;
    let action = settle(
        &ctx,
        &credentials,
        outcome,
        &mut record.status.conditions,
        &now,
    );
    if record.spec.provider_id != obj.spec.provider_id && record.spec.provider_id.is_some() {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": record.spec.provider_id}})),
        )
        .await?;
    }
    if Some(&record.status) != obj.status.as_ref() {
        patch_status(&api, &name, &record.status).await?;
    }
    if deleting && !record.finalizer {
        let finalizers: Vec<String> = obj
            .finalizers()
            .iter()
            .filter(|f| *f != MACHINE_FINALIZER)
            .cloned()
            .collect();
        set_finalizers(&api, &name, finalizers).await?;
    }
    Ok(action)
}
