//! One reconcile of an NFTopology against Porch: plan, then make the cluster match the plan —
//! PackageVariantSets and Capacities (server-side apply, owned by the topology, written only
//! when they differ), gates on the PackageRevisions, the NFDeployedTopology and the status.
//! Every write is preceded by a comparison with what is there, so a reconcile of an unchanged
//! state writes nothing. A deleted topology's children are deleted by ntc itself, behind its
//! [`FINALIZER`], before the topology is let go.

use std::sync::Arc;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use nephrite_krm::keys::NF_DEPLOYMENT_NAME;
use nephrite_krm::{Condition, Object, OwnerReference};
use nephrite_topology::api::{Cluster, NFClass, NFTopology, NFTopologyStatus};
use nephrite_topology::porch::{self, Observation, RevisionView};
use nephrite_topology::status::{error_status, topology_status};
use nephrite_topology::{DeployedTopologyBuilder, RolloutPolicy, plan};
use serde_json::{Value, json};

use super::resources;

/// The finalizer ntc holds on every NFTopology it plans: the topology's PackageVariantSets,
/// Capacities and NFDeployedTopology are deleted before the topology goes, without relying on
/// a garbage collector to follow their owner references. Porch applies the topology's
/// `deletionPolicy` (written into each PackageVariantSet's template) to the packages.
pub const FINALIZER: &str = "topology.nephio.org/ntc";

/// What every reconcile shares.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// The rollout policy.
    pub policy: RolloutPolicy,
    /// The field manager of every write: server-side applies and merge patches alike, so
    /// `managedFields` names ntc for each field it wrote.
    pub field_manager: String,
}

impl Context {
    /// A merge patch's parameters, under ntc's field manager.
    fn merge_params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        }
    }
}

/// A reconcile that failed; the controller retries it.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API server refused or could not be reached.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be converted.
    #[error("object {name}: {message}")]
    Object {
        /// Which object.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// The topology has no namespace.
    #[error("NFTopology {0} has no namespace")]
    NoNamespace(String),
}

fn to_krm(object: &DynamicObject) -> Result<Object, ReconcileError> {
    let fail = |message: String| ReconcileError::Object {
        name: object.name_any(),
        message,
    };
    let value = serde_json::to_value(object).map_err(|e| fail(e.to_string()))?;
    Object::from_json(value).map_err(|e| fail(e.to_string()))
}

fn to_dynamic(object: &Object) -> Result<DynamicObject, ReconcileError> {
    serde_json::from_value(object.to_json()).map_err(|e| ReconcileError::Object {
        name: object.name().unwrap_or("").to_owned(),
        message: e.to_string(),
    })
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// Reconciles one NFTopology.
pub async fn reconcile(
    topology: Arc<DynamicObject>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let name = topology.name_any();
    let namespace = topology
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace(name.clone()))?;
    let topologies: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &resources::nf_topology());
    let finalizers = topology.finalizers();
    let held = finalizers.iter().any(|f| f == FINALIZER);
    if topology.metadata.deletion_timestamp.is_some() {
        if held {
            let children = Children {
                ctx: &ctx,
                namespace: &namespace,
                topology: &name,
                owner: &owner_of(&topology, &name),
            };
            for resource in [
                resources::package_variant_set(),
                resources::capacity(),
                resources::nf_deployed_topology(),
            ] {
                children.sync(&resource, Vec::new()).await?;
            }
            let rest: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
            write_finalizers(&ctx, &topologies, &topology, &name, json!(rest)).await?;
        }
        return Ok(Action::await_change());
    }
    if !held {
        let mut with = finalizers.to_vec();
        with.push(FINALIZER.to_owned());
        write_finalizers(&ctx, &topologies, &topology, &name, json!(with)).await?;
    }
    let previous: Option<NFTopologyStatus> = topology
        .data
        .get("status")
        .and_then(|s| serde_json::from_value(s.clone()).ok());
    let previous_conditions: Vec<Condition> = previous
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();

    let typed: NFTopology = match serde_json::to_value(&*topology).and_then(serde_json::from_value)
    {
        Ok(typed) => typed,
        Err(e) => {
            let mut status = NFTopologyStatus::default();
            nephrite_krm::condition::set_condition(
                &mut status.conditions,
                Condition::new("Ready", nephrite_krm::ConditionStatus::False)
                    .with_reason("InvalidSpec")
                    .with_message(e.to_string()),
                &now(),
            );
            write_status(&ctx, &topologies, &name, previous.as_ref(), &status).await?;
            return Ok(Action::await_change());
        }
    };

    let classes = list_classes(&ctx.client).await?;
    let clusters = list_clusters(&ctx.client, &namespace).await?;
    let plan = match plan::plan(&typed, &classes, &clusters, &ctx.policy) {
        Ok(plan) => plan,
        Err(error) => {
            tracing::warn!(topology = %name, %error, "not planned");
            let status = error_status(&error, &previous_conditions, &now());
            write_status(&ctx, &topologies, &name, previous.as_ref(), &status).await?;
            return Ok(Action::await_change());
        }
    };

    let owner = owner_of(&topology, &name);
    let children = Children {
        ctx: &ctx,
        namespace: &namespace,
        topology: &name,
        owner: &owner,
    };
    let pvs = porch::package_variant_sets(&plan);
    children
        .sync(&resources::package_variant_set(), pvs)
        .await?;
    let mut capacities = Vec::new();
    for i in 0..plan.instances().len() {
        if let Some(capacity) = porch::capacity(&plan, i) {
            capacities.push(
                Object::from_typed(&capacity).map_err(|e| ReconcileError::Object {
                    name: porch::capacity_name(&plan, i),
                    message: e.to_string(),
                })?,
            );
        }
    }
    children.sync(&resources::capacity(), capacities).await?;

    // PackageRevisions: gates, published variants, package status.
    let revisions: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &namespace,
        &resources::package_revision(),
    );
    let listed = revisions
        .list(&ListParams::default().labels(&format!("{NF_DEPLOYMENT_NAME}={name}")))
        .await?;
    let mut views = Vec::new();
    for item in &listed.items {
        if let Some(view) = RevisionView::read(&to_krm(item)?) {
            views.push(view);
        }
    }
    let observation = Observation::new(&plan, views);
    for update in observation.gate_updates(&plan) {
        tracing::info!(topology = %name, revision = %update.name, gates = update.readiness_gates.len(), "gating");
        revisions
            .patch(
                &update.name,
                &ctx.merge_params(),
                &Patch::Merge(update.merge_patch()),
            )
            .await?;
    }
    let mut builder = DeployedTopologyBuilder::new(&plan);
    for v in 0..plan.variants().len() {
        if observation.is_published(v) {
            builder.publish_variant(v);
        }
    }
    let deployed = Object::from_typed(&builder.resource()).map_err(|e| ReconcileError::Object {
        name: name.clone(),
        message: e.to_string(),
    })?;
    let keep_empty = builder.published_count() > 0;
    children
        .sync_one(&resources::nf_deployed_topology(), deployed, keep_empty)
        .await?;

    let status = topology_status(&plan, &observation, &builder, &previous_conditions, &now());
    write_status(&ctx, &topologies, &name, previous.as_ref(), &status).await?;
    Ok(Action::await_change())
}

/// The owner reference every child of `topology` carries.
fn owner_of(topology: &DynamicObject, name: &str) -> OwnerReference {
    let resource = resources::nf_topology();
    OwnerReference {
        api_version: resource.api_version,
        kind: resource.kind,
        name: name.to_owned(),
        uid: topology.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        extra: Default::default(),
    }
}

/// Writes the topology's finalizers, refused (409) if the topology changed since it was read:
/// the controller then retries with the current one, so no other finalizer is lost.
async fn write_finalizers(
    ctx: &Context,
    api: &Api<DynamicObject>,
    topology: &DynamicObject,
    name: &str,
    finalizers: Value,
) -> Result<(), ReconcileError> {
    let patch = json!({"metadata": {
        "resourceVersion": topology.resource_version(),
        "finalizers": finalizers,
    }});
    api.patch(name, &ctx.merge_params(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

async fn list_classes(client: &Client) -> Result<Vec<NFClass>, ReconcileError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resources::nf_class());
    let mut classes = Vec::new();
    for item in api.list(&ListParams::default()).await?.items {
        match serde_json::to_value(&item).and_then(serde_json::from_value::<NFClass>) {
            Ok(class) => classes.push(class),
            Err(error) => {
                tracing::warn!(class = %item.name_any(), %error, "ignoring unreadable NFClass")
            }
        }
    }
    Ok(classes)
}

async fn list_clusters(client: &Client, namespace: &str) -> Result<Vec<Cluster>, ReconcileError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resources::workload_cluster());
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|item| Cluster {
            name: item.name_any(),
            labels: item
                .labels()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
        .collect())
}

/// Writes `status` unless it equals `previous`. Every list is written, empty or not, so that a
/// merge patch replaces what was there.
async fn write_status(
    ctx: &Context,
    api: &Api<DynamicObject>,
    name: &str,
    previous: Option<&NFTopologyStatus>,
    status: &NFTopologyStatus,
) -> Result<(), ReconcileError> {
    if previous == Some(status) {
        return Ok(());
    }
    let patch = json!({"status": {
        "numNFDeployed": status.num_nf_deployed,
        "conditions": status.conditions,
        "nfInstances": status.nf_instances,
        "packages": status.packages,
    }});
    api.patch_status(name, &ctx.merge_params(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// The objects a topology owns, in its namespace, found by the `nf-deployment-name` label.
struct Children<'a> {
    ctx: &'a Context,
    namespace: &'a str,
    topology: &'a str,
    owner: &'a OwnerReference,
}

impl Children<'_> {
    fn prepare(&self, mut object: Object) -> Object {
        object.set_namespace(Some(self.namespace.to_owned()));
        let _ = object.set_label(NF_DEPLOYMENT_NAME, self.topology);
        object.metadata.details_mut().owner_references = Some(vec![self.owner.clone()]);
        object
    }

    fn up_to_date(&self, existing: &Object, desired: &Object) -> bool {
        existing.spec() == desired.spec()
            && desired
                .labels()
                .iter()
                .all(|(k, v)| existing.label(k) == Some(v.as_str()))
            && existing
                .metadata
                .details()
                .owner_references
                .as_ref()
                .is_some_and(|refs| refs.iter().any(|r| r.uid == self.owner.uid))
    }

    async fn apply(
        &self,
        api: &Api<DynamicObject>,
        desired: &Object,
    ) -> Result<(), ReconcileError> {
        let name = desired.name().unwrap_or("").to_owned();
        tracing::info!(topology = %self.topology, kind = %desired.kind, %name, "applying");
        let params = PatchParams::apply(&self.ctx.field_manager).force();
        api.patch(&name, &params, &Patch::Apply(to_dynamic(desired)?))
            .await?;
        Ok(())
    }

    /// Makes the labelled objects of `resource` exactly `desired`: applies what differs,
    /// deletes what the topology owns but no longer wants.
    async fn sync(
        &self,
        resource: &ApiResource,
        desired: Vec<Object>,
    ) -> Result<(), ReconcileError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), self.namespace, resource);
        let existing = api
            .list(&ListParams::default().labels(&format!("{NF_DEPLOYMENT_NAME}={}", self.topology)))
            .await?;
        let mut existing: Vec<Object> = existing
            .items
            .iter()
            .map(to_krm)
            .collect::<Result<_, _>>()?;
        for desired in desired {
            let desired = self.prepare(desired);
            let position = existing.iter().position(|e| e.name() == desired.name());
            let current = position.map(|p| existing.swap_remove(p));
            if current.is_none_or(|c| !self.up_to_date(&c, &desired)) {
                self.apply(&api, &desired).await?;
            }
        }
        for stale in existing {
            let owned = stale
                .metadata
                .details()
                .owner_references
                .as_ref()
                .is_some_and(|refs| refs.iter().any(|r| r.uid == self.owner.uid));
            if let (true, Some(name)) = (owned, stale.name()) {
                tracing::info!(topology = %self.topology, kind = %stale.kind, %name, "deleting");
                api.delete(name, &DeleteParams::default()).await?;
            }
        }
        Ok(())
    }

    /// Applies one object when it differs; when it does not exist yet it is created only if
    /// `create` (the deployed topology appears with the first published package).
    async fn sync_one(
        &self,
        resource: &ApiResource,
        desired: Object,
        create: bool,
    ) -> Result<(), ReconcileError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), self.namespace, resource);
        let desired = self.prepare(desired);
        let name = desired.name().unwrap_or("").to_owned();
        match api.get_opt(&name).await? {
            None if !create => Ok(()),
            None => self.apply(&api, &desired).await,
            Some(current) => {
                let current = to_krm(&current)?;
                if self.up_to_date(&current, &desired) {
                    Ok(())
                } else {
                    // A merge-style apply would keep list entries only by replacing the list:
                    // the spec is written whole.
                    let patch = json!({"spec": desired.spec().cloned().unwrap_or(Value::Null)});
                    api.patch(&name, &self.ctx.merge_params(), &Patch::Merge(patch))
                        .await?;
                    Ok(())
                }
            }
        }
    }
}
