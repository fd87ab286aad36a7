//! The Porch backend: a kube-runtime controller on NFTopology objects.
//!
//! It reconciles a topology when the topology changes, when one of its PackageVariantSets
//! changes (found by owner reference), when one of its PackageRevisions changes (found by the
//! `nf-deployment-name` label Porch propagates from the PVS template), and when any NFClass or
//! WorkloadCluster changes (every topology is looked at again). What one reconcile does is in
//! [`reconcile()`]; the decisions themselves are in `nephrite_topology::porch`. With several
//! replicas, [`election`] runs it on the one holding a Lease.

pub mod election;
pub mod reconcile;
pub mod resources;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use nephrite_krm::keys::NF_DEPLOYMENT_NAME;
use nephrite_topology::RolloutPolicy;

pub use reconcile::{Context, ReconcileError, reconcile};

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct PorchConfig {
    /// Watch NFTopologies (and their children) in this namespace only; all when `None`.
    pub namespace: Option<String>,
    /// The rollout policy.
    pub policy: RolloutPolicy,
    /// The server-side-apply field manager.
    pub field_manager: String,
}

impl Default for PorchConfig {
    fn default() -> Self {
        PorchConfig {
            namespace: None,
            policy: RolloutPolicy::default(),
            field_manager: "ntc".to_owned(),
        }
    }
}

fn api(
    client: &Client,
    namespace: Option<&str>,
    resource: &kube::api::ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    client: Client,
    config: PorchConfig,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let ns = config.namespace.as_deref();
    let topology = resources::nf_topology();
    let controller = Controller::new_with(
        api(&client, ns, &topology),
        watcher::Config::default(),
        topology.clone(),
    )
    .trigger_backoff(nephrite_runtime::watch_backoff());
    let store = controller.store();
    let all_topologies = move |_: DynamicObject| {
        store
            .state()
            .iter()
            .map(|t| ObjectRef::from_obj_with(t.as_ref(), resources::nf_topology()))
            .collect::<Vec<_>>()
    };
    let by_owner = {
        let topology = topology.clone();
        move |child: DynamicObject| {
            let namespace = child.namespace();
            child
                .owner_references()
                .iter()
                .filter(|o| o.kind == topology.kind && o.api_version == topology.api_version)
                .map(|o| {
                    let mut reference = ObjectRef::new_with(&o.name, topology.clone());
                    if let Some(ns) = &namespace {
                        reference = reference.within(ns);
                    }
                    reference
                })
                .collect::<Vec<_>>()
        }
    };
    let by_label = {
        let topology = topology.clone();
        move |revision: DynamicObject| {
            let namespace = revision.namespace();
            revision.labels().get(NF_DEPLOYMENT_NAME).map(|name| {
                let reference = ObjectRef::new_with(name, topology.clone());
                match &namespace {
                    Some(ns) => reference.within(ns),
                    None => reference,
                }
            })
        }
    };
    let context = Arc::new(Context {
        client: client.clone(),
        policy: config.policy.clone(),
        field_manager: config.field_manager.clone(),
    });
    controller
        .watches_with(
            api(&client, ns, &resources::package_variant_set()),
            resources::package_variant_set(),
            watcher::Config::default().labels(NF_DEPLOYMENT_NAME),
            by_owner,
        )
        .watches_with(
            api(&client, ns, &resources::package_revision()),
            resources::package_revision(),
            watcher::Config::default().labels(NF_DEPLOYMENT_NAME),
            by_label,
        )
        .watches_with(
            Api::all_with(client.clone(), &resources::nf_class()),
            resources::nf_class(),
            watcher::Config::default(),
            all_topologies.clone(),
        )
        .watches_with(
            api(&client, ns, &resources::workload_cluster()),
            resources::workload_cluster(),
            watcher::Config::default(),
            all_topologies,
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(topology = %object.name, "reconciled"),
                Err(error) => tracing::warn!(%error, "reconcile failed"),
            }
        })
        .await;
}

fn error_policy(_: Arc<DynamicObject>, error: &ReconcileError, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "retrying");
    Action::requeue(Duration::from_secs(2))
}
